#!/usr/bin/env bash
# CI stage: whole songs on the real ace-server (tests/real_engine/), after the main suite.
# CI has ../shared beside the clone. The Linux CPU engine, built as a release builds it by
# .ci/build-engine.sh (packaging/engines/build.py from the source archive in
# ../shared/engines, into build/engine-build, which the Linux package then carries; built
# here when it is not there yet), is unpacked into build/real-engine; the Vulkan build comes from ../shared/engines (checked against the
# sha256 its README gives) into build/real-engine-vulkan, run on Mesa's lavapipe. The tests
# write their fabricated model files themselves (tests/real_engine/fabricated.py, kept in
# build/). Where ../shared/engines is not there (a user's clone) the tests skip, each saying
# why. Budget: about 12 minutes on 2 cores; the stage prints what it took.
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
  # the CPU engine as a release makes it, from the pinned source (.ci/build-engine.sh; CI
  # runs it as a stage of its own before this one)
  ls build/engine-build/ace-server-*-linux-x64-cpu.tar.gz >/dev/null 2>&1 || .ci/build-engine.sh linux-x64-cpu
  CANTOR_BUILT_ENGINE="$(ls "$top"/build/engine-build/ace-server-*-linux-x64-cpu.tar.gz)"
  rm -rf build/real-engine
  mkdir -p build/real-engine
  tar -xzf "$CANTOR_BUILT_ENGINE" -C build/real-engine
  CANTOR_REAL_ACE_SERVER="$top/build/real-engine/ace-server"
  export CANTOR_BUILT_ENGINE
  CANTOR_REAL_VULKAN_ACE_SERVER="$(unpack_engine 'ace-server-*-vulkan-x64-linux.tar.gz' \
    real-engine-vulkan)"
  export CANTOR_REAL_ACE_SERVER CANTOR_REAL_VULKAN_ACE_SERVER
else
  echo "real-engine: no $engines: tests/real_engine skip"
fi
# in one process (not on run-tests' xdist workers): the real engine's songs are CPU work,
# and the figures the tests print (docs/reliability.md) are those of one song at a time;
# the slow ones too (100 failing songs, 200 trials each way, kill -9 mid-job)
./run-tests -n 0 -m "slow or not slow" tests/real_engine \
  tests/test_engine_builds.py::test_linux_cpu_build_runs_from_a_fresh_folder
echo "real-engine: stage took $(( $(date +%s) - start )) s"
