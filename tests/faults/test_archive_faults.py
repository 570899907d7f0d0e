"""Archive faults: every escaping or exploding archive is refused, nothing lands outside.

Run with ``pytest -m slow tests/faults/test_archive_faults.py -s``: prints tried/survived/lost.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cantor_desktop import engine_store  # noqa: E402
from support.fake_builds import unsafe_archive  # noqa: E402

pytestmark = pytest.mark.slow

CASES = [("tar.gz", h) for h in ("absolute", "dotdot", "symlink_out", "symlink_abs",
                                   "symlink_then_write", "hardlink_out", "bomb")] + \
        [("zip", h) for h in ("absolute", "dotdot", "symlink_out", "symlink_abs", "bomb")]


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _try(tmp: Path, kind: str, how: str) -> str | None:
    """Unpack one bad archive into a sandbox; return what went wrong, or None if it held."""
    sandbox = tmp / f"{how}-{kind.replace('.', '')}"
    dest = sandbox / "a" / "b" / "dest"
    dest.mkdir(parents=True)
    archive = unsafe_archive(sandbox / f"bad.{kind}", how, kind)
    before = _snapshot(sandbox)
    abs_target = Path("/tmp/cantor-escape-abs")
    abs_target.unlink(missing_ok=True)
    try:
        engine_store.unpack(archive, kind, dest, max_total=64 * 2**20, max_ratio=50)
    except engine_store.UnsafeArchive:
        pass
    except Exception as exc:               # refused, but not the way it should be
        return f"unexpected {type(exc).__name__}: {exc}"
    else:
        return "accepted"
    outside = {p for p in _snapshot(sandbox) - before
               if not p.startswith(str(dest.relative_to(sandbox)))}
    if outside:
        return f"wrote outside: {sorted(outside)}"
    if abs_target.exists():
        return "wrote /tmp/cantor-escape-abs"
    return None


def test_archive_faults(tmp_path):
    tried = survived = 0
    lost = []
    for kind, how in CASES:
        tried += 1
        problem = _try(tmp_path, kind, how)
        if problem is None:
            survived += 1
        else:
            lost.append(f"{kind} {how}: {problem}")
    print(f"\narchive faults: tried {tried}, survived {survived}, lost {len(lost)}")
    for item in lost:
        print("  LOST", item)
    assert not lost
