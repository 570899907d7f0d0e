#!/bin/sh
# `cantor` / `cantor-desktop` on PATH: run the frozen Cantor build, found relative to this
# file (@BUNDLE_REL@ is filled in at packaging time: ../../opt/cantor from /usr/bin in the
# .deb, ../opt/cantor from ~/.local/bin for the tarball), so it also works from wherever the
# package is unpacked (CI runs it from a scratch root). @MODE_ARGS@ is "--mode cli" for
# `cantor` and empty for `cantor-desktop`.
here=$(dirname "$(readlink -f "$0")")
exec "$here/@BUNDLE_REL@/cantor-desktop" @MODE_ARGS@ "$@"
