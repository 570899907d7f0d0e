#!/usr/bin/env bash
# Build Cantor for one target and print its figures. One command per target:
#
#   packaging/build.sh linux     bundle dist/cantor/, the .deb and the tarball   (Linux)
#   packaging/build.sh windows   bundle dist/cantor/ and the MSI installer (Windows, from
#                                Git Bash, with msitools' wixl; on Linux: the Windows lane)
#   packaging/build.sh macos     dist/Cantor.app and the .dmg, for the architecture of
#                                the build's Python (arm64 or x86_64; one build each) (macOS)
#
# Options: --no-installers (bundle only), --no-figures (skip start-up and self-test
# figures), --clean (rebuild PyInstaller's cache too). Figures printed at the end:
# unpacked bundle size (goal <= 200 MiB), frozen/unfrozen start to first window (goal
# <= 1.2x), self-test time. Exits non-zero when any step fails.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"

target="${1:-}"
shift || true
installers=1 figures=1 clean=()
for arg in "$@"; do
  case "$arg" in
    --no-installers) installers=0 ;;
    --no-figures) figures=0 ;;
    --clean) clean=(--clean) ;;
    *) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
case "$target" in
  linux|windows|macos) ;;
  *) echo "usage: packaging/build.sh linux|windows|macos [--no-installers] [--no-figures] [--clean]" >&2
     exit 2 ;;
esac

# --- the Python that builds ------------------------------------------------------------------
# Exactly the packages uv.lock names, with the packaging extra (PyInstaller), in an
# environment of its own (build/venv, synced exactly: nothing a test run or a hand added),
# on every target: a bundle made next month has the packages of today's test run. On
# Linux bootstrap also installs the Debian packages Qt needs; on Windows (Git Bash) and
# macOS it skips that and installs uv and the environment the same way.
export UV_PROJECT_ENVIRONMENT="$top/build/venv"
"$top/scripts/bootstrap.sh" --exact packaging
py="$UV_PROJECT_ENVIRONMENT/bin/python"
[ -x "$UV_PROJECT_ENVIRONMENT/Scripts/python.exe" ] && py="$UV_PROJECT_ENVIRONMENT/Scripts/python.exe"
"$py" -c "import PyInstaller" || { echo "build.sh: $py has no PyInstaller" >&2; exit 1; }

# --- the bundle ------------------------------------------------------------------------------
t0=$(date +%s)
echo "build.sh: PyInstaller ($target) ..."
"$py" -m PyInstaller --noconfirm "${clean[@]}" --log-level WARN \
      --distpath "$top/dist" --workpath "$top/build/pyinstaller" "$top/packaging/cantor.spec"
build_s=$(( $(date +%s) - t0 ))

case "$target" in
  linux)   bundle="$top/dist/cantor";      exe="$bundle/cantor-desktop" ;;
  windows) bundle="$top/dist/cantor";      exe="$bundle/cantor.exe" ;;
  macos)   bundle="$top/dist/Cantor.app";  exe="$bundle/Contents/MacOS/cantor-desktop" ;;
esac
[ -e "$exe" ] || { echo "build.sh: the build made no $exe" >&2; exit 1; }

if [ "$target" = linux ]; then
  # every library a bundled binary links must be in the bundle or on the system; a Qt one
  # missing means the Qt filter dropped too much
  missing="$(cd "$bundle/_internal" && find . -type f -name '*.so*' -print0 |
             xargs -0 -n 40 env LD_LIBRARY_PATH="$PWD:$PWD/PySide6/Qt/lib" ldd 2>/dev/null |
             awk '/not found/ {print $1}' | sort -u | paste -sd' ' -)" || true
  if echo " $missing " | grep -q " libQt6"; then
    echo "build.sh: Qt libraries linked but not in the bundle: $missing" >&2
    exit 1
  fi
  [ -z "$missing" ] || echo "build.sh: note: libraries left to the system (absent here): $missing"
fi
"$exe" --mode cli --version >/dev/null || { echo "build.sh: $exe --mode cli --version failed" >&2; exit 1; }

# --- installers ------------------------------------------------------------------------------
if [ "$installers" = 1 ]; then
  case "$target" in
    linux)
      "$top/installer/linux/build_deb.sh" "$bundle" "$top/dist"
      "$top/installer/linux/build_tarball.sh" "$bundle" "$top/dist" ;;
    windows)
      # the per-user MSI (installer/windows/cantor.wxs), made with msitools' wixl (MSYS2:
      # mingw-w64-x86_64-msitools); on Linux, packaging/windows-lane/lane.py build makes
      # the same bundle and MSI under Wine
      version="$("$exe" --mode cli --version | awk '{print $2}' | tr -d '\r')"
      # Authenticode (installer/windows/sign.py, osslsigncode) when the release's
      # certificate is given: CANTOR_SIGN_PKCS12 (a file) and CANTOR_SIGN_PASSWORD (a secret)
      signing=()
      if [ -n "${CANTOR_SIGN_PKCS12:-}" ]; then
        signing=("$py" "$top/installer/windows/sign.py" --pkcs12 "$CANTOR_SIGN_PKCS12"
                 --password-env CANTOR_SIGN_PASSWORD --timestamp "${CANTOR_SIGN_TIMESTAMP:-http://timestamp.digicert.com}")
        "${signing[@]}" "$bundle/cantor.exe" "$bundle/cantor-desktop.exe"
      fi
      "$py" "$top/installer/windows/build_msi.py" "$bundle" "$top/dist" --version "$version"
      if [ ${#signing[@]} -gt 0 ]; then
        "${signing[@]}" "$(ls -t "$top"/dist/cantor-*-windows-x64.msi | head -n 1)"
      fi ;;
    macos)
      CANTOR_PYTHON="$py" "$top/installer/macos/make_dmg.sh" "$bundle" "$top/dist" ;;
  esac
fi

# --- figures ---------------------------------------------------------------------------------
now() { "$py" -c 'import time; print(f"{time.time():.2f}")'; }
size_mib=$("$py" -c '
import os, sys
total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(sys.argv[1])
            for f in fs if not os.path.islink(os.path.join(d, f)))
print(f"{total / 2**20:.0f}")' "$bundle")
echo
echo "== figures ($target) =="
echo "bundle build:      ${build_s} s"
echo "bundle size:       ${size_mib} MiB unpacked ($bundle; goal <= 200 MiB)"
if [ "$figures" = 1 ]; then
  if [ "$target" = linux ] || [ "$target" = macos ]; then
    echo -n "start-up:          "
    "$py" "$top/packaging/measure_startup.py" "$exe" --python "$py"
  fi
  t0=$(now)
  "$exe" --self-test > "$top/build/selftest.log" 2>&1 || {
    cat "$top/build/selftest.log"; echo "build.sh: the self-test failed" >&2; exit 1; }
  t1=$(now)
  echo "self-test:         $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b-a}') s (passed; log build/selftest.log)"
fi
