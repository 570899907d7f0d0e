#!/usr/bin/env bash
# Make the Cantor .dmg from the PyInstaller .app. Runs on macOS only (hdiutil, codesign).
#
#   installer/macos/make_dmg.sh [APP] [OUT_DIR]        (defaults: dist/Cantor.app dist)
#   packaging/build.sh macos                            (builds the .app, then runs this)
#
# Environment:
#   CANTOR_CODESIGN_IDENTITY="Developer ID Application: Name (TEAMID)"
#       sign the .app inside-out (every library, extension, framework and helper first,
#       then the .app; hardened runtime, secure timestamp, installer/macos/entitlements.plist
#       on executables; never --deep), verify it, and sign the .dmg
#   CANTOR_NOTARY_PROFILE=<notarytool keychain profile> (with the identity)
#       notarise and staple the .app, then the .dmg; Gatekeeper's assessment (spctl) of
#       both must then say accepted
#   CANTOR_PYTHON   the build's Python (default .venv/bin/python)
# Without an identity the .app keeps PyInstaller's ad-hoc signature (verified here) and the
# .dmg is unsigned: fine on the Mac that built it; Gatekeeper will refuse it elsewhere.
set -euo pipefail
if [ "$(uname -s)" != "Darwin" ]; then
  echo "make_dmg.sh runs on macOS (it needs hdiutil and codesign)" >&2
  exit 1
fi
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
app="${1:-$top/dist/Cantor.app}"
out="${2:-$top/dist}"
py="${CANTOR_PYTHON:-$top/.venv/bin/python}"
release=("$py" "$top/packaging/macos_release.py")
[ -d "$app" ] || { echo "make_dmg: no $app (run packaging/build.sh macos)" >&2; exit 1; }
mkdir -p "$out"

version="$(/usr/libexec/PlistBuddy -c 'Print CFBundleShortVersionString' "$app/Contents/Info.plist")"
# the architecture of the Python that built the .app (an x86-64 Python under Rosetta builds
# an x86_64 app on an arm64 Mac, where `uname -m` in the shell says arm64)
arch="$("$py" -c 'import platform; print(platform.machine())')"
dmg="$out/Cantor-$version-macos-$arch.dmg"
identity="${CANTOR_CODESIGN_IDENTITY:-}"
profile="${CANTOR_NOTARY_PROFILE:-}"

# every binary is for this build's architecture; notes on any asking for a newer macOS
"${release[@]}" check "$app" --arch "$arch"

if [ -n "$identity" ]; then
  echo "make_dmg: signing $app inside-out as $identity"
  "${release[@]}" sign "$app" --identity "$identity" \
      --entitlements "$top/installer/macos/entitlements.plist"
  if [ -n "$profile" ]; then
    "${release[@]}" notarize "$app" --profile "$profile"
    "${release[@]}" assess "$app"
  else
    echo "make_dmg: CANTOR_NOTARY_PROFILE not set: the .app is signed, not notarised" \
         "(Gatekeeper will refuse it on another Mac)"
  fi
else
  echo "make_dmg: CANTOR_CODESIGN_IDENTITY not set; the .app keeps PyInstaller's ad-hoc" \
       "signature and the .dmg stays unsigned"
  "${release[@]}" verify "$app"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# ditto keeps the signatures, extended attributes and the stapled ticket
ditto "$app" "$stage/$(basename "$app")"
ln -s /Applications "$stage/Applications"
rm -f "$dmg"
hdiutil create -volname "Cantor $version" -srcfolder "$stage" -fs HFS+ -format UDZO \
        -imagekey zlib-level=9 -ov "$dmg"

if [ -n "$identity" ]; then
  codesign --force --timestamp --sign "$identity" "$dmg"
  codesign --verify --strict --verbose=2 "$dmg"
  if [ -n "$profile" ]; then
    "${release[@]}" notarize "$dmg" --profile "$profile"
    "${release[@]}" assess "$dmg"
  fi
fi
hdiutil verify "$dmg"
echo "make_dmg: $dmg ($(du -h "$dmg" | cut -f1))"
