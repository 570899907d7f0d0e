#!/bin/sh
# Install Cantor for this user only (no root needed), from the unpacked tarball:
#   ~/.local/opt/cantor/                          the app (cantor-desktop + _internal/)
#   ~/.local/bin/cantor, ~/.local/bin/cantor-desktop   on PATH (the CLI and the app)
#   ~/.local/share/applications/cantor.desktop    the menu entry, with its icon under
#   ~/.local/share/icons/hicolor/
#
#   ./install.sh               install, or replace an earlier install
#   ./install.sh --uninstall   remove all of the above; your songs, models and settings stay
# PREFIX=DIR puts everything under DIR instead of ~/.local.
set -eu
src=$(cd "$(dirname "$0")" && pwd)
prefix=${PREFIX:-$HOME/.local}
data=${XDG_DATA_HOME:-$prefix/share}
[ -n "${PREFIX:-}" ] && data=$prefix/share
opt=$prefix/opt/cantor
bin=$prefix/bin
apps=$data/applications
icons=$data/icons/hicolor

refresh() {
  command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$apps" 2>/dev/null || true
  command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$icons" 2>/dev/null || true
}

if [ "${1:-}" = "--uninstall" ]; then
  rm -rf "$opt"
  rm -f "$bin/cantor" "$bin/cantor-desktop" "$apps/cantor.desktop"
  find "$icons" -path '*/apps/cantor.*' -delete 2>/dev/null || true
  refresh
  echo "Cantor removed. Your songs, models and settings were left where they are."
  exit 0
fi

[ -x "$src/cantor/cantor-desktop" ] || { echo "install.sh: run me from the unpacked Cantor folder" >&2; exit 1; }
mkdir -p "$prefix/opt" "$bin" "$apps"
rm -rf "$opt.new"
cp -a "$src/cantor" "$opt.new"
rm -rf "$opt"
mv "$opt.new" "$opt"

# the wrappers find the app relative to themselves: bin/../opt/cantor
for name in cantor cantor-desktop; do
  mode=""; [ "$name" = cantor ] && mode="--mode cli"
  sed -e "s|@BUNDLE_REL@|../opt/cantor|" -e "s|@MODE_ARGS@|$mode|" \
      "$src/share/cantor-wrapper.sh" > "$bin/$name.new"
  chmod 0755 "$bin/$name.new"
  mv "$bin/$name.new" "$bin/$name"
done

# the menu entry runs the app by its full path: ~/.local/bin is not always on a session's PATH
sed -e "s|^Exec=.*|Exec=\"$opt/cantor-desktop\"|" "$src/share/cantor.desktop" > "$apps/cantor.desktop"
chmod 0644 "$apps/cantor.desktop"
for png in "$src"/share/icons/cantor-*.png; do
  size=$(basename "$png" .png); size=${size#cantor-}
  mkdir -p "$icons/${size}x${size}/apps"
  cp "$png" "$icons/${size}x${size}/apps/cantor.png"
done
mkdir -p "$icons/scalable/apps"
cp "$src/share/icons/cantor.svg" "$icons/scalable/apps/cantor.svg"
refresh

echo "Cantor installed in $opt"
case ":$PATH:" in
  *":$bin:"*) echo "Run it from your applications menu, or type: cantor-desktop (app), cantor (CLI)" ;;
  *) echo "Run it from your applications menu. For the command line, add $bin to your PATH." ;;
esac
