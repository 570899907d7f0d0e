"""Model files brought to the node by the user: adopted where they are (a path on the node's
machine), or received over HTTP from another machine (an upload) into the library folder.

Either way the file is checked before the library takes it: a ``.gguf`` file that can be
read, whose GGUF header parses and names an ACE-Step architecture (DiT, language model,
text encoder or VAE) that agrees with its name. An upload is written beside the library
folder's files under a hidden name, hashed as it arrives, and only renamed to its own name
when whole and checked; a refused or interrupted upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import AsyncIterator

from ..fetch import download as dl
from ..files import write_stream
from . import gguf
from ..errors import short_repr
from . import catalogue as cat
from . import library

UPLOAD_CAP = 16 * 2**30
"""The largest file an upload may be (the biggest published file, XL BF16, is ~10 GB)."""

FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,200}\.gguf")
_KIND_FROM_ARCH = {
    gguf.ARCH_DIT: "dit",
    gguf.ARCH_LM: "lm",
    gguf.ARCH_TEXT_ENC: "text_enc",
    gguf.ARCH_VAE: "vae",
}


class ImportRefused(library.LibraryError):
    """The file cannot be imported; the message says why. ``field`` names the request's
    part at fault; ``status`` is the HTTP status the node answers with."""

    def __init__(self, message: str, *, field: str = "path", status: int = 422):
        super().__init__(message)
        self.field = field
        self.status = status


@dataclass
class Imported:
    """One file the library took: where it is now, what it is, and how it got there."""

    path: str
    kind: str  # dit | lm | text_enc | vae
    name: str
    size: int
    how: str  # "adopted" (left where it was) | "uploaded" | "already there"

    def to_json(self) -> dict:
        return asdict(self)


def check_header(path: Path, name: str | None = None) -> str:
    """The kind of an ACE-Step GGUF (``dit``, ``lm``, ``text_enc``, ``vae``) from its header,
    checked against what its ``name`` says when the name is one of the catalogue's."""
    shown = name or path.name
    try:
        arch = gguf.read_architecture(path)
    except gguf.GGUFError as exc:
        reason = str(exc).replace(f"{path}: ", "")
        raise ImportRefused(f"{shown} is not a readable GGUF model: {reason}") from None
    kind = _KIND_FROM_ARCH.get(arch)
    if kind is None:
        raise ImportRefused(
            f"{shown} is not an ACE-Step model file (its architecture is "
            f"{short_repr(arch, 40)}; ACE-Step files are {', '.join(_KIND_FROM_ARCH)})"
        )
    named = cat.classify_name(shown)
    if named is not None and named["kind"] != kind:
        raise ImportRefused(
            f"{shown} is named like a {cat.KIND_LABELS[named['kind']]} but "
            f"its header says {cat.KIND_LABELS[kind]} ({arch})"
        )
    return kind


def check_file(path: str | os.PathLike) -> tuple[Path, str]:
    """A path on this machine that the library may adopt: (absolute path, kind)."""
    text = os.path.expanduser(str(path)).strip()
    if not text:
        raise ImportRefused("give the path of a .gguf file")
    src = Path(text)
    if not src.is_absolute():
        raise ImportRefused(f"{text} is not an absolute path on the node's machine")
    if src.is_symlink():
        raise ImportRefused(
            f"{src} is a symbolic link; import the file itself (links are refused: one could "
            f"point at any file the node may read)"
        )
    if not src.exists():
        raise ImportRefused(f"{src} does not exist on the node's machine")
    if src.is_dir():
        raise ImportRefused(f"{src} is a folder; choose the .gguf files in it")
    if not src.is_file():
        raise ImportRefused(f"{src} is not a regular file")
    if src.suffix.lower() != ".gguf":
        raise ImportRefused(f"{src.name} is not a .gguf file")
    try:
        with open(src, "rb"):
            pass
    except OSError as exc:
        raise ImportRefused(f"{src} cannot be read: {exc.strerror or exc}") from None
    return src, check_header(src)


def import_local(path: str | os.PathLike) -> Imported:
    """Adopt a GGUF file in place (nothing moved or copied): for a node on this machine."""
    src, kind = check_file(path)
    [result] = library.import_path(src)
    if result.kind is None:
        if result.note.startswith("already in the library folder"):
            return Imported(str(src), kind, src.name, src.stat().st_size, "already there")
        raise ImportRefused(f"{src.name}: {result.note}", status=409)
    return Imported(result.path, result.kind, src.name, src.stat().st_size, "adopted")


def check_upload_name(name: str | None) -> str:
    """The file name an upload will have in the library folder (a plain ``*.gguf`` name)."""
    if not isinstance(name, str) or not FILE_NAME.fullmatch(name):
        raise ImportRefused(
            "name: give the file's name, e.g. my-model-Q8_0.gguf (letters, "
            "digits, . _ + -, ending in .gguf)",
            field="name",
        )
    return name


async def receive_upload(
    name: str, chunks: AsyncIterator[bytes], length: int | None = None
) -> Imported:
    """Write an upload into the library folder as ``name`` once it is whole and checked.

    ``length``: the announced size (checked against the free space first, and against what
    arrived). ImportRefused (with its HTTP status) for a bad name, a file already there, no
    room, a body that is not an ACE-Step GGUF or stops early."""
    name = check_upload_name(name)
    folder = library.family_dir()
    dest = folder / name
    if dest.exists():
        raise ImportRefused(
            f"{name} is already in the node's library; remove it first", field="name", status=409
        )
    if length is not None:
        if length > UPLOAD_CAP:
            raise ImportRefused(
                f"{name} is {length} bytes; at most {UPLOAD_CAP} are taken",
                field="body",
                status=413,
            )
        folder.mkdir(parents=True, exist_ok=True)
        try:
            dl.check_free_space(folder, length)
        except dl.NotEnoughSpace as exc:
            raise ImportRefused(str(exc), field="body", status=507) from None
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".upload-{secrets.token_hex(6)}-{name}"
    digest = hashlib.sha256()
    head = b""

    def check(got: int, chunk: bytes) -> None:
        nonlocal head
        if len(head) < len(gguf.MAGIC):  # refuse a non-GGUF at its first bytes
            head += chunk[: len(gguf.MAGIC) - len(head)]
            if len(head) == len(gguf.MAGIC) and head != gguf.MAGIC:
                raise ImportRefused(
                    f"{name} is not a GGUF file (it does not start with GGUF)", field="body"
                )
        if got > UPLOAD_CAP:
            raise ImportRefused(
                f"{name} is larger than {UPLOAD_CAP} bytes", field="body", status=413
            )

    try:
        got = await write_stream(tmp, chunks, check, digest)
        if length is not None and got != length:
            raise ImportRefused(
                f"{name}: the upload stopped after {got} of {length} bytes",
                field="body",
                status=400,
            )
        kind = check_header(tmp, name)
        _place(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    sha = digest.hexdigest()
    entry = cat.load().get(name)
    expected = entry.sha256 if entry is not None else None
    library.record_hash(
        dest, sha256=sha, expected=expected, ok=None if expected is None else sha == expected
    )
    return Imported(str(dest), kind, name, got, "uploaded")


def _place(tmp: Path, dest: Path) -> None:
    """Give the checked file its name, never over a file that appeared meanwhile."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise ImportRefused(
            f"{dest.name} is already in the node's library; remove it first",
            field="name",
            status=409,
        ) from None
    except OSError:  # no hard links here (some file systems)
        if dest.exists():
            raise ImportRefused(
                f"{dest.name} is already in the node's library; remove it first",
                field="name",
                status=409,
            ) from None
        os.replace(tmp, dest)
