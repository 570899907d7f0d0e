"""Installed engine builds: ``engines/<family>/<backend>/<version>/`` plus a ``current`` marker.

Installing follows Lemonade's flow: download into the cache (verified by sha256) → unpack into
a staging folder next to the target, refusing entries that would land outside it → on macOS,
verify its code signatures or sign it ad hoc (``procs/codesign.py``) → write the
version file → make the executable runnable → rename into place → point ``current`` at it.
The build ``current`` named before stays on disk and is named in ``previous``, so a failed or
unwanted update rolls back with :func:`rollback`. Until the marker is rewritten the old build
stays in force; a failure on the way leaves it untouched.

Builds that share one download (the Vulkan archive also serves the CPU) are fetched once: the
cache is keyed by sha256. A build the user supplies in node.toml (``[engines.acestep] path``)
is used as is and never replaced.

``--update`` installs a build *staged* (the ``staged`` marker) instead of current: it takes
over only after the node trial-loaded it (:func:`promote_staged`), and a staged build that
fails is dropped (:func:`drop_staged`) while ``current`` never moved.

Trial results are kept per backend in ``trials.json`` beside the builds, keyed by the build
(version + sha256, or a user build's path, size and mtime): state, reason, when, and the
hardware evidence the trial ran on, so a rejected backend stays rejected until something
changes (:func:`trial_record`, :func:`record_trial`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import shutil
import stat
import struct
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, cast

from filelock import FileLock, Timeout

from .. import config
from ..fetch import download
from ..errors import CantorError, short_repr
from .manifest import DEVICE_ENV, Build
from ..system.paths import paths
from ..system.procs import codesign
from ..files import write_atomic

VERSION_FILE = "cantor-build.json"
CURRENT = "current"
PREVIOUS = "previous"
STAGED = "staged"
TRIALS_FILE = "trials.json"
TRIALS_KEPT = 32  # records per backend (the newest)
STORE_FORMAT = 1
"""Bumped when the layout of an unpacked build changes; older builds become update_required."""
MAX_UNPACKED = 4 * 2**30
MAX_RATIO = 200
RATIO_FREE = 64 * 2**20  # below this many unpacked bytes the ratio is not checked
MAX_ENTRIES = 4096  # an engine build holds tens of files; more is an inode bomb
MODE_MASK = 0o755  # no setuid/setgid/sticky, nothing group- or world-writable
MAX_LINK_TARGET = 4096  # bytes of a link's target (a zip "symlink" entry's content)
MAX_ZIP_DIRECTORY_ENTRY = 1024  # bytes per entry of a zip's central directory, at most
MAX_NAME = 4096  # bytes of an entry's name (a path), like PATH_MAX
COPY_CHUNK = 1 << 20  # an entry's data is copied this much at a time
MAX_METADATA = 1 << 20
"""Bytes of a tar entry's GNU long name or pax header at most: tarfile reads each whole
before it yields the entry, so a bigger one is refused before it is read."""


class StoreError(CantorError):
    """An engine build could not be installed or read; the message says which and why."""


class UnsafeArchive(StoreError):
    """An archive entry would land outside its folder, or the archive unpacks too big."""


@dataclass
class InstalledBuild:
    """An engine ready to start: ``argv`` + the node's ace-server options, with ``env``."""

    family: str
    backend: str
    version: str
    argv: list[str]
    env: dict[str, str]
    path: Path | None  # the build folder (store), the executable (user), None (sketch)
    source: str = "store"  # "store" | "user" | "sketch"
    sha256: str = ""
    url: str = ""
    signature: str = ""  # macOS: "code signature verified …" / "signed ad hoc …"

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "backend": self.backend,
            "version": self.version,
            "argv": list(self.argv),
            "env": dict(self.env),
            "path": str(self.path) if self.path else None,
            "source": self.source,
            "sha256": self.sha256,
            "url": self.url,
        }


@dataclass
class StoreEntry:
    """What is on disk for one family × backend."""

    build: InstalledBuild | None = None
    problem: str = ""  # set when a build folder exists but cannot be used
    versions: list[str] = field(default_factory=list)


# -- archive safety ---------------------------------------------------------------------------
# Every name is checked as text (no absolute path, no '..'), every write goes through a parent
# folder whose real path is inside the destination, and a link may only point inside its own
# folder: its target is relative without '..', and once made it must resolve (through any
# links made before it) to its own real folder or below. By induction no link leads out, also
# not a chain like `a -> .` then `a/a/esc -> ../../etc`; a last sweep checks every link again.


def _check_name(name: str) -> str:
    """An archive member name → a safe relative "/"-path, or UnsafeArchive."""
    if len(name) > MAX_NAME:
        raise UnsafeArchive(
            f"refused: entry {short_repr(name)} has a name of {len(name)} characters; "
            f"at most {MAX_NAME}"
        )
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise UnsafeArchive(f"refused: entry {name!r} has an absolute path")
    parts = re.split(r"[\\/]", name)
    if ".." in parts:
        raise UnsafeArchive(f"refused: entry {name!r} contains '..'")
    clean = [p for p in parts if p not in ("", ".")]
    return "/".join(clean)


def _check_link_target(name: str, target: str) -> None:
    """A link's target as text: relative, without '..' (it stays in the link's folder)."""
    if (
        not target
        or target.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", target)
        or ".." in re.split(r"[\\/]", target)
        or "\0" in target
    ):
        raise UnsafeArchive(
            f"refused: link {name!r} points to {target!r}; a link may only "
            f"point inside its own folder"
        )


def _inside(dest_real: str, path: Path | str) -> bool:
    real = os.path.realpath(path)
    return real == dest_real or real.startswith(dest_real + os.sep)


def _make_link(target: str, path: Path, rel: str) -> None:
    """Make the link, then judge it by where it resolves: inside its own real folder."""
    os.symlink(target, path)
    if not _inside(os.path.realpath(path.parent), path):
        path.unlink()
        raise UnsafeArchive(
            f"refused: link {rel!r} -> {target!r} resolves to "
            f"{os.path.realpath(path)}, outside its folder"
        )


def _sweep_links(dest: Path, dest_real: str) -> None:
    """Every link in the unpacked tree, judged again by where it resolves now."""
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink() and not _inside(dest_real, path):
                raise UnsafeArchive(
                    f"refused: link {path.relative_to(dest)} resolves to "
                    f"{os.path.realpath(path)}, outside the folder"
                )


class _Budget:
    def __init__(
        self, archive_size: int, max_total: int, max_ratio: float, max_entries: int = MAX_ENTRIES
    ):
        self.archive_size = max(1, archive_size)
        self.max_total = max_total
        self.max_ratio = max_ratio
        self.max_entries = max_entries
        self.total = 0
        self.entries = 0

    def entry(self, name: str) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise UnsafeArchive(
                f"refused: the archive has more than {self.max_entries} entries (at {name!r})"
            )

    def take(self, n: int, name: str) -> None:
        self.total += n
        if self.total > self.max_total:
            raise UnsafeArchive(
                f"refused: unpacking {name!r} would pass {self.max_total} bytes "
                f"in total (a zip bomb?)"
            )
        if self.total > RATIO_FREE and self.total > self.max_ratio * self.archive_size:
            raise UnsafeArchive(
                f"refused: the archive unpacks to more than {self.max_ratio:g}× "
                f"its size at {name!r} (a zip bomb?)"
            )


def _make_dir(dest: Path, dest_real: str, rel: str) -> None:
    """A folder entry (tar or zip): made, then judged by where it resolves."""
    path = dest / rel
    path.mkdir(parents=True, exist_ok=True)
    if not _inside(dest_real, path):
        raise UnsafeArchive(f"refused: folder {rel!r} leads outside the folder")


def _target(dest: Path, dest_real: str, rel: str) -> Path:
    path = dest / rel
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    if not _inside(dest_real, parent):
        raise UnsafeArchive(
            f"refused: entry {rel!r} would be written through a link outside the folder"
        )
    if path.is_symlink() or path.is_file():
        path.unlink()
    return path


def _write_stream(src, path: Path, mode: int, budget: _Budget, rel: str) -> None:
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | os.O_EXCL
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_BINARY", 0)
    )
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as out:
        while True:
            buf = src.read(COPY_CHUNK)
            if not buf:
                break
            budget.take(len(buf), rel)
            out.write(buf)
    os.chmod(path, (mode & MODE_MASK) | 0o600)


class _CappedReads:
    """The decompressed tar stream, where no single read may pass :data:`MAX_METADATA`
    (the entries' data is read :data:`COPY_CHUNK` at a time): tarfile reads a GNU long name
    or a pax header whole, so a 300 MB one is refused here instead of filling memory."""

    def __init__(self, raw, limit: int = max(MAX_METADATA, COPY_CHUNK)):
        self.raw, self.limit = raw, limit

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self.limit:
            raise UnsafeArchive(
                f"refused: an entry's long name or extended header is "
                f"{'unbounded' if n is None or n < 0 else f'{n} bytes'}; at most "
                f"{MAX_METADATA} are read"
            )
        return self.raw.read(n)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()


def _zip_directory(archive: Path) -> tuple[int, int]:
    """(entries, bytes) of a zip's central directory as its end record states them (zip64
    too), read before zipfile loads the directory: a huge one is refused without loading it."""
    with open(archive, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        tail_len = min(size, 22 + 0xFFFF)
        fh.seek(size - tail_len)
        tail = fh.read(tail_len)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            raise StoreError(f"{archive.name}: not a readable zip archive (no end record)")
        entries, cd_size = struct.unpack("<HI", tail[at + 10 : at + 16])
        locator = tail[at - 20 : at] if at >= 20 else b""
        if locator[:4] == b"PK\x06\x07":
            fh.seek(struct.unpack("<Q", locator[8:16])[0])
            record = fh.read(56)
            if record[:4] == b"PK\x06\x06" and len(record) == 56:
                entries, cd_size = struct.unpack("<QQ", record[32:48])
    return entries, cd_size


def unpack(
    archive: Path,
    kind: str,
    dest: Path,
    *,
    max_total: int = MAX_UNPACKED,
    max_ratio: float = MAX_RATIO,
    max_entries: int = MAX_ENTRIES,
) -> list[str]:
    """Unpack ``archive`` ("tar.gz" or "zip") into the empty folder ``dest``.

    Refuses (UnsafeArchive) absolute names, ``..``, links that do not stay inside their own
    folder, device files, more than ``max_entries`` entries, and more than ``max_total``
    bytes or ``max_ratio`` × the archive's size. Sizes are checked from each entry's header
    before its data is read, and counted again while writing; no entry is read whole into
    memory. Modes are masked to 0o755. Returns the relative names written. On refusal the
    caller removes ``dest``.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    dest_real = os.path.realpath(dest)
    budget = _Budget(archive.stat().st_size, max_total, max_ratio, max_entries)
    written: list[str] = []
    if kind == "tar.gz":
        try:
            with (
                gzip.open(archive, "rb") as raw,
                tarfile.open(fileobj=cast(IO[bytes], _CappedReads(raw)), mode="r:") as tf,
            ):
                for member in tf:
                    budget.entry(member.name)
                    _unpack_tar_member(tf, member, dest, dest_real, budget, written)
        except (tarfile.TarError, EOFError, OSError) as exc:
            if isinstance(exc, UnsafeArchive):
                raise
            raise StoreError(f"{archive.name}: not a readable tar.gz archive ({exc})") from None
    elif kind == "zip":
        entries, cd_size = _zip_directory(archive)
        if entries > max_entries or cd_size > max_entries * MAX_ZIP_DIRECTORY_ENTRY:
            raise UnsafeArchive(
                f"refused: the archive has {entries} entries ({cd_size} bytes "
                f"of directory), more than {max_entries}"
            )
        try:
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                if len(infos) > max_entries:
                    raise UnsafeArchive(
                        f"refused: the archive has {len(infos)} entries, more than {max_entries}"
                    )
                declared = 0
                for info in infos:
                    _check_name(info.filename)
                    declared += info.file_size
                    if declared > max_total:
                        raise UnsafeArchive(
                            f"refused: the archive declares more than "
                            f"{max_total} bytes unpacked (a zip bomb?)"
                        )
                    if info.file_size > RATIO_FREE and info.file_size > max_ratio * max(
                        1, info.compress_size
                    ):
                        raise UnsafeArchive(
                            f"refused: {info.filename!r} expands more than "
                            f"{max_ratio:g}× (a zip bomb?)"
                        )
                for info in infos:
                    _unpack_zip_member(zf, info, dest, dest_real, budget, written)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
            raise StoreError(f"{archive.name}: not a readable zip archive ({exc})") from None
    else:
        raise StoreError(f"unknown archive kind {kind!r}")
    _sweep_links(dest, dest_real)
    return written


def _unpack_tar_member(
    tf: tarfile.TarFile,
    member: tarfile.TarInfo,
    dest: Path,
    dest_real: str,
    budget: _Budget,
    written: list[str],
) -> None:
    rel = _check_name(member.name)
    if member.issym():
        _check_link_target(rel or member.name, member.linkname)
    elif member.islnk():
        try:  # a hard link names its target from the archive's root
            _check_name(member.linkname)
        except UnsafeArchive:
            raise UnsafeArchive(
                f"refused: hard link {member.name!r} points to "
                f"{member.linkname!r}, outside the folder"
            ) from None
    elif not (member.isdir() or member.isreg()):
        raise UnsafeArchive(
            f"refused: entry {member.name!r} is a device, fifo or other special file"
        )
    if not rel:
        return
    if member.isdir():
        _make_dir(dest, dest_real, rel)
        return
    if member.isreg() and budget.total + member.size > budget.max_total:
        raise UnsafeArchive(
            f"refused: unpacking {rel!r} ({member.size} bytes) would pass "
            f"{budget.max_total} bytes in total (a zip bomb?)"
        )
    if (
        member.isreg()
        and budget.total + member.size > RATIO_FREE
        and budget.total + member.size > budget.max_ratio * budget.archive_size
    ):
        raise UnsafeArchive(
            f"refused: {rel!r} would unpack to more than "
            f"{budget.max_ratio:g}× the archive's size (a zip bomb?)"
        )
    path = _target(dest, dest_real, rel)
    if member.issym():
        _make_link(member.linkname, path, rel)
    elif member.islnk():
        source = dest / _check_name(member.linkname)
        if not source.is_file() or source.is_symlink() or not _inside(dest_real, source):
            raise UnsafeArchive(
                f"refused: hard link {rel!r} points to {member.linkname!r}, "
                f"which is not a file inside the folder"
            )
        with open(source, "rb") as src:
            _write_stream(src, path, source.stat().st_mode, budget, rel)
    else:
        packed = tf.extractfile(member)
        if packed is None:
            raise StoreError(f"cannot read {rel!r} from the archive")
        with packed:
            _write_stream(packed, path, member.mode, budget, rel)
    written.append(rel)


def _zip_link_target(zf: zipfile.ZipFile, info: zipfile.ZipInfo, rel: str) -> str:
    """A zip "symlink" entry's content (its target), read with a cap: never whole."""
    if info.file_size > MAX_LINK_TARGET:
        raise UnsafeArchive(
            f"refused: link {rel!r} has a {info.file_size}-byte target "
            f"(more than {MAX_LINK_TARGET})"
        )
    with zf.open(info) as src:
        raw = src.read(MAX_LINK_TARGET + 1)
    if len(raw) > MAX_LINK_TARGET:
        raise UnsafeArchive(
            f"refused: link {rel!r} has a target longer than {MAX_LINK_TARGET} bytes"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UnsafeArchive(f"refused: link {rel!r} has a target that is not UTF-8") from None


def _unpack_zip_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    dest: Path,
    dest_real: str,
    budget: _Budget,
    written: list[str],
) -> None:
    rel = _check_name(info.filename)
    if not rel:
        return
    # Unix mode and file type only when the zip says it was made on Unix; no type = a file
    mode = info.external_attr >> 16 if info.create_system == 3 else 0
    if info.is_dir():
        _make_dir(dest, dest_real, rel)
        return
    if stat.S_ISLNK(mode):
        target = _zip_link_target(zf, info, rel)
        _check_link_target(rel, target)
        path = _target(dest, dest_real, rel)
        _make_link(target, path, rel)
        written.append(rel)
        return
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        raise UnsafeArchive(f"refused: entry {rel!r} is a device, fifo or other special file")
    path = _target(dest, dest_real, rel)
    with zf.open(info) as src:
        _write_stream(src, path, mode or 0o644, budget, rel)
    written.append(rel)


# -- the store --------------------------------------------------------------------------------


def _backend_dir(family: str, backend: str) -> Path:
    return paths().engine_backend_dir(family, backend)


def _read_marker(folder: Path, name: str) -> str:
    try:
        value = (folder / name).read_text().strip()
    except OSError:
        return ""
    return value if value and "/" not in value and "\\" not in value and value != ".." else ""


def _executable(folder: Path, relative: str) -> Path:
    return folder.joinpath(*relative.split("/"))


def user_build(family: str, backend: str) -> InstalledBuild | None:
    """The build named in node.toml ``[engines.<family>] path``, for any backend."""
    cfg, _problem = config.load_or_defaults()
    try:
        value = cfg.get(f"engines.{family}.path")
    except config.ConfigError:
        return None
    if not value:
        return None
    exe = Path(value).expanduser()
    # a release archive unpacked by hand has its libggml* beside the binary and no rpath:
    # the loader path is set as for the store's builds
    env = {"GGML_BACKEND": DEVICE_ENV[backend], **library_env(exe.parent)}
    return InstalledBuild(
        family=family,
        backend=backend,
        version="user-supplied",
        argv=[str(exe)],
        env=env,
        path=exe,
        source="user",
    )


def inspect(family: str, backend: str) -> StoreEntry:
    """The store's build for family × backend (ignores a user-supplied one)."""
    folder = _backend_dir(family, backend)
    entry = StoreEntry()
    if not folder.is_dir():
        return entry
    entry.versions = sorted(
        p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    name = _read_marker(folder, CURRENT)
    if not name:
        if entry.versions and set(entry.versions) != {_read_marker(folder, STAGED)}:
            entry.problem = f"{folder} holds builds but no '{CURRENT}' marker"
        return entry
    entry.build, entry.problem = _read_build(family, backend, folder / name)
    return entry


def _read_build(family: str, backend: str, build_dir: Path) -> tuple[InstalledBuild | None, str]:
    """The build unpacked in ``build_dir``, or (None, what is wrong with it)."""
    info_path = build_dir / VERSION_FILE
    try:
        info = json.loads(info_path.read_text())
    except FileNotFoundError:
        return None, f"{info_path} is missing"
    except (OSError, ValueError) as exc:
        return None, f"{info_path} cannot be read ({exc})"
    if not isinstance(info, dict) or info.get("store_format") != STORE_FORMAT:
        return None, f"{info_path} is from another version of Cantor"
    exe = _executable(build_dir, str(info.get("executable", "")))
    if not info.get("executable") or not exe.is_file():
        return None, f"the executable {exe} is missing"
    env = {str(k): str(v) for k, v in (info.get("env") or {}).items()}
    env.update(library_env(exe.parent))
    return InstalledBuild(
        family=family,
        backend=backend,
        version=str(info.get("version", "")),
        argv=[str(exe)],
        env=env,
        path=build_dir,
        source="store",
        sha256=str(info.get("sha256", "")),
        url=str(info.get("url", "")),
        signature=str(info.get("macos_signature", "")),
    ), ""


def staged(family: str, backend: str) -> InstalledBuild | None:
    """The build ``--update`` fetched and the node has not trial-loaded yet, if any."""
    folder = _backend_dir(family, backend)
    name = _read_marker(folder, STAGED)
    if not name or not (folder / name).is_dir():
        return None
    build, _problem = _read_build(family, backend, folder / name)
    return build


def previous(family: str, backend: str) -> InstalledBuild | None:
    """The build that was current before the current one (what a rollback returns to)."""
    folder = _backend_dir(family, backend)
    name = _read_marker(folder, PREVIOUS)
    if not name or name == _read_marker(folder, CURRENT) or not (folder / name).is_dir():
        return None
    build, _problem = _read_build(family, backend, folder / name)
    return build


def promote_staged(family: str, backend: str) -> InstalledBuild | None:
    """The staged build passed its trial: make it current (the old one becomes previous)."""
    folder = _backend_dir(family, backend)
    with FileLock(str(folder / ".lock"), timeout=600):
        name = _read_marker(folder, STAGED)
        if not name or not (folder / name).is_dir():
            return None
        old = _read_marker(folder, CURRENT)
        write_atomic(folder / CURRENT, (name + "\n").encode())
        if old and old != name:
            write_atomic(folder / PREVIOUS, (old + "\n").encode())
        (folder / STAGED).unlink(missing_ok=True)
        _prune(folder)
    return inspect(family, backend).build


def drop_staged(family: str, backend: str) -> None:
    """The staged build failed its trial (or the user rolled it back): delete it; the
    current build was never touched."""
    folder = _backend_dir(family, backend)
    if not folder.is_dir():
        return
    with FileLock(str(folder / ".lock"), timeout=600):
        name = _read_marker(folder, STAGED)
        (folder / STAGED).unlink(missing_ok=True)
        if name and name not in (_read_marker(folder, CURRENT), _read_marker(folder, PREVIOUS)):
            shutil.rmtree(folder / name, ignore_errors=True)


def library_env(folder: Path) -> dict[str, str]:
    """On Linux, let the engine find the libggml*.so files shipped beside it even when the
    build has no $ORIGIN rpath (Windows looks beside the .exe by itself)."""
    if not sys.platform.startswith("linux"):
        return {}
    existing = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": str(folder) + (os.pathsep + existing if existing else "")}


@dataclass
class TrialRecord:
    """What one trial load of one build on one backend showed."""

    key: str  # the build (see build_key)
    version: str
    state: str  # "works" | "rejected"
    reason: str = ""  # rejected: the engine's words (first and last error line)
    device: str = ""  # works: the device it came up on
    at: str = ""  # when, UTC, ISO 8601
    evidence: list[str] = field(default_factory=list)  # the hardware evidence it ran on
    seconds: float = 0.0
    probes: int = 1
    device_name: str = ""  # works: the device's own name ("llvmpipe (LLVM 15.0.6, 256 bits)")
    software: bool = False  # works: on a device that computes on the CPU

    @property
    def rejected(self) -> bool:
        return self.state == "rejected"

    def applies(self, evidence: list[str]) -> bool:
        """Still true of this machine: the evidence it ran on has not changed (a new driver,
        another GPU: then the backend is tried again)."""
        return list(self.evidence) == list(evidence)

    def when(self) -> str:
        return self.at.replace("T", " ")[:16] if self.at else "?"

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "version": self.version,
            "state": self.state,
            "reason": self.reason,
            "device": self.device,
            "at": self.at,
            "evidence": list(self.evidence),
            "seconds": self.seconds,
            "probes": self.probes,
            "device_name": self.device_name,
            "software": self.software,
        }

    def device_words(self) -> str:
        """ "Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits), a software device)" or "CPU"."""
        bits = [self.device_name] if self.device_name else []
        if self.software:
            bits.append("a software device")
        return self.device + (f" ({', '.join(bits)})" if bits else "")


def build_key(build: InstalledBuild | Build) -> str:
    """A build's identity for trial records: version and sha256 for the store's (and the
    manifest's) builds; path, size and mtime for a user's own binary (rebuilt = new)."""
    if isinstance(build, InstalledBuild) and build.source == "user":
        exe = Path(build.argv[0])
        try:
            st = exe.stat()
            return f"user:{exe}:{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            return f"user:{exe}:missing"
    if isinstance(build, InstalledBuild) and build.source == "sketch":
        return f"sketch:{build.version}"
    return f"{build.version}+{(build.sha256 or '')[:16]}"


def _trials_path(family: str, backend: str) -> Path:
    return _backend_dir(family, backend) / TRIALS_FILE


def _read_trials(family: str, backend: str) -> dict[str, dict]:
    try:
        data = json.loads(_trials_path(family, backend).read_text())
        records = data.get("records") if isinstance(data, dict) else None
        return records if isinstance(records, dict) else {}
    except (OSError, ValueError):
        return {}


def trial_record(family: str, backend: str, key: str) -> TrialRecord | None:
    """The last trial of the build ``key`` on ``backend``, or None when never tried."""
    raw = _read_trials(family, backend).get(key)
    if not isinstance(raw, dict):
        return None
    try:
        return TrialRecord(
            key=key,
            version=str(raw.get("version", "")),
            state=str(raw["state"]),
            reason=str(raw.get("reason", "")),
            device=str(raw.get("device", "")),
            at=str(raw.get("at", "")),
            evidence=[str(e) for e in raw.get("evidence") or []],
            seconds=float(raw.get("seconds") or 0.0),
            probes=int(raw.get("probes") or 1),
            device_name=str(raw.get("device_name") or ""),
            software=raw.get("software") is True,
        )
    except (KeyError, TypeError, ValueError):
        return None


def record_trial(
    build: InstalledBuild,
    *,
    ok: bool,
    reason: str = "",
    device: str = "",
    seconds: float = 0.0,
    probes: int = 1,
    evidence: list[str] | None = None,
    device_name: str = "",
    software: bool = False,
) -> TrialRecord:
    """Remember a trial of ``build`` on its backend (kept across restarts, newest last)."""
    record = TrialRecord(
        key=build_key(build),
        version=build.version,
        state="works" if ok else "rejected",
        reason=reason,
        device=device,
        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        evidence=list(evidence or []),
        seconds=round(seconds, 3),
        probes=probes,
        device_name=device_name,
        software=software,
    )
    folder = _backend_dir(build.family, build.backend)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".trials.lock"), timeout=60):
        records = _read_trials(build.family, build.backend)
        records.pop(record.key, None)
        records[record.key] = record.to_dict()
        for old in list(records)[:-TRIALS_KEPT]:
            del records[old]
        write_atomic(
            _trials_path(build.family, build.backend),
            (json.dumps({"records": records}, indent=1) + "\n").encode(),
        )
    return record


def installed(family: str, backend: str) -> InstalledBuild | None:
    """The build to run for family × backend: the user-supplied one, else the store's."""
    return user_build(family, backend) or inspect(family, backend).build


def archive_cache_path(build: Build) -> Path:
    return paths().engine_downloads_dir / f"{build.sha256}.{build.archive}"


_fetch_locks: dict[str, asyncio.Lock] = {}


async def _cross_process_lock(path: Path) -> FileLock:
    """Take a file lock without blocking the event loop."""
    lock = FileLock(str(path))
    while True:
        try:
            lock.acquire(timeout=0)
            return lock
        except Timeout:
            await asyncio.sleep(0.2)


async def fetch_archive(
    build: Build, *, on_progress: Callable | None = None, client=None
) -> tuple[Path, bool]:
    """The verified archive in the cache: (path, downloaded now?). One download per sha256,
    also when two installs (or two processes) want the same archive at once."""
    dest = archive_cache_path(build)
    dest.parent.mkdir(parents=True, exist_ok=True)
    async with _fetch_locks.setdefault(build.sha256, asyncio.Lock()):
        flock = await _cross_process_lock(dest.with_name(dest.name + ".lock"))
        try:
            if dest.exists():
                if await asyncio.to_thread(download.sha256_file, dest) == build.sha256:
                    return dest, False
                dest.unlink()
            await download.download(
                build.url,
                dest,
                sha256=build.sha256,
                size=build.size,
                on_progress=on_progress,
                client=client,
            )
            return dest, True
        finally:
            flock.release()


def _dir_name(folder: Path, build: Build) -> str:
    name = build.version
    existing = folder / name / VERSION_FILE
    try:
        if json.loads(existing.read_text()).get("sha256") not in (None, build.sha256):
            name = f"{build.version}-{build.sha256[:8]}"
    except (OSError, ValueError, AttributeError):
        pass
    return name


def install_archive(build: Build, archive: Path, *, stage: bool = False) -> InstalledBuild:
    """Unpack a verified archive as the current build of its family × backend (see module doc),
    or, with ``stage``, as the staged one (``current`` stays as it is).

    Raises StoreError / UnsafeArchive; then nothing changed: the previous build stays current.
    """
    folder = _backend_dir(build.family, build.backend)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock"), timeout=600):
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder))
        aside: Path | None = None
        target: Path | None = None
        try:
            unpack(archive, build.archive, staging)
            exe = _executable(staging, build.executable)
            if exe.is_symlink() or not exe.is_file():
                raise StoreError(
                    f"{build.describe()}: the archive has no file {build.executable!r}"
                )
            if sys.platform != "win32":
                exe.chmod(exe.stat().st_mode | 0o755)
            signature = _prepare_for_macos(staging, build)
            info = {
                "store_format": STORE_FORMAT,
                "family": build.family,
                "backend": build.backend,
                "version": build.version,
                "url": build.url,
                "sha256": build.sha256,
                "env": build.env,
                "executable": build.executable,
                "os": build.os,
                "arch": build.arch,
            }
            if signature.outcome != "skipped":
                info["macos_signature"] = signature.describe()
            write_atomic(staging / VERSION_FILE, (json.dumps(info, indent=2) + "\n").encode())
            name = _dir_name(folder, build)
            target = folder / name
            if target.exists():
                aside = folder / f".old-{name}-{os.getpid()}"
                if aside.exists():
                    shutil.rmtree(aside)
                target.rename(aside)
            staging.rename(target)
            if stage:
                write_atomic(folder / STAGED, (name + "\n").encode())
            else:
                old = _read_marker(folder, CURRENT)
                write_atomic(folder / CURRENT, (name + "\n").encode())
                if old and old != name:
                    write_atomic(folder / PREVIOUS, (old + "\n").encode())
                if _read_marker(folder, STAGED) == name:
                    (folder / STAGED).unlink(missing_ok=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if aside is not None and target is not None and aside.exists():
                if target.exists() and _read_marker(folder, CURRENT) != target.name:
                    shutil.rmtree(target, ignore_errors=True)
                if not target.exists():
                    aside.rename(target)  # the build that was there comes back
            raise
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        _prune(folder)
    result = (
        staged(build.family, build.backend) if stage else inspect(build.family, build.backend).build
    )
    if result is None:
        raise StoreError(f"{build.describe()}: installed but cannot be read back")
    return result


def _prepare_for_macos(staging: Path, build: Build) -> codesign.Prepared:
    """On a Mac, every Mach-O file of the unpacked build verified with codesign, or signed
    ad hoc when any is unsigned or broken (``procs/codesign.py``): otherwise macOS kills the
    engine at start without a word. A build it cannot make runnable is refused here."""
    try:
        return codesign.prepare_build(staging, describe=build.describe())
    except codesign.SignError as exc:
        raise StoreError(str(exc)) from exc


def _prune(folder: Path) -> None:
    """Keep only the current and previous builds (and nothing half-written)."""
    keep = {
        _read_marker(folder, CURRENT),
        _read_marker(folder, PREVIOUS),
        _read_marker(folder, STAGED),
    }
    for child in folder.iterdir():
        if child.is_dir() and child.name not in keep:
            shutil.rmtree(child, ignore_errors=True)


async def install(
    build: Build,
    *,
    on_progress: Callable | None = None,
    client=None,
    keep_archive: bool = False,
    stage: bool = False,
) -> tuple[InstalledBuild, bool]:
    """Download (or reuse the cached archive), verify, unpack and make current (or staged).
    Returns (build, downloaded now?)."""
    archive, fetched = await fetch_archive(build, on_progress=on_progress, client=client)
    try:
        # unpacking is long, blocking work: keep it off the event loop (the app's Qt loop)
        result = await asyncio.to_thread(install_archive, build, archive, stage=stage)
    finally:
        if not keep_archive:
            archive.unlink(missing_ok=True)
    return result, fetched


def remove_current(family: str, backend: str) -> None:
    """Drop the current build (e.g. it failed its trial); the previous one, if any, takes over."""
    folder = _backend_dir(family, backend)
    if not folder.is_dir():
        return
    with FileLock(str(folder / ".lock"), timeout=600):
        name = _read_marker(folder, CURRENT)
        previous = _read_marker(folder, PREVIOUS)
        if previous and previous != name and (folder / previous).is_dir():
            write_atomic(folder / CURRENT, (previous + "\n").encode())
        else:
            (folder / CURRENT).unlink(missing_ok=True)
        (folder / PREVIOUS).unlink(missing_ok=True)
        if name:
            shutil.rmtree(folder / name, ignore_errors=True)


def rollback(family: str, backend: str) -> InstalledBuild | None:
    """Make the previous build current again (a failed update); returns it, or None."""
    folder = _backend_dir(family, backend)
    if not folder.is_dir():
        return None
    with FileLock(str(folder / ".lock"), timeout=600):
        name = _read_marker(folder, CURRENT)
        previous = _read_marker(folder, PREVIOUS)
        if not previous or not (folder / previous).is_dir():
            return None
        write_atomic(folder / CURRENT, (previous + "\n").encode())
        if name:
            write_atomic(folder / PREVIOUS, (name + "\n").encode())
    return inspect(family, backend).build
