#!/usr/bin/env bash
# Build the per-user Linux tarball from the PyInstaller bundle.
#
#   installer/linux/build_tarball.sh [BUNDLE_DIR] [OUT_DIR]   (defaults: dist/cantor dist)
#
# Makes OUT_DIR/cantor-<version>-linux-<arch>.tar.gz holding cantor-<version>/ with the
# bundle (cantor/), install.sh, the .desktop file, the icons and the PATH wrapper. Users run
#   tar xzf cantor-*.tar.gz && cantor-*/install.sh          (install.sh --uninstall removes)
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="$(cd "${1:-$top/dist/cantor}" && pwd)"
out="$(mkdir -p "${2:-$top/dist}" && cd "${2:-$top/dist}" && pwd)"
here="$top/installer/linux"

[ -x "$bundle/cantor-desktop" ] || { echo "build_tarball: no $bundle/cantor-desktop (run packaging/build.sh linux)" >&2; exit 1; }
version="$("$bundle/cantor-desktop" --mode cli --version | awk '{print $2}')"
arch="$(uname -m)"
name="cantor-$version"

stage="$(mktemp -d "${TMPDIR:-/tmp}/cantor-tar.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/share/icons"
cp -a "$bundle" "$stage/$name/cantor"
install -m 0755 "$here/install.sh" "$stage/$name/install.sh"
install -m 0644 "$here/cantor.desktop" "$here/cantor-wrapper.sh" "$stage/$name/share/"
cp "$top/resources/icons/cantor.svg" "$top/resources/icons"/cantor-*.png "$stage/$name/share/icons/"

tarball="$out/$name-linux-$arch.tar.gz"
tar -C "$stage" -czf "$tarball" "$name"
echo "build_tarball: $tarball ($(du -h "$tarball" | cut -f1))"
