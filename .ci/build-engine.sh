#!/usr/bin/env bash
# CI stage: the CPU engines built as a release builds them, by packaging/engines/build.py
# from the pinned source archive in ../shared/engines: linux-x64-cpu into build/engine-build
# (what .ci/real-engine.sh tests and the Linux package carries) and windows-x64-cpu,
# cross-compiled with mingw-w64, into build/engine-build-windows (what the Windows lane's
# bundle and MSI carry). About 3 minutes on 2 quiet cores. .ci/run runs it before the
# Windows lane starts, so the lane's PyInstaller under Wine never shares the machine with
# the compiler.
#   .ci/build-engine.sh [TARGET]    one of linux-x64-cpu, windows-x64-cpu; both without one
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
if [ ! -d "$(dirname "$top")/shared/engines" ]; then
  echo "build-engine: no ../shared/engines: nothing to build from"
  exit 0
fi
build_one() {  # TARGET FOLDER
  local start
  start=$(date +%s)
  rm -rf "build/$2"
  python3 packaging/engines/build.py "$1" --out "build/$2" --jobs 2 >&2
  echo "build-engine: built $(basename "$(ls build/"$2"/ace-server-*-"$1".*)") in $(( $(date +%s) - start )) s"
}
case "${1:-all}" in
  linux-x64-cpu) build_one linux-x64-cpu engine-build ;;
  windows-x64-cpu) build_one windows-x64-cpu engine-build-windows ;;
  all) build_one linux-x64-cpu engine-build
       build_one windows-x64-cpu engine-build-windows ;;
  *) echo "build-engine: no target '$1' (linux-x64-cpu, windows-x64-cpu)" >&2; exit 2 ;;
esac
