#!/usr/bin/env bash
# Set up everything Cantor needs from nothing on a Debian/Ubuntu machine with Python 3.11+:
# the Debian libraries Qt needs (when missing), uv, a virtual environment in .venv, and the
# Python packages exactly as uv.lock pins them. Safe to run again: it only does what is
# missing. A failing install fails here, with uv's own message.
#   usage: scripts/bootstrap.sh [--exact] [EXTRAS]    e.g. scripts/bootstrap.sh test
# EXTRAS: test, packaging, or both (test,packaging). --exact also removes what the lock does
# not name (the bundle's build environment); without it, packages of other extras stay.
# The environment is .venv, or $UV_PROJECT_ENVIRONMENT when set (uv's own variable).
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exact=0
if [ "${1:-}" = "--exact" ]; then exact=1; shift; fi
extras="${1:-}"

# Debian packages: Qt's xcb/offscreen platforms, fonts, sound, the keyring's D-Bus, Xvfb.
debs=(libegl1 libgl1 libopengl0 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libfreetype6
      fonts-dejavu-core libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
      libxcb-shape0 libxcb-image0 libxcb-render-util0 libxcb-randr0 libxcb-xinerama0
      libxcb-xkb1 libx11-xcb1 libxrender1 libxi6 libsm6 libice6 libpulse0 libasound2
      xvfb xauth curl python3-venv)
# What the tests and the bench run besides Python (with the test or bench extra): a pool's
# redis-server, readelf (the bundle's ELF walk), OpenSSL 3 (manifest signatures made the
# other way), llvm-otool (Mach-O checks), chattr (a file that cannot be deleted), and a
# real Vulkan driver with its loader and vulkaninfo (Mesa's lavapipe, a software device), and
# what CI builds the CPU engines with (packaging/engines/build.py: CMake, a C++ compiler,
# make, and mingw-w64 with posix threads for the Windows one; the Linux engine runs on the
# system's libgomp), and what a screen reader meets the app through (the AT-SPI bus of
# at-spi2-core on a D-Bus session bus, pyatspi for the system's Python, and a PulseAudio
# sound server whose null output lets Play play: tests/test_ui_atspi.py).
case ",$extras," in
  *,test,* | *,bench,*) debs+=(redis-server binutils openssl llvm e2fsprogs
                               libvulkan1 mesa-vulkan-drivers vulkan-tools
                               cmake g++ make libgomp1
                               g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix
                               dbus at-spi2-core python3 python3-pyatspi pulseaudio) ;;
esac
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # a package name may differ between releases (libasound2 vs libasound2t64): try each;
    # one that cannot be installed under either name stops the set-up, named
    if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
      failed=()
      for p in "${missing[@]}"; do
        $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 && continue
        case "$p" in
          libasound2) $sudo apt-get install -y -qq --no-install-recommends libasound2t64 \
                        >/dev/null 2>&1 && continue ;;
        esac
        failed+=("$p")
      done
      if [ ${#failed[@]} -gt 0 ]; then
        echo "bootstrap: could not install the Debian packages ${failed[*]}" \
             "(apt-get install ${failed[*]} says why)" >&2
        exit 1
      fi
    fi
  fi
fi

python=""
for cand in python3.13 python3.12 python3.11 python3 python; do
  if command -v "$cand" >/dev/null 2>&1 && \
     "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python="$cand"; break
  fi
done
[ -n "$python" ] || { echo "bootstrap: Cantor needs Python 3.11 or newer" >&2; exit 1; }

# uv installs exactly what uv.lock names (the same packages for the venv, CI and the frozen
# bundles). It comes from PyPI at the version below, into .tools/ beside the checkout.
uv_version="0.13.9"
tools="$top/.tools"
uv="$tools/bin/uv"; [ -x "$tools/Scripts/uv.exe" ] && uv="$tools/Scripts/uv.exe"
if ! { [ -x "$uv" ] && "$uv" --version 2>/dev/null | grep -qx "uv $uv_version.*"; }; then
  echo "bootstrap: installing uv $uv_version into .tools"
  rm -rf "$tools"
  "$python" -m venv "$tools"
  tpy="$tools/bin/python"; [ -x "$tools/Scripts/python.exe" ] && tpy="$tools/Scripts/python.exe"
  "$tpy" -m pip install -q --disable-pip-version-check "uv==$uv_version"
  uv="$tools/bin/uv"; [ -x "$tools/Scripts/uv.exe" ] && uv="$tools/Scripts/uv.exe"
fi

# uv reads the system's certificates (a proxy's CA in /etc/ssl included) like pip does
# (UV_SYSTEM_CERTS: uv 0.13 names UV_NATIVE_TLS deprecated)
export UV_SYSTEM_CERTS="${UV_SYSTEM_CERTS:-1}"
args=(sync --locked --python "$python" --project "$top")
[ "$exact" = 1 ] || args+=(--inexact)
for extra in ${extras//,/ }; do args+=(--extra "$extra"); done
"$uv" "${args[@]}"
