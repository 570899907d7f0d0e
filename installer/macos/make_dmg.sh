#!/usr/bin/env bash
# Make the Cantor .dmg from the PyInstaller .app. Runs on macOS only (hdiutil, codesign).
#
#   installer/macos/make_dmg.sh [APP] [OUT_DIR]        (defaults: dist/Cantor.app dist)
#   packaging/build.sh macos                            (builds the .app, then runs this)
#
# Signing: set CANTOR_CODESIGN_IDENTITY="Developer ID Application: Name (TEAMID)" to sign
# the .app (hardened runtime, installer/macos/entitlements.plist) and the .dmg. Without it
# the .dmg is unsigned (fine for local use; Gatekeeper will ask). With
# CANTOR_NOTARY_PROFILE=<notarytool keychain profile> the signed .dmg is also notarized and
# stapled.
set -euo pipefail
if [ "$(uname -s)" != "Darwin" ]; then
  echo "make_dmg.sh runs on macOS (it needs hdiutil and codesign)" >&2
  exit 1
fi
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
app="${1:-$top/dist/Cantor.app}"
out="${2:-$top/dist}"
[ -d "$app" ] || { echo "make_dmg: no $app (run packaging/build.sh macos)" >&2; exit 1; }
mkdir -p "$out"

version="$(/usr/libexec/PlistBuddy -c 'Print CFBundleShortVersionString' "$app/Contents/Info.plist")"
arch="$(uname -m)"
dmg="$out/Cantor-$version-macos-$arch.dmg"
identity="${CANTOR_CODESIGN_IDENTITY:-}"

if [ -n "$identity" ]; then
  echo "make_dmg: signing $app as $identity"
  codesign --force --deep --timestamp --options runtime \
           --entitlements "$top/installer/macos/entitlements.plist" \
           --sign "$identity" "$app"
  codesign --verify --deep --strict --verbose=2 "$app"
else
  echo "make_dmg: CANTOR_CODESIGN_IDENTITY not set; the .app and .dmg stay unsigned"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
rm -f "$dmg"
hdiutil create -volname "Cantor $version" -srcfolder "$stage" -fs HFS+ -format UDZO \
        -imagekey zlib-level=9 -ov "$dmg"

if [ -n "$identity" ]; then
  codesign --force --timestamp --sign "$identity" "$dmg"
  if [ -n "${CANTOR_NOTARY_PROFILE:-}" ]; then
    xcrun notarytool submit "$dmg" --keychain-profile "$CANTOR_NOTARY_PROFILE" --wait
    xcrun stapler staple "$dmg"
  fi
fi
hdiutil verify "$dmg"
echo "make_dmg: $dmg ($(du -h "$dmg" | cut -f1))"
