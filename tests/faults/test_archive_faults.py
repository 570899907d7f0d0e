"""Archive faults: every escaping or exploding archive is refused, nothing lands outside;
setuid / world-writable modes are masked to 0o755; no entry is read whole into memory.

Run with ``pytest -m slow tests/faults/test_archive_faults.py -s``: prints tried/survived/lost.
"""

from __future__ import annotations

import os
import stat
import sys
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cantor_desktop.install import engine_store  # noqa: E402
from support.fake_builds import unsafe_archive  # noqa: E402

pytestmark = pytest.mark.slow

COMMON = ("link_chain", "link_chain_write", "setuid", "many")
CASES = [
    ("tar.gz", h)
    for h in (
        "absolute",
        "dotdot",
        "symlink_out",
        "symlink_abs",
        "symlink_then_write",
        "hardlink_out",
        "bomb",
        *COMMON,
        "long_name",
        "huge_long_name",
        "huge_pax",
    )
] + [
    ("zip", h)
    for h in (
        "absolute",
        "dotdot",
        "symlink_out",
        "symlink_abs",
        "bomb",
        *COMMON,
        "huge_link",
        "long_name",
    )
]
MASKED = {"setuid"}  # unpacked, with modes masked; every other case is refused
MAX_PEAK = 8 * 2**20  # Python memory while unpacking any of them


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _modes_too_wide(dest: Path) -> list[str]:
    return [
        f"{p.relative_to(dest)} {oct(stat.S_IMODE(p.lstat().st_mode))}"
        for p in dest.rglob("*")
        if not p.is_symlink() and p.is_file() and stat.S_IMODE(p.lstat().st_mode) & ~0o755
    ]


def _links_outside(dest: Path) -> list[str]:
    real = os.path.realpath(dest)
    return [
        str(p.relative_to(dest))
        for p in dest.rglob("*")
        if p.is_symlink() and not (os.path.realpath(p) + os.sep).startswith(real + os.sep)
    ]


def _try(tmp: Path, kind: str, how: str) -> str | None:
    """Unpack one bad archive into a sandbox; return what went wrong, or None if it held."""
    sandbox = tmp / f"{how}-{kind.replace('.', '')}"
    dest = sandbox / "a" / "b" / "dest"
    dest.mkdir(parents=True)
    (sandbox / "a" / "etc").mkdir()  # where `../../etc` from dest leads
    archive = unsafe_archive(sandbox / f"bad.{kind}", how, kind)
    before = _snapshot(sandbox)
    abs_target = Path("/tmp/cantor-escape-abs")
    abs_target.unlink(missing_ok=True)
    tracemalloc.start()
    try:
        engine_store.unpack(archive, kind, dest, max_total=64 * 2**20, max_ratio=50)
    except engine_store.UnsafeArchive:
        if how in MASKED:
            return "refused an archive that only needed its modes masked"
    except Exception as exc:  # refused, but not the way it should be
        return f"unexpected {type(exc).__name__}: {exc}"
    else:
        if how not in MASKED:
            return "accepted"
        if wide := _modes_too_wide(dest):
            return f"modes kept: {wide}"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if peak > MAX_PEAK:
        return f"held {peak} bytes in memory while unpacking"
    outside = {
        p for p in _snapshot(sandbox) - before if not p.startswith(str(dest.relative_to(sandbox)))
    }
    if outside:
        return f"wrote outside: {sorted(outside)}"
    if links := _links_outside(dest):
        return f"left links leading outside: {links}"
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
