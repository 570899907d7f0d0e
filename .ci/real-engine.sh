#!/usr/bin/env bash
# CI stage: whole songs on the real ace-server (tests/real_engine/), after the main suite.
# CI has ../shared beside the clone: the engines come from ../shared/engines (checked against
# the sha256 its README gives) and are unpacked into build/real-engine (the CPU build) and
# build/real-engine-vulkan (the Vulkan build, run on Mesa's lavapipe); the tests write their
# fabricated model files themselves (tests/real_engine/fabricated.py, kept in build/). Where
# ../shared/engines is not there (a user's clone) the tests skip, each saying why.
# Budget: about 10 minutes on 2 cores; the stage prints what it took.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
start=$(date +%s)
engines="$(dirname "$top")/shared/engines"

# unpack_engine GLOB FOLDER: the archive named in ../shared/engines/README.md, its sha256
# checked against the README's, unpacked into build/FOLDER; prints the ace-server path
unpack_engine() {
  local archive name want have
  archive="$(ls "$engines"/$1 2>/dev/null | head -n 1 || true)"
  [ -n "$archive" ] || return 1
  name="$(basename "$archive")"
  want="$(awk -v name="$name" 'index($0, name) { found = 1 }
    found && match($0, /sha256 [0-9a-f]+/) { print substr($0, RSTART + 7, RLENGTH - 7); exit }' \
    "$engines/README.md")"
  have="$(sha256sum "$archive" | cut -d' ' -f1)"
  if [ -z "$want" ] || [ "$want" != "$have" ]; then
    echo "real-engine: $name has sha256 $have; $engines/README.md says '${want:-nothing}'" >&2
    exit 1
  fi
  rm -rf "build/$2"
  mkdir -p "build/$2"
  tar -xzf "$archive" -C "build/$2"
  echo "real-engine: $name (sha256 checked) in build/$2" >&2
  echo "$top/build/$2/ace-server"
}

if [ -d "$engines" ]; then
  # the engines need the system's libgomp (OpenMP) beside libstdc++; the Vulkan one a
  # Vulkan driver: bootstrap's test packages bring Mesa's lavapipe
  if command -v dpkg-query >/dev/null 2>&1 && \
     ! dpkg-query -W -f='${Status}' libgomp1 2>/dev/null | grep -q "install ok installed"; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libgomp1 >/dev/null
  fi
  CANTOR_REAL_ACE_SERVER="$(unpack_engine 'ace-server-*-cpu-x64-*linux.tar.gz' real-engine)"
  CANTOR_REAL_VULKAN_ACE_SERVER="$(unpack_engine 'ace-server-*-vulkan-x64-linux.tar.gz' \
    real-engine-vulkan)"
  export CANTOR_REAL_ACE_SERVER CANTOR_REAL_VULKAN_ACE_SERVER
else
  echo "real-engine: no $engines: tests/real_engine skip"
fi
# in one process (not on run-tests' xdist workers): the real engine's songs are CPU work,
# and the figures the tests print (docs/reliability.md) are those of one song at a time;
# the slow ones too (100 failing songs, 200 trials each way, kill -9 mid-job)
./run-tests -n 0 -m "slow or not slow" tests/real_engine
echo "real-engine: stage took $(( $(date +%s) - start )) s"
