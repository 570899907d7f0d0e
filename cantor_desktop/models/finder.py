"""ACE-Step model files other tools already downloaded, found on this machine and adopted
into Cantor's library without a second copy.

Where it looks (:func:`places`): the Hugging Face cache (Lemonade, ComfyUI and the
``huggingface_hub`` tools keep their GGUFs there; ``HF_HUB_CACHE``, ``HF_HOME`` and
``XDG_CACHE_HOME`` honoured as ``huggingface_hub`` reads them), acestep.cpp's own
``models/`` folder, and the folders the user names. Only files named like one of the
catalogue's are candidates (:func:`find`: no file is read, so a look costs nothing).

Adopting one (:func:`adopt`) checks its bytes against the sha256 the catalogue has for that
name (for a file in the cache of the catalogue's own repository, the hub's sha256 the cache
filed it under is used when the catalogue has none), and its GGUF header. A file that passes
is hard-linked into the library folder (no space used), or copied when the two folders are
on different drives and the caller allows it. The other tool's file is only ever read: never
moved, changed or deleted; removing the model in Cantor removes Cantor's link only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..fetch import download as dl
from ..units import human_size
from . import catalogue as cat
from . import importer, library

HF_CACHE = "Hugging Face cache"
ACESTEP_CPP = "acestep.cpp models folder"
NAMED = "a folder you named"

NEW = "new"  # not in the library: can be adopted
IN_LIBRARY = "in library"  # the library has a file of that name already
WRONG_SIZE = "wrong size"  # the catalogue says another size: not the catalogue's file
NO_HASH = "cannot be checked"  # no sha256 is known for it: never adopted

LINKED = "linked"
COPIED = "copied"
REFUSED = "refused"
ALREADY = "already there"

BLOCK = 1 << 20


@dataclass(frozen=True)
class Place:
    """A folder to look in, and what it is."""

    folder: Path
    what: str  # HF_CACHE | ACESTEP_CPP | NAMED


@dataclass
class Found:
    """A file named like one of the catalogue's, where another tool keeps it."""

    path: str  # the file to read (a cache's snapshot entry resolved to its blob)
    shown: str  # the path as the other tool shows it (a cache's snapshot entry)
    name: str  # the catalogue's file name
    kind: str  # dit | lm | text_enc | vae
    size: int
    where: str  # HF_CACHE | ACESTEP_CPP | NAMED
    expected: str | None  # the sha256 its bytes must have
    state: str  # NEW | IN_LIBRARY | WRONG_SIZE | NO_HASH
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Adopted:
    """What became of one file: linked or copied into the library, or refused (and why)."""

    name: str
    source: str
    how: str  # LINKED | COPIED | REFUSED | ALREADY
    size: int
    saved: int  # bytes not written a second time (the size, when linked)
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


class AdoptRefused(library.LibraryError):
    """A path asked for that is not one :func:`find` offers."""


def hf_cache_dir(env: dict[str, str] | None = None) -> Path:
    """The Hugging Face hub cache folder, as ``huggingface_hub`` finds it."""
    env = dict(os.environ) if env is None else env
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name, "").strip():
            return Path(os.path.expanduser(env[name].strip()))
    if env.get("HF_HOME", "").strip():
        return Path(os.path.expanduser(env["HF_HOME"].strip())) / "hub"
    base = env.get("XDG_CACHE_HOME", "").strip() or os.path.join("~", ".cache")
    return Path(os.path.expanduser(base)) / "huggingface" / "hub"


def places(folders: Iterable[str | os.PathLike] = ()) -> list[Place]:
    """Where to look: the Hugging Face cache, acestep.cpp's ``models/`` folder in the home
    folder, and ``folders`` (each searched itself, not below)."""
    found = [
        Place(hf_cache_dir(), HF_CACHE),
        Place(Path.home() / "acestep.cpp" / "models", ACESTEP_CPP),
    ]
    for folder in folders:
        found.append(Place(Path(os.path.expanduser(str(folder))).absolute(), NAMED))
    return found


def _cache_entries(cache: Path) -> Iterable[tuple[Path, Path, str]]:
    """(snapshot entry, the file it is, its repository folder's name) of every ``.gguf``
    in a Hugging Face cache: ``models--ORG--NAME/snapshots/REV/FILE``."""
    try:
        repos = sorted(p for p in cache.iterdir() if p.name.startswith("models--"))
    except OSError:
        return
    for repo in repos:
        try:
            revisions = sorted((repo / "snapshots").iterdir())
        except OSError:
            continue
        for revision in revisions:
            try:
                entries = sorted(revision.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.suffix.lower() != ".gguf":
                    continue
                try:
                    target = entry.resolve(strict=True)
                except OSError:
                    continue  # a link into blobs the cache never finished
                if target.is_file():
                    yield entry, target, repo.name


def _folder_entries(folder: Path) -> Iterable[tuple[Path, Path, str]]:
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.suffix.lower() == ".gguf" and not entry.is_symlink() and entry.is_file():
            yield entry, entry, ""


def _repo_folder(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


def find(folders: Iterable[str | os.PathLike] = ()) -> list[Found]:
    """Every file in :func:`places` named like one of the catalogue's, with what is known
    of it; the same file seen twice (a cache's two revisions) once."""
    catalogue = cat.load()
    home = library.family_dir()
    seen: set[tuple[int, int]] = set()
    found: list[Found] = []
    for place in places(folders):
        if place.what == HF_CACHE:
            entries = _cache_entries(place.folder)
        else:
            entries = _folder_entries(place.folder)
        for shown, target, repo in entries:
            entry = catalogue.get(shown.name)
            if entry is None:
                continue
            try:
                st = target.stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            if target.parent == home or shown.parent == home:
                continue  # the library's own file
            expected = entry.sha256
            if expected is None and repo == _repo_folder(catalogue.repo):
                expected = _sha_name(target.name)  # the cache files a blob under its sha256
            state, note = NEW, ""
            if (home / entry.name).exists():
                state, note = IN_LIBRARY, "the library has this file"
            elif not entry.approximate and entry.size and st.st_size != entry.size:
                state = WRONG_SIZE
                note = f"{st.st_size} bytes; the catalogue's {entry.name} has {entry.size}"
            elif expected is None:
                state = NO_HASH
                note = (
                    "no sha256 is known for it yet: let Cantor read the hub's file list once "
                    "(cantor models --all while online)"
                )
            found.append(
                Found(
                    path=str(target),
                    shown=str(shown),
                    name=entry.name,
                    kind=entry.kind,
                    size=st.st_size,
                    where=place.what,
                    expected=expected,
                    state=state,
                    note=note,
                )
            )
    return found


def _sha_name(name: str) -> str | None:
    return name if len(name) == 64 and all(c in "0123456789abcdef" for c in name) else None


def adopt(
    paths: Iterable[str],
    *,
    folders: Iterable[str | os.PathLike] = (),
    copy: bool = False,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Adopted]:
    """Adopt the files at ``paths`` (each one :func:`find` offers, by its ``path`` or
    ``shown``): checked, then linked into the library (or copied, when ``copy`` and a link
    cannot be made). ``on_bytes`` hears how many bytes were read, as they are.

    AdoptRefused when a path is not one :func:`find` offers (nothing is adopted then)."""
    offered = {}
    for f in find(folders):
        offered[f.path] = offered[f.shown] = f
    chosen: list[Found] = []
    for path in paths:
        found = offered.get(str(path))
        if found is None:
            raise AdoptRefused(
                f"{path} is not an ACE-Step model file Cantor found on this machine "
                f"(cantor models find lists them)"
            )
        chosen.append(found)
    return [_adopt_one(f, copy=copy, on_bytes=on_bytes) for f in chosen]


def _adopt_one(f: Found, *, copy: bool, on_bytes: Callable[[int], None] | None) -> Adopted:
    def refused(note: str) -> Adopted:
        return Adopted(f.name, f.shown, REFUSED, f.size, 0, note)

    if f.state == IN_LIBRARY:
        return Adopted(f.name, f.shown, ALREADY, f.size, 0, f.note)
    if f.state != NEW or f.expected is None:
        return refused(f.note)
    home = library.family_dir()
    home.mkdir(parents=True, exist_ok=True)
    dest = home / f.name
    tmp = home / f".adopt-{secrets.token_hex(6)}-{f.name}"
    try:
        try:
            os.link(f.path, tmp)
            how = LINKED
        except OSError as exc:
            if not copy:
                why = "another drive" if exc.errno == errno.EXDEV else (exc.strerror or str(exc))
                return refused(
                    f"cannot be linked into the library ({why}); copying it takes "
                    f"{human_size(f.size)} (cantor models find --adopt --copy)"
                )
            try:
                dl.check_free_space(home, f.size)
            except dl.NotEnoughSpace as space:
                return refused(str(space))
            how = COPIED
        # the bytes checked are those the library keeps: the link's (the same file), or the
        # copy's as it is written
        sha = _hash(tmp, on_bytes) if how == LINKED else _copy(Path(f.path), tmp, on_bytes)
        if sha != f.expected:
            return refused(
                f"{f.shown} has other bytes than {f.name} (sha256 {sha}, expected "
                f"{f.expected}): not used"
            )
        try:
            importer.check_header(tmp, f.name)
        except importer.ImportRefused as exc:
            return refused(str(exc))
        try:
            os.link(tmp, dest)
        except FileExistsError:
            return Adopted(f.name, f.shown, ALREADY, f.size, 0, "the library has this file")
        library.record_hash(dest, sha256=sha, expected=f.expected, ok=True)
        saved = f.size if how == LINKED else 0
        return Adopted(f.name, f.shown, how, f.size, saved)
    finally:
        if tmp.exists():
            tmp.unlink()


def _hash(path: Path, on_bytes: Callable[[int], None] | None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while block := src.read(BLOCK):
            digest.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    return digest.hexdigest()


def _copy(src: Path, dest: Path, on_bytes: Callable[[int], None] | None) -> str:
    digest = hashlib.sha256()
    with open(src, "rb") as reader, open(dest, "xb") as writer:
        while block := reader.read(BLOCK):
            digest.update(block)
            writer.write(block)
            if on_bytes is not None:
                on_bytes(len(block))
        writer.flush()
        os.fsync(writer.fileno())
    shutil.copystat(src, dest)
    return digest.hexdigest()
