#!/usr/bin/env bash
# Build the Cantor .deb from the PyInstaller bundle (Linux; needs dpkg-deb, ldd, dpkg -S).
#
#   installer/linux/build_deb.sh [BUNDLE_DIR] [OUT_DIR]      (defaults: dist/cantor dist)
#
# Installs:  /opt/cantor/                      the bundle (cantor-desktop + _internal/)
#            /usr/bin/cantor                   the CLI   (runs cantor-desktop --mode cli)
#            /usr/bin/cantor-desktop           the app
#            /usr/share/applications/cantor.desktop
#            /usr/share/icons/hicolor/<size>/apps/cantor.png, scalable/apps/cantor.svg
# Depends:   the system libraries the bundle links but does not carry (libGL, libxcb, …),
#            found with ldd and mapped to this machine's package names with dpkg -S, so
#            build on the oldest Debian/Ubuntu release you support.
# Env:       CANTOR_DEB_COMPRESSION=zstd|xz|gzip (default zstd: seconds instead of minutes
#            for xz on 2 cores; dpkg reads zstd from Debian 12 and Ubuntu 21.10 on, the same
#            releases the Depends names come from)
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="$(cd "${1:-$top/dist/cantor}" && pwd)"
out="$(mkdir -p "${2:-$top/dist}" && cd "${2:-$top/dist}" && pwd)"
here="$top/installer/linux"
icons="$top/resources/icons"

[ -x "$bundle/cantor-desktop" ] || { echo "build_deb: no $bundle/cantor-desktop (run packaging/build.sh linux)" >&2; exit 1; }
version="$("$bundle/cantor-desktop" --mode cli --version | awk '{print $2}')"
[ -n "$version" ] || { echo "build_deb: the bundle did not print its version" >&2; exit 1; }
arch="$(dpkg --print-architecture)"

stage="$(mktemp -d "${TMPDIR:-/tmp}/cantor-deb.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root/opt" "$root/usr/bin" "$root/usr/share/applications" "$root/DEBIAN"
cp -a "$bundle" "$root/opt/cantor"

for name in cantor cantor-desktop; do
  mode=""; [ "$name" = cantor ] && mode="--mode cli"
  sed -e "s|@BUNDLE_REL@|../../opt/cantor|" -e "s|@MODE_ARGS@|$mode|" \
      "$here/cantor-wrapper.sh" > "$root/usr/bin/$name"
  chmod 0755 "$root/usr/bin/$name"
done
install -m 0644 "$here/cantor.desktop" "$root/usr/share/applications/cantor.desktop"
for png in "$icons"/cantor-*.png; do
  size="$(basename "$png" .png)"; size="${size#cantor-}"
  install -D -m 0644 "$png" "$root/usr/share/icons/hicolor/${size}x${size}/apps/cantor.png"
done
install -D -m 0644 "$icons/cantor.svg" "$root/usr/share/icons/hicolor/scalable/apps/cantor.svg"

# Depends: every library outside the bundle that something inside it links
libdirs="$bundle/_internal:$bundle/_internal/PySide6/Qt/lib"
mapfile -t syslibs < <(
  find "$bundle" -type f \( -name '*.so*' -o -name cantor-desktop \) -print0 |
  xargs -0 -n 40 env LD_LIBRARY_PATH="$libdirs" ldd 2>/dev/null |
  awk '/=> \// {print $3}' | grep -v "^$bundle/" | sort -u)
declare -A pkgs=()
for lib in "${syslibs[@]}"; do
  real="$(readlink -f "$lib")"
  pkg="$( (dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || \
          dpkg -S "${lib#/usr}" 2>/dev/null || true) | head -1 | cut -d: -f1)"
  [ -n "$pkg" ] && pkgs["$pkg"]=1
done
depends="$(printf '%s\n' "${!pkgs[@]}" | sort | paste -sd, - | sed 's/,/, /g')"

size_kb="$(du -sk --apparent-size "$root/opt" "$root/usr" | awk '{s+=$1} END {print s}')"
cat > "$root/DEBIAN/control" <<EOF
Package: cantor
Version: $version
Section: sound
Priority: optional
Architecture: $arch
Maintainer: Cantor developers <cantor@localhost>
Installed-Size: $size_kb
Depends: ${depends:-libc6}
Homepage: https://github.com/cantor-desktop
Description: make songs with ACE-Step on your own machine
 Cantor Desktop turns a caption and lyrics into a song, locally, on the GPU when one works
 and on the CPU when not. It holds the app, the local node and the cantor command line,
 with a built-in sketch engine that works with no download.
EOF
cat > "$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q /usr/share/applications || true
  command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t /usr/share/icons/hicolor || true
fi
exit 0
EOF
cat > "$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# Removing the package leaves every user's songs, models and settings where they are.
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q /usr/share/applications || true
  command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t /usr/share/icons/hicolor || true
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"

deb="$out/cantor_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${CANTOR_DEB_COMPRESSION:-zstd}" --build "$root" "$deb" >/dev/null
echo "build_deb: $deb ($(du -h "$deb" | cut -f1)); Depends: ${depends:-libc6}"
