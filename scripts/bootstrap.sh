#!/usr/bin/env bash
# Set up everything Cantor needs from nothing on a Debian/Ubuntu machine with Python 3.11+:
# the Debian libraries Qt needs (when missing), a virtual environment in .venv, and the
# Python packages. Safe to run again: it only does what is missing.
#   usage: scripts/bootstrap.sh [EXTRAS]      e.g. scripts/bootstrap.sh test
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
venv="$top/.venv"

# Debian packages: Qt's xcb/offscreen platforms, fonts, sound, the keyring's D-Bus, Xvfb.
debs=(libegl1 libgl1 libopengl0 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libfreetype6
      fonts-dejavu-core libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
      libxcb-shape0 libxcb-image0 libxcb-render-util0 libxcb-randr0 libxcb-xinerama0
      libxcb-xkb1 libx11-xcb1 libxrender1 libxi6 libsm6 libice6 libpulse0 libasound2
      xvfb xauth curl python3-venv)
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
    # a package name may differ between releases (libasound2 vs libasound2t64): try each
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || \
      for p in "${missing[@]}"; do
        $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 || \
          echo "bootstrap: could not install $p (continuing)"
      done
  fi
fi

python=""
for cand in python3.13 python3.12 python3.11 python3; do
  if command -v "$cand" >/dev/null 2>&1 && \
     "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python="$cand"; break
  fi
done
[ -n "$python" ] || { echo "bootstrap: Cantor needs Python 3.11 or newer" >&2; exit 1; }

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"

spec="$top"; [ -n "$extras" ] && spec="$top[$extras]"
stamp="$venv/.cantor-installed-${extras:-base}"
if [ ! -f "$stamp" ] || [ "$top/pyproject.toml" -nt "$stamp" ]; then
  echo "bootstrap: installing Python packages into .venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install -q -e "$spec" 2>&1 | grep -v "^WARNING: Location" || true
  "$venv/bin/python" -c 'import cantor_desktop, PySide6, qasync, httpx' 
  touch "$stamp"
fi
