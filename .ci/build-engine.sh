#!/usr/bin/env bash
# CI stage: the Linux CPU engine built as a release builds it, by packaging/engines/build.py
# from the pinned source archive in ../shared/engines, into build/engine-build (what
# .ci/real-engine.sh tests and the Linux package carries). About 2 minutes on 2 quiet cores.
# .ci/run runs it before the Windows lane starts, so the lane's PyInstaller under Wine never
# shares the machine with the compiler.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
if [ ! -d "$(dirname "$top")/shared/engines" ]; then
  echo "build-engine: no ../shared/engines: nothing to build from"
  exit 0
fi
start=$(date +%s)
rm -rf build/engine-build
python3 packaging/engines/build.py linux-x64-cpu --out build/engine-build --jobs 2 >&2
echo "build-engine: built $(basename "$(ls build/engine-build/ace-server-*-linux-x64-cpu.tar.gz)") in $(( $(date +%s) - start )) s"
