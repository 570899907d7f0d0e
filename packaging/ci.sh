#!/usr/bin/env bash
# CI for the Linux packaging (about 2-3 minutes on 2 cores):
#   1. build the PyInstaller bundle and the .deb (packaging/build.sh linux, no tarball or
#      start-up figures);
#   2. unpack the .deb into a scratch root with dpkg-deb -x and check its files (.desktop
#      entry, icons, /usr/bin wrappers);
#   3. check that scipy is not in the bundle; run the self-test from there: the frozen
#      executable starts its own node and sketch engine, renders two songs and checks them,
#      exports one to MP3 at -14 LUFS, opens the main window offscreen;
#   4. start the app once on X11 (xvfb-run, when installed) to load the xcb platform plugin;
#   5. with CANTOR_BUNDLE_ENGINES_FROM=DIR (CI: build/engine-build, where .ci/real-engine.sh
#      built the CPU engine), the package carries that engine, and the frozen `cantor
#      backends --json` on a fresh home lists it installed, "came with Cantor".
# A missing hidden import, a Qt library the filter dropped or a broken wrapper fails it.
# Exits non-zero on any failure.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
start=$(date +%s)

rm -f dist/cantor_*.deb
engines_from="${CANTOR_BUNDLE_ENGINES_FROM:-}"
if [ -n "$engines_from" ]; then
  ls "$engines_from"/ace-server-*-linux-x64-cpu.tar.gz >/dev/null 2>&1 ||
    { echo "ci.sh: no built CPU engine in $engines_from (.ci/real-engine.sh builds it)" >&2; exit 1; }
  rm -rf build/bundled-engines
  # release.py reads the rows as Cantor does: in the build's own environment (as build.sh
  # makes it, exactly as uv.lock pins it)
  UV_PROJECT_ENVIRONMENT="$top/build/venv" scripts/bootstrap.sh --exact packaging
  build/venv/bin/python packaging/engines/release.py "$engines_from" --bundle build/bundled-engines
  export CANTOR_BUNDLE_ENGINES="$top/build/bundled-engines"
else
  echo "ci.sh: no CANTOR_BUNDLE_ENGINES_FROM: the package carries no engine"
fi
packaging/build.sh linux --no-installers --no-figures
CANTOR_DEB_COMPRESSION="${CANTOR_DEB_COMPRESSION:-zstd}" installer/linux/build_deb.sh dist/cantor dist
deb="$(ls dist/cantor_*_"$(dpkg --print-architecture)".deb)"

scratch="$(mktemp -d "${TMPDIR:-/tmp}/cantor-ci.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
dpkg-deb -I "$deb" control >/dev/null

fail() { echo "ci.sh: $*" >&2; exit 1; }
for f in opt/cantor/cantor-desktop usr/bin/cantor usr/bin/cantor-desktop \
         usr/share/applications/cantor.desktop usr/share/icons/hicolor/256x256/apps/cantor.png \
         usr/share/icons/hicolor/scalable/apps/cantor.svg; do
  [ -e "$scratch/$f" ] || fail "the .deb has no /$f"
done
grep -q '^Exec=cantor-desktop' "$scratch/usr/share/applications/cantor.desktop" || fail "cantor.desktop: Exec"
grep -q '^Icon=cantor$' "$scratch/usr/share/applications/cantor.desktop" || fail "cantor.desktop: Icon"
if command -v desktop-file-validate >/dev/null 2>&1; then
  desktop-file-validate "$scratch/usr/share/applications/cantor.desktop"
fi
# the export's loudness is numpy alone: scipy (pulled in by pyloudnorm, the tests'
# reference) must be neither a folder of the bundle nor a module of its archive
if [ -n "$(find dist/cantor -type d \( -name scipy -o -name scipy.libs -o -name pyloudnorm \) -print -quit)" ] ||
   grep -q "'scipy\|'pyloudnorm" build/pyinstaller/cantor/PYZ-00.toc; then
  fail "scipy or pyloudnorm is in the bundle (packaging/cantor.spec excludes them)"
fi
version="$("$scratch/usr/bin/cantor" --version)" || fail "/usr/bin/cantor --version failed"
echo "ci.sh: $deb: $version"

if [ -n "$engines_from" ]; then
  # the engine in the box: a fresh home's first `cantor backends` installs and lists it
  ehome="$scratch/engine-home"
  mkdir -p "$ehome"
  listed="$(CANTOR_HOME="$ehome" PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring \
            "$scratch/usr/bin/cantor" backends --json)" || fail "cantor backends --json failed"
  echo "$listed" | python3 -c 'import json, sys
st = json.load(sys.stdin)
rows = st.get("backends") or []
cpu = next((b for b in rows if b.get("name") == "cpu"), None)
ok = cpu is not None and cpu.get("installed") and any("came with Cantor" in e for e in cpu.get("evidence") or [])
print("ci.sh: the bundled CPU engine:", (cpu or {}).get("version"), "installed" if ok else "NOT installed")
sys.exit(0 if ok else 1)' || { echo "$listed" | head -60; fail "the package's CPU engine is not installed on a fresh home"; }
fi

t0=$(date +%s)
"$scratch/usr/bin/cantor-desktop" --self-test || fail "the self-test from the unpacked .deb failed"
echo "ci.sh: self-test from the .deb took $(( $(date +%s) - t0 )) s"

# the self-test runs offscreen; on a real X server the xcb platform plugin and the X
# libraries it links must load from the bundle too
if command -v xvfb-run >/dev/null 2>&1; then
  xhome="$scratch/xcb-home"
  mkdir -p "$xhome"
  out="$(env -u QT_QPA_PLATFORM -u WAYLAND_DISPLAY CANTOR_HOME="$xhome" \
         PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring timeout 120 \
         xvfb-run -a "$scratch/usr/bin/cantor-desktop" --measure-startup 2>&1)" || {
    echo "$out"; fail "the app did not start on X11 (xvfb, the xcb platform plugin)"; }
  echo "ci.sh: X11 (xvfb): $(echo "$out" | grep '^first-paint')"
  left="$(build/venv/bin/python -c 'import sys; from cantor_desktop.bundle.selftest import end_leftovers
print(" ".join(map(str, end_leftovers(sys.argv[1]))))' "$xhome")"
  [ -z "$left" ] || echo "ci.sh: warning: the app left processes running after it quit (pids $left; ended)"
else
  echo "ci.sh: no xvfb-run: the X11 start is not checked"
fi
echo "ci.sh: passed in $(( $(date +%s) - start )) s"
