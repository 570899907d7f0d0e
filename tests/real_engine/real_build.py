"""The real ace-server a developer built (never part of the repository), for the tests in
this folder: where it is, and how to pack it the way a release archive is.

``CANTOR_REAL_ACE_SERVER`` names the binary; its libraries (``libggml*.so.0``) are looked
for in ``CANTOR_REAL_ACE_LIBS``, else beside the binary. Without the variable every test
here is skipped (CI has no network to build it). The build the tests were measured on is
named in docs/reliability.md, "The real engine (ace-server)".
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

BINARY_ENV = "CANTOR_REAL_ACE_SERVER"
VULKAN_ENV = "CANTOR_REAL_VULKAN_ACE_SERVER"
"""The real Vulkan build (../shared/engines/…-vulkan-…), run on Mesa's lavapipe in CI."""
LIBS_ENV = "CANTOR_REAL_ACE_LIBS"
LIBRARIES = ("libggml.so.0", "libggml-base.so.0", "libggml-cpu.so.0")
CPU_LIBRARY = "libggml-cpu.so.0"


def binary() -> Path | None:
    value = os.environ.get(BINARY_ENV, "").strip()
    return Path(value).expanduser() if value else None


def libs_dir() -> Path:
    value = os.environ.get(LIBS_ENV, "").strip()
    if value:
        return Path(value).expanduser()
    exe = binary()
    return exe.parent if exe else Path(".")


def vulkan_binary() -> Path | None:
    value = os.environ.get(VULKAN_ENV, "").strip()
    return Path(value).expanduser() if value else None


needs_real_vulkan_engine = pytest.mark.skipif(
    vulkan_binary() is None or not vulkan_binary().is_file(),
    reason=f"{VULKAN_ENV} does not name a real Vulkan ace-server build",
)

needs_real_engine = pytest.mark.skipif(
    binary() is None or not binary().is_file(),
    reason=f"{BINARY_ENV} does not name a real ace-server build",
)


def _runpath_stripped(data: bytes, build_dir: str) -> bytes:
    """The file with its RUNPATH (an absolute path to the build folder) blanked out, as a
    release archive ships it: the loader path is then up to whoever starts it."""
    needle = build_dir.encode()
    return re.sub(re.escape(needle) + b":?", lambda m: b"\0" * len(m.group(0)), data)


def release_files(*, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    """ace-server and its libraries as a release archive holds them (top level, RUNPATH
    stripped), without the names in ``leave_out``."""
    exe = binary()
    assert exe is not None
    build_dir = str(exe.resolve().parent)
    files = {"ace-server": _runpath_stripped(exe.read_bytes(), build_dir)}
    for name in library_names():
        if name not in leave_out:
            files[name] = _runpath_stripped((libs_dir() / name).resolve().read_bytes(), build_dir)
    return files


def library_names() -> list[str]:
    """The libraries the build needs beside it: LIBRARIES, or for a build whose CPU backend
    ggml picks at run time (packaging/engines' linux-x64-cpu) libggml.so.0, libggml-base.so.0
    and every ``libggml-cpu-<variant>.so``."""
    variants = sorted(
        p.name for p in libs_dir().glob("libggml-cpu-*.so") if p.is_file() and not p.is_symlink()
    )
    if not variants:
        return list(LIBRARIES)
    return [n for n in LIBRARIES if n != CPU_LIBRARY] + variants


def pack(dest: Path, *, leave_out: tuple[str, ...] = ()) -> Path:
    """A release-style ``.tar.gz`` of the real build in ``dest`` (a temp folder)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tf:
        for name, data in release_files(leave_out=leave_out).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            tf.addfile(info, io.BytesIO(data))
    return dest


def unpack_beside(folder: Path, *, leave_out: tuple[str, ...] = ()) -> Path:
    """The release files unpacked by hand into ``folder`` (a user's own build); returns the
    binary's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in release_files(leave_out=leave_out).items():
        path = folder / name
        path.write_bytes(data)
        path.chmod(0o755)
    return folder / "ace-server"


def version() -> str:
    """What the binary says it is (``[Server] acestep.cpp <version>``), via a tiny start."""
    exe = binary()
    done = subprocess.run(
        [str(exe), "--models", "/nonexistent-cantor"],
        capture_output=True,
        text=True,
        timeout=20,
        env=library_env(),
    )
    found = re.search(r"acestep\.cpp (.+)", done.stderr)
    return found.group(1).strip() if found else "unknown"


def library_env() -> dict[str, str]:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(libs_dir())
    return env
