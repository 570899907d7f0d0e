#!/usr/bin/env bash
# CI stage: whole songs on the real ace-server (tests/real_engine/), after the main suite.
# CI has ../shared beside the clone: the engine comes from ../shared/engines (checked against
# the sha256 its README gives) and is unpacked into build/real-engine; the tests write their
# fabricated model files themselves (tests/real_engine/fabricated.py, kept in build/). Where
# the archive is not there (a user's clone) the tests skip, each saying why.
# Budget: about 10 minutes on 2 cores; the stage prints what it took.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
start=$(date +%s)
engines="$(dirname "$top")/shared/engines"
archive="$(ls "$engines"/ace-server-*-cpu-x64-*linux.tar.gz 2>/dev/null | head -n 1 || true)"

if [ -n "$archive" ]; then
  name="$(basename "$archive")"
  want="$(awk -v name="$name" 'index($0, name) { found = 1 }
    found && match($0, /sha256 [0-9a-f]+/) { print substr($0, RSTART + 7, RLENGTH - 7); exit }' \
    "$engines/README.md")"
  have="$(sha256sum "$archive" | cut -d' ' -f1)"
  if [ -z "$want" ] || [ "$want" != "$have" ]; then
    echo "real-engine: $name has sha256 $have; $engines/README.md says '${want:-nothing}'" >&2
    exit 1
  fi
  # the engine needs the system's libgomp (OpenMP) beside libstdc++
  if command -v dpkg-query >/dev/null 2>&1 && \
     ! dpkg-query -W -f='${Status}' libgomp1 2>/dev/null | grep -q "install ok installed"; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libgomp1 >/dev/null
  fi
  rm -rf build/real-engine
  mkdir -p build/real-engine
  tar -xzf "$archive" -C build/real-engine
  export CANTOR_REAL_ACE_SERVER="$top/build/real-engine/ace-server"
  echo "real-engine: $name (sha256 checked) in build/real-engine"
else
  echo "real-engine: no ace-server archive in $engines: tests/real_engine skip"
fi
# in one process (not on run-tests' xdist workers): the real engine's songs are CPU work,
# and the figures the tests print (docs/reliability.md) are those of one song at a time;
# the slow ones too (100 failing songs, 200 trials each way, kill -9 mid-job)
./run-tests -n 0 -m "slow or not slow" tests/real_engine
echo "real-engine: stage took $(( $(date +%s) - start )) s"
