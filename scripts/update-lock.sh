#!/usr/bin/env bash
# Move the lock file to the newest releases pyproject.toml allows, show what changed, and run
# the whole suite on them. Nothing is committed: read the change, then commit uv.lock with the
# suite's result in the message.
#   usage: scripts/update-lock.sh [PACKAGE ...]   (no names: every package; names: only those)
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"
scripts/bootstrap.sh test          # uv itself, at the version bootstrap pins
uv="$top/.tools/bin/uv"; [ -x "$top/.tools/Scripts/uv.exe" ] && uv="$top/.tools/Scripts/uv.exe"
export UV_SYSTEM_CERTS="${UV_SYSTEM_CERTS:-1}"

cp uv.lock "${TMPDIR:-/tmp}/uv.lock.before"
if [ $# -eq 0 ]; then
  "$uv" lock --upgrade
else
  args=(); for p in "$@"; do args+=(--upgrade-package "$p"); done
  "$uv" lock "${args[@]}"
fi
echo "update-lock: versions that changed (before -> after):"
python3 - "${TMPDIR:-/tmp}/uv.lock.before" uv.lock <<'PY'
import sys, tomllib
def versions(path):
    with open(path, "rb") as f:
        lock = tomllib.load(f)
    out = {}
    for p in lock.get("package", []):
        out.setdefault(p["name"], set()).add(p.get("version", "?"))
    return out
old, new = versions(sys.argv[1]), versions(sys.argv[2])
for name in sorted(old.keys() | new.keys()):
    a, b = sorted(old.get(name, ())), sorted(new.get(name, ()))
    if a != b:
        print(f"  {name}: {', '.join(a) or '(new)'} -> {', '.join(b) or '(gone)'}")
PY
./run-tests
echo "update-lock: the suite passed on the new lock; review 'git diff uv.lock' and commit it"
