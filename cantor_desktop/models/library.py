"""The model library on disk: what is downloaded, imported, partial or corrupt.

Downloaded files live flat in ``paths().model_family_dir("acestep")`` — ace-server scans that
one folder, not recursively — as plain files. Files the user imports stay where they are:
their absolute paths are recorded in ``models/library.json`` and they are never moved or
changed. Because ace-server takes one ``--models`` folder and names files by their exact
name, a model's set (DiT + text encoder + VAE + LM) is always taken from ONE folder: the
library folder, or the folder its imported DiT lives in.

Hashes already checked are kept in ``models/hashes.json`` (keyed by absolute path, with the
size and mtime they were taken at), so listing never re-reads gigabytes; ``verify()`` does.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from filelock import FileLock

from . import gguf
from ..fetch.download import part_received, sha256_file
from ..errors import CantorError, short_repr
from ..fetch.partfile import ranges_path
from ..system.paths import paths
from . import catalogue as cat
from .catalogue import FAMILY, SKETCH, SKETCH_DISPLAY, FileEntry, UnknownModel
from ..files import write_atomic

# model states
READY = "ready"
PARTIAL = "partial"
MISSING_COMPANION = "missing companion"
CORRUPT = "corrupt"
NOT_DOWNLOADED = "not downloaded"
# file states
F_READY, F_PARTIAL, F_MISSING, F_CORRUPT = "ready", "partial", "missing", "corrupt"

PART_SUFFIX = ".part"
_KIND_FROM_GGUF = {"dit": "dit", "lm": "lm", "text-enc": "text_enc", "vae": "vae"}
_LM_ORDER = {size: i for i, size in enumerate(cat.LM_SIZES)}


class LibraryError(CantorError):
    """A library operation cannot be done; the message says why and what to do."""


class ModelNotReady(LibraryError):
    """resolve() of a model whose DiT, text encoder or VAE is not usable."""


class NotInstalled(LibraryError, LookupError):
    """remove() of a model with nothing on disk."""


# --------------------------------------------------------------------------- records


def family_dir() -> Path:
    return paths().model_family_dir(FAMILY)


def _registry_file() -> Path:
    return paths().library_file


def _hashes_file() -> Path:
    return paths().hashes_file


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock", timeout=30)


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return default


def _write_json(path: Path, doc) -> None:
    write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _imported() -> list[dict]:
    doc = _read_json(_registry_file(), {})
    items = doc.get("imported") if isinstance(doc, dict) else None
    return [i for i in items or [] if isinstance(i, dict) and isinstance(i.get("path"), str)]


def _save_imported(items: list[dict]) -> None:
    _write_json(_registry_file(), {"version": 1, "imported": items})


def _hashes() -> dict[str, dict]:
    doc = _read_json(_hashes_file(), {})
    return doc if isinstance(doc, dict) else {}


def record_hash(path: Path, *, sha256: str | None, expected: str | None, ok: bool | None) -> None:
    """Remember what is known about a file's content, at its current size and mtime.

    ``ok``: True = its sha256 matched ``expected``; False = it did not (corrupt); None = no
    expected hash was known (the size was all that could be checked).
    """
    st = path.stat()
    with _lock(_hashes_file()):
        doc = _hashes()
        doc[str(path)] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": sha256,
            "expected": expected,
            "ok": ok,
        }
        _write_json(_hashes_file(), doc)


def _forget_hashes(paths_: list[Path]) -> None:
    with _lock(_hashes_file()):
        doc = _hashes()
        changed = False
        for p in paths_:
            changed |= doc.pop(str(p), None) is not None
        if changed:
            _write_json(_hashes_file(), doc)


# --------------------------------------------------------------------------- local files


@dataclass
class LocalFile:
    """A GGUF of this family found on disk (final, or only its .part)."""

    name: str
    kind: str
    path: Path
    quant: str | None = None
    variant: str | None = None
    lm_size: str | None = None
    imported: bool = False
    exists: bool = True  # False: only name.part is there
    part_bytes: int = 0
    problem: str | None = None  # a header that cannot be read: the file is corrupt


def _classify_file(path: Path) -> dict | None:
    info = cat.classify_name(path.name)
    if info is not None:
        return info
    try:
        kind = _KIND_FROM_GGUF.get(gguf.model_kind(path) or "")
    except gguf.GGUFError as exc:
        # a file of its own name whose header cannot be read: listed as a corrupt model
        # (never left out silently, never an error for the whole library)
        reason = str(exc).replace(f"{path}: ", "")
        return {"kind": "dit", "quant": None, "variant": None, "lm_size": None, "problem": reason}
    if kind is None:
        return None
    return {"kind": kind, "quant": None, "variant": None, "lm_size": None}


def _file_or_link(path: Path) -> bool:
    """A regular file, or a link (listed, to be refused by name rather than left out)."""
    return path.is_symlink() or path.is_file()


def part_path(final: Path) -> Path:
    return final.with_name(final.name + PART_SUFFIX)


def _part_size(final: Path) -> int:
    """Bytes a download left in ``final``'s part (a ranged part is sized to the whole file;
    its ranges file says how much of it arrived)."""
    return part_received(final)


def _scan_family_dir() -> dict[str, LocalFile]:
    folder = family_dir()
    found: dict[str, LocalFile] = {}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        if name.endswith(".gguf") and entry.is_file():
            info = _classify_file(Path(entry.path))
            if info:
                found[name] = LocalFile(
                    name=name,
                    kind=info["kind"],
                    path=Path(entry.path),
                    quant=info["quant"],
                    variant=info["variant"],
                    lm_size=info["lm_size"],
                    part_bytes=_part_size(Path(entry.path)),
                    problem=info.get("problem"),
                )
    for entry in entries:
        name = entry.name
        if name.endswith(".gguf" + PART_SUFFIX) and entry.is_file():
            final_name = name[: -len(PART_SUFFIX)]
            info = cat.classify_name(final_name)
            if info and final_name not in found:
                found[final_name] = LocalFile(
                    name=final_name,
                    kind=info["kind"],
                    path=folder / final_name,
                    quant=info["quant"],
                    variant=info["variant"],
                    lm_size=info["lm_size"],
                    exists=False,
                    part_bytes=_part_size(folder / final_name),
                )
    return found


def _imported_pools() -> dict[Path, dict[str, LocalFile]]:
    pools: dict[Path, dict[str, LocalFile]] = {}
    for item in _imported():
        path = Path(item["path"])
        info = cat.classify_name(path.name) or {}
        local = LocalFile(
            name=path.name,
            kind=item.get("kind", "dit"),
            path=path,
            quant=info.get("quant"),
            variant=info.get("variant"),
            lm_size=info.get("lm_size"),
            imported=True,
            exists=path.is_file(),
        )
        pools.setdefault(path.parent, {})[path.name] = local
    return pools


# --------------------------------------------------------------------------- file states


@dataclass
class FileInfo:
    """One file of a model's set, as the Library page shows it."""

    name: str
    kind: str
    size: int  # expected size (approximate when size_approximate)
    path: str | None  # where it is (or will be downloaded to); None: nowhere yet
    state: str  # ready | partial | missing | corrupt
    on_disk: int = 0  # bytes on disk now (the .part's when partial)
    verified: bool | None = None  # True: sha256 checked; None: size only
    size_approximate: bool = False
    imported: bool = False
    sha256: str | None = None
    problem: str | None = None  # why a corrupt file is corrupt, when its header says

    @property
    def to_get(self) -> int:
        if self.state == F_READY:
            return 0
        if self.state == F_PARTIAL:
            return max(0, self.size - self.on_disk)
        return self.size


def _file_state(
    local: LocalFile | None, entry: FileEntry | None, hashes: dict[str, dict], kind: str, name: str
) -> FileInfo:
    size = entry.size if entry else 0
    approx = bool(entry and entry.approximate)
    sha = entry.sha256 if entry else None
    missing = FileInfo(
        name=name,
        kind=kind,
        size=size,
        path=None,
        state=F_MISSING,
        size_approximate=approx,
        sha256=sha,
    )
    if local is None:
        return missing
    path_s = str(local.path)
    if not local.exists:
        state = F_PARTIAL if local.part_bytes else F_MISSING
        return replace(
            missing, path=path_s, state=state, on_disk=local.part_bytes, imported=local.imported
        )
    st = local.path.stat()
    record = hashes.get(path_s)
    fresh = bool(
        record and record.get("size") == st.st_size and record.get("mtime_ns") == st.st_mtime_ns
    )
    state, verified = F_READY, None
    if fresh and record is not None:
        if record.get("ok") is False:
            state = F_CORRUPT
        elif record.get("ok") is True:
            verified = True
        if sha and record.get("sha256") and record["sha256"] != sha:
            state, verified = F_CORRUPT, False
    if entry and not entry.approximate and st.st_size != entry.size:
        state = F_CORRUPT
    if record and record.get("ok") and record.get("size") != st.st_size:
        state = F_CORRUPT  # a verified file whose size changed is not that file any more
    if local.problem:
        state = F_CORRUPT
    if not entry or entry.approximate:
        size = st.st_size if state == F_READY else size
    return replace(
        missing,
        size=size,
        path=path_s,
        state=state,
        on_disk=st.st_size,
        verified=verified,
        size_approximate=approx and state != F_READY,
        imported=local.imported,
        sha256=(record or {}).get("sha256") if fresh else sha,
        problem=local.problem,
    )


# --------------------------------------------------------------------------- models


@dataclass
class ModelInfo:
    """One model of the library (or of the catalogue, not downloaded yet)."""

    name: str
    family: str
    variant: str | None
    quant: str | None
    display_name: str
    state: str
    files: list[FileInfo] = field(default_factory=list)
    size_bytes: int = 0  # on disk now (including .part files)
    download_bytes: int = 0  # still to download for a complete set
    download_approximate: bool = False
    folder: str | None = None  # the one folder ace-server is pointed at
    builtin: bool = False
    imported: bool = False
    lm_size: str | None = None

    def to_dict(self) -> dict:
        doc = asdict(self)
        return doc


@dataclass(frozen=True)
class ModelFiles:
    """What the node needs to start ace-server for a model and name its files in requests.

    ``ace-server --models <models_dir>``; requests carry ``synth_model=dit``, ``lm_model=lm``
    (exact file names). ``builtin`` is True for the sketch engine (no files at all).
    """

    family: str
    name: str
    models_dir: Path
    dit: str
    lm: str | None
    text_enc: str
    vae: str
    builtin: bool = False


@dataclass
class _Set:
    """A model's chosen files: kind → (name, LocalFile or None, catalogue entry or None)."""

    dit: tuple[str, LocalFile | None, FileEntry | None]
    parts: dict[str, tuple[str, LocalFile | None, FileEntry | None]]
    folder: Path


def _pick(
    pool: dict[str, LocalFile], kind: str, preferred: list[FileEntry], catalogue: cat.Catalogue
) -> tuple[str, LocalFile | None, FileEntry | None] | None:
    """Present file first (in preference order), then a partial one, then the catalogue's."""
    order = {e.name: i for i, e in enumerate(preferred)}
    candidates = sorted(
        (f for f in pool.values() if f.kind == kind),
        key=lambda f: (order.get(f.name, len(order)), f.name),
    )
    for want_exists in (True, False):
        for f in candidates:
            if f.exists == want_exists and (f.exists or f.part_bytes):
                return f.name, f, catalogue.get(f.name)
    if preferred:
        return preferred[0].name, None, preferred[0]
    return None


def _pick_lm(
    pool: dict[str, LocalFile], catalogue: cat.Catalogue, size: str, explicit: bool
) -> tuple[str, LocalFile | None, FileEntry | None] | None:
    """The LM of the wanted size; with "auto", any LM already present will do."""
    lms = [f for f in pool.values() if f.kind == "lm"]

    def rank(f: LocalFile):
        return (
            f.lm_size != size,
            abs(_LM_ORDER.get(f.lm_size or "", 9) - _LM_ORDER[size]),
            f.quant != cat.DEFAULT_QUANT,
            f.name,
        )

    present = sorted((f for f in lms if f.exists), key=rank)
    if present and (not explicit or present[0].lm_size == size or present[0].lm_size is None):
        return present[0].name, present[0], catalogue.get(present[0].name)
    partial = sorted(
        (f for f in lms if not f.exists and f.part_bytes and f.lm_size == size), key=rank
    )
    if partial:
        return partial[0].name, partial[0], catalogue.get(partial[0].name)
    wanted = catalogue.lms(size)
    if wanted:
        return wanted[0].name, None, wanted[0]
    return None


def _model_set(
    dit_name: str,
    dit_local: LocalFile | None,
    dit_entry: FileEntry | None,
    pool: dict[str, LocalFile],
    folder: Path,
    catalogue: cat.Catalogue,
    lm_size: str,
    explicit: bool,
) -> _Set:
    pseudo_dit = dit_entry or FileEntry(
        name=dit_name, kind="dit", quant=(dit_local.quant if dit_local else None) or "", size=0
    )
    parts: dict[str, tuple] = {}
    te = _pick(pool, "text_enc", catalogue.text_encoder_for(pseudo_dit), catalogue)
    vae = _pick(pool, "vae", catalogue.vaes(), catalogue)
    lm = _pick_lm(pool, catalogue, lm_size, explicit)
    for kind, choice in (("text_enc", te), ("vae", vae), ("lm", lm)):
        if choice is not None:
            parts[kind] = choice
    return _Set(dit=(dit_name, dit_local, dit_entry), parts=parts, folder=folder)


def _info_for(s: _Set, hashes: dict[str, dict], *, imported: bool, lm_size: str) -> ModelInfo:
    dit_name, dit_local, dit_entry = s.dit
    stem = dit_name[: -len(".gguf")]
    files = [_file_state(dit_local, dit_entry, hashes, "dit", dit_name)]
    for kind in ("text_enc", "vae", "lm"):
        if kind in s.parts:
            name, local, entry = s.parts[kind]
            info = _file_state(local, entry, hashes, kind, name)
            if info.path is None and not imported:
                info.path = str(s.folder / name)
            files.append(info)
    if files[0].path is None and not imported:
        files[0].path = str(s.folder / dit_name)
    states = [f.state for f in files]
    if F_CORRUPT in states:
        state = CORRUPT
    elif F_PARTIAL in states:
        state = PARTIAL
    elif files[0].state == F_READY:
        complete = all(f.state == F_READY for f in files) and len(files) == 4
        state = READY if complete else MISSING_COMPANION
    else:
        state = NOT_DOWNLOADED
    variant = (dit_entry.variant if dit_entry else None) or (
        dit_local.variant if dit_local else None
    )
    quant = (dit_entry.quant if dit_entry else None) or (dit_local.quant if dit_local else None)
    shown = cat.display_name(variant, quant) if variant else stem
    lm = next((f for f in files if f.kind == "lm"), None)
    lm_info = cat.classify_name(lm.name) if lm else None
    return ModelInfo(
        name=stem,
        family=FAMILY,
        variant=variant,
        quant=quant,
        display_name=shown,
        state=state,
        files=files,
        size_bytes=sum(f.on_disk for f in files),
        download_bytes=sum(f.to_get for f in files),
        download_approximate=any(f.size_approximate and f.to_get for f in files),
        folder=str(s.folder),
        imported=imported,
        lm_size=(lm_info or {}).get("lm_size") or lm_size,
    )


def sketch_info() -> ModelInfo:
    return ModelInfo(
        name=SKETCH,
        family=SKETCH,
        variant=None,
        quant=None,
        display_name=SKETCH_DISPLAY,
        state=READY,
        builtin=True,
    )


_VARIANT_ORDER = ("turbo", "sft", "base", "turbo-shift1", "turbo-shift3", "turbo-continuous")
_QUANT_ORDER = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "BF16")


def _catalogue_order(entry: FileEntry) -> tuple:
    """2B before XL, turbo first, Q8_0 (the default) first: the order a newcomer wants."""
    variant = entry.variant or ""
    xl = variant.startswith("xl-")
    base = variant[3:] if xl else variant
    return (
        xl,
        _VARIANT_ORDER.index(base) if base in _VARIANT_ORDER else 99,
        base,
        _QUANT_ORDER.index(entry.quant) if entry.quant in _QUANT_ORDER else 99,
        entry.name,
    )


def _all_sets(
    catalogue: cat.Catalogue, lm_size: str, explicit: bool, include_catalogue: bool
) -> Iterator[tuple[_Set, bool]]:
    home = family_dir()
    pool = _scan_family_dir()
    seen: set[str] = set()
    for f in sorted(pool.values(), key=lambda f: f.name):
        if f.kind != "dit" or not (f.exists or f.part_bytes):
            continue
        seen.add(f.name)
        yield (
            _model_set(f.name, f, catalogue.get(f.name), pool, home, catalogue, lm_size, explicit),
            False,
        )
    for folder, ipool in sorted(_imported_pools().items()):
        for f in sorted(ipool.values(), key=lambda f: f.name):
            if f.kind != "dit" or f.name in seen:
                continue
            seen.add(f.name)
            yield (
                _model_set(
                    f.name, f, catalogue.get(f.name), ipool, folder, catalogue, lm_size, explicit
                ),
                True,
            )
    if include_catalogue:
        for entry in sorted(catalogue.dits(), key=_catalogue_order):
            if entry.name not in seen:
                yield (
                    _model_set(entry.name, None, entry, pool, home, catalogue, lm_size, explicit),
                    False,
                )


def _lm_choice(lm_size: str | None, lm_explicit: bool | None) -> tuple[str, bool]:
    if lm_size:
        if lm_size not in cat.LM_SIZES:
            raise LibraryError(
                f"language model size {lm_size!r} is not one of {', '.join(cat.LM_SIZES)}"
            )
        return lm_size, True if lm_explicit is None else lm_explicit
    return cat.configured_lm_size()


def list_models(
    *,
    include_catalogue: bool = False,
    lm_size: str | None = None,
    catalogue: cat.Catalogue | None = None,
    lm_explicit: bool | None = None,
) -> list[ModelInfo]:
    """The sketch engine, then every model with a file on disk (downloaded, partial or
    imported); with ``include_catalogue`` also every catalogue model not downloaded yet.

    The language model of each set is node.toml's ``models.lm`` (auto: by installed memory;
    with auto any LM already present will do), or ``lm_size`` when given.
    """
    catalogue = catalogue or cat.load()
    size, explicit = _lm_choice(lm_size, lm_explicit)
    hashes = _hashes()
    out = [sketch_info()]
    for s, imported in _all_sets(catalogue, size, explicit, include_catalogue):
        out.append(_info_for(s, hashes, imported=imported, lm_size=size))
    return out


def find(
    name: str,
    *,
    catalogue: cat.Catalogue | None = None,
    lm_size: str | None = None,
    lm_explicit: bool | None = None,
) -> ModelInfo:
    """One model by name (a name without quantisation means Q8_0); UnknownModel if none."""
    wanted = name.strip()
    if wanted.endswith(".gguf"):
        wanted = wanted[: -len(".gguf")]
    if wanted == SKETCH:
        return sketch_info()
    catalogue = catalogue or cat.load()
    models = list_models(
        include_catalogue=True, lm_size=lm_size, catalogue=catalogue, lm_explicit=lm_explicit
    )
    for m in models:
        if m.name == wanted:
            return m
    full = cat.canonical_name(wanted)  # raises UnknownModel for names that are not ACE-Step
    for m in models:
        if m.name == full:
            return m
    catalogue.dit_for(wanted)  # raises UnknownModel listing what exists
    raise UnknownModel(f"unknown model {name!r}")


def resolve(name: str, *, lm_size: str | None = None) -> ModelFiles:
    """The folder and exact file names the node starts ace-server with.

    Raises UnknownModel, or ModelNotReady when the DiT, text encoder or VAE is not there
    (the message says which and how to get it). ``lm`` is None when no language model is
    present: instrumentals still work, vocals need one.
    """
    model = find(name, lm_size=lm_size, lm_explicit=False if lm_size else None)
    if model.builtin:
        return ModelFiles(
            family=SKETCH,
            name=SKETCH,
            models_dir=family_dir(),
            dit="",
            lm=None,
            text_enc="",
            vae="",
            builtin=True,
        )
    by_kind = {f.kind: f for f in model.files}
    problems = []
    for kind in ("dit", "text_enc", "vae"):
        f = by_kind.get(kind)
        if f is None or f.state != F_READY:
            what = cat.KIND_LABELS[kind]
            problems.append(
                f"{what} {f.name if f else ''} is {f.state if f else 'missing'}".replace("  ", " ")
            )
    if problems:
        hint = (
            f"import it from {model.folder}"
            if model.imported
            else f"run `cantor pull {model.name}`"
        )
        raise ModelNotReady(f"{model.name} is not ready ({'; '.join(problems)}): {hint}")
    if model.folder is None:
        raise ModelNotReady(f"{model.name} is not ready: it has no folder")
    lm = by_kind.get("lm")
    return ModelFiles(
        family=FAMILY,
        name=model.name,
        models_dir=Path(model.folder),
        dit=by_kind["dit"].name,
        lm=lm.name if lm is not None and lm.state == F_READY else None,
        text_enc=by_kind["text_enc"].name,
        vae=by_kind["vae"].name,
    )


# --------------------------------------------------------------------------- remove


@dataclass
class RemoveResult:
    name: str
    deleted: list[str] = field(default_factory=list)  # files deleted from the library folder
    forgotten: list[str] = field(default_factory=list)  # imported files no longer listed
    freed_bytes: int = 0


def remove(name: str) -> RemoveResult:
    """Delete a model's DiT (and its .part) and the companions no other model uses.

    Companions (text encoder, VAE, language models) are shared by every DiT of a folder, so
    they go with the last DiT of that folder. Imported files are only forgotten, never deleted.
    """
    model = find(name)
    if model.builtin:
        raise LibraryError("the sketch engine is built in and cannot be removed")
    if not model.imported and not model.files[0].on_disk:  # no DiT, not even a .part
        raise NotInstalled(f"{model.name} is not downloaded; nothing to remove")
    result = RemoveResult(name=model.name)
    folder = Path(model.folder or family_dir())
    dit_name = f"{model.name}.gguf" if not model.imported else model.files[0].name
    if model.imported:
        pool = _imported_pools().get(folder, {})
    else:
        pool = _scan_family_dir()
    others = [
        f
        for f in pool.values()
        if f.kind == "dit" and f.name != dit_name and (f.exists or f.part_bytes)
    ]
    targets = [f for f in pool.values() if f.name == dit_name]
    if not others:
        targets += [f for f in pool.values() if f.kind != "dit"]
    if model.imported:
        gone = {str(f.path) for f in targets}
        with _lock(_registry_file()):
            items = _imported()
            _save_imported([i for i in items if i["path"] not in gone])
        result.forgotten = sorted(gone)
        _forget_hashes([Path(p) for p in gone])
        return result
    removed_paths = [
        p
        for f in targets
        for p in (f.path, part_path(f.path), ranges_path(part_path(f.path)))
        if _delete_counted(p, result)
    ]
    _forget_hashes(removed_paths)
    return result


def remove_parts(name: str, *, companions: bool = True) -> RemoveResult:
    """Delete the ``.part`` files a download of ``name`` left in the library folder (one that
    failed or was stopped), never a complete file. ``companions`` False keeps the partial
    companions (text encoder, VAE, LM), which another model's download may be writing.

    Raises UnknownModel, or LibraryError for the built-in sketch and imported models (they
    are never downloaded)."""
    model = find(name)
    if model.builtin:
        raise LibraryError("the sketch engine is built in: nothing is downloaded for it")
    if model.imported:
        raise LibraryError(
            f"{model.name} was imported from {model.folder}; it has no partial downloads"
        )
    result = RemoveResult(name=model.name)
    folder = family_dir()
    for f in model.files:
        if f.kind != "dit" and not companions:
            continue
        _delete_counted(part_path(folder / f.name), result)
        _delete_counted(ranges_path(part_path(folder / f.name)), result)
    return result


def _delete_counted(path: Path, result: RemoveResult) -> bool:
    """Delete ``path`` and count it in ``result``; False when it was not there."""
    try:
        size = path.stat().st_size
        path.unlink()
    except FileNotFoundError:
        return False
    result.deleted.append(str(path))
    result.freed_bytes += size
    return True


# --------------------------------------------------------------------------- import


@dataclass
class ImportedFile:
    path: str
    kind: str | None  # None: skipped
    note: str = ""


def import_path(path: str | os.PathLike) -> list[ImportedFile]:
    """Adopt GGUF files the user already has (one file, or every *.gguf directly in a
    folder), classified by their ``general.architecture``. Nothing is moved or changed.

    Raises LibraryError when the path does not exist or holds no GGUF file.
    """
    src = Path(os.path.abspath(os.path.expanduser(str(path))))
    if not src.exists() and not src.is_symlink():
        raise LibraryError(f"{src} does not exist")
    if src.is_dir() and not src.is_symlink():
        files = sorted(p for p in src.iterdir() if p.suffix.lower() == ".gguf" and _file_or_link(p))
        if not files:
            raise LibraryError(f"{src} holds no .gguf files (folders are not searched recursively)")
    else:
        files = [src]
    home = family_dir()
    results: list[ImportedFile] = []
    with _lock(_registry_file()):
        items = _imported()
        known = {i["path"]: i for i in items}
        local_dits = {f.name for f in _scan_family_dir().values() if f.kind == "dit"}
        for f in files:
            if f.parent == home.resolve() or f.parent == home:
                results.append(ImportedFile(str(f), None, "already in the library folder"))
                continue
            if f.is_symlink():
                results.append(
                    ImportedFile(
                        str(f), None, "a symbolic link (links are refused: import the file itself)"
                    )
                )
                continue
            try:
                arch = gguf.read_architecture(f)
            except gguf.GGUFError as exc:
                results.append(ImportedFile(str(f), None, f"not a readable GGUF: {exc}"))
                continue
            kind = _KIND_FROM_GGUF.get(gguf.KIND_BY_ARCH.get(arch, ""))
            if kind is None:
                results.append(
                    ImportedFile(
                        str(f), None, f"not an ACE-Step file (architecture {short_repr(arch, 40)})"
                    )
                )
                continue
            if kind == "dit":
                clash = f.name in local_dits or any(
                    i["kind"] == "dit" and Path(i["path"]).name == f.name and i["path"] != str(f)
                    for i in items
                )
                if clash:
                    results.append(
                        ImportedFile(
                            str(f), None, f"a model named {f.stem} is already in the library"
                        )
                    )
                    continue
            st = f.stat()
            record = {"path": str(f), "kind": kind, "size": st.st_size, "architecture": arch}
            if str(f) in known:
                known[str(f)].update(record)
            else:
                items.append(record)
                known[str(f)] = record
            results.append(ImportedFile(str(f), kind, "imported"))
        _save_imported(items)
    return results


# --------------------------------------------------------------------------- verify, usage


@dataclass
class VerifyResult:
    path: str
    name: str
    state: str  # ok | corrupt | unverified (no known hash) | missing
    sha256: str | None = None
    expected: str | None = None


def _every_file() -> list[LocalFile]:
    files = [f for f in _scan_family_dir().values()]
    for pool in _imported_pools().values():
        files.extend(pool.values())
    return files


def verify(on_file: Callable[[VerifyResult], None] | None = None) -> list[VerifyResult]:
    """Re-hash every model file (library folder and imported) and record the results.

    A file is checked against the catalogue's sha256 when known, else against the sha256
    recorded when it was downloaded; with neither it is "unverified" (its hash is recorded
    so a later change can be seen).
    """
    catalogue = cat.load()
    hashes = _hashes()
    results = []
    for f in sorted(_every_file(), key=lambda f: str(f.path)):
        if not f.exists:
            if f.imported:
                r = VerifyResult(str(f.path), f.name, "missing")
                results.append(r)
                on_file and on_file(r)
            continue
        entry = catalogue.get(f.name)
        record = hashes.get(str(f.path)) or {}
        expected = (entry.sha256 if entry else None) or record.get("expected")
        actual = sha256_file(f.path)
        ok = None if expected is None else actual == expected
        if entry and not entry.approximate and f.path.stat().st_size != entry.size:
            ok = False
        record_hash(f.path, sha256=actual, expected=expected, ok=ok)
        state = "unverified" if ok is None else ("ok" if ok else "corrupt")
        r = VerifyResult(str(f.path), f.name, state, actual, expected)
        results.append(r)
        if on_file:
            on_file(r)
    return results


def disk_usage() -> dict:
    """Bytes used by model files: in the library folder (incl. .part), imported elsewhere,
    and the free space where downloads go."""
    home = family_dir()
    library = partial = 0
    for f in _scan_family_dir().values():
        if f.exists:
            library += f.path.stat().st_size
        partial += f.part_bytes
    imported = 0
    for pool in _imported_pools().values():
        for f in pool.values():
            if f.exists:
                imported += f.path.stat().st_size
    probe = home if home.exists() else paths().data_dir
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    return {
        "folder": str(home),
        "library_bytes": library,
        "partial_bytes": partial,
        "imported_bytes": imported,
        "total_bytes": library + partial + imported,
        "free_bytes": free,
    }
