"""The node's styles (:mod:`cantor_desktop.song.style`), kept in ``state/styles/`` so every
app and the CLI see the same ones: one JSON file a style, named by a hash of its name, and
the style's reference sound kept as an upload of its own (:mod:`.uploads`: a copy made when
the style is saved, so the song or upload it came from may go; the engine's latent of it is
kept once encoded, as for any upload).

A style travels as one file (:func:`export_bytes` / :func:`import_bytes`): a zip holding
``style.json`` and the reference sound, byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any

from ..files import write_atomic
from ..song.record import Song
from ..song.style import Style, StyleError, check_name
from ..system.paths import paths
from . import sources, take_files, uploads

STYLE_FILE = "style.json"
EXPORT_MAX = uploads.MAX_BYTES + 2**20
"""The largest style file taken: its reference sound (an upload's limit) and its JSON."""


class StyleNotFound(LookupError):
    pass


def folder() -> Path:
    return paths().styles_dir


def _file(name: str) -> Path:
    digest = hashlib.sha256(check_name(name).casefold().encode("utf-8")).hexdigest()[:20]
    return folder() / f"{digest}.json"


def every() -> list[Style]:
    """Every style kept, by name; a file that cannot be read is left out."""
    found = []
    for path in sorted(folder().glob("*.json")) if folder().is_dir() else []:
        try:
            found.append(Style.from_json(json.loads(path.read_text("utf-8"))))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda s: s.name.casefold())


def get(name: str) -> Style:
    path = _file(name)
    try:
        return Style.from_json(json.loads(path.read_text("utf-8")))
    except FileNotFoundError:
        raise StyleNotFound(f"no style named {name!r}") from None


def _write(style: Style) -> None:
    text = json.dumps(style.to_json(), indent=1, ensure_ascii=False) + "\n"
    write_atomic(_file(style.name), text.encode("utf-8"))


def reference_copy(ref: dict[str, Any], songs: dict[str, Song]) -> tuple[dict[str, str], str]:
    """A copy of the sound ``ref`` names (a take or an upload) as an upload of the style's
    own: ({"upload": id}, the sound's name). SourceError when it cannot be read."""
    found = sources.resolve("reference", ref, songs)
    upload_id, part = uploads.new_part()
    opened = (
        take_files.open_take(found.audio_path) if found.take_file else open(found.audio_path, "rb")
    )
    with opened as src, open(part, "wb") as out:
        shutil.copyfileobj(src, out)
    shown = found.audio_path.name
    if "upload" in ref:  # the file's own name, as the musician sent it
        shown = uploads.get(ref["upload"]).name
    kept = uploads.keep(upload_id, part, shown)
    return {"upload": kept.id}, kept.name


def save(style: Style, *, replace: bool = True) -> Style:
    """Keep ``style`` (a style of that name is replaced, and its sound removed unless the
    new one keeps it). FileExistsError when ``replace`` is false and the name is taken."""
    try:
        old: Style | None = get(style.name)
    except StyleNotFound:
        old = None
    if old is not None and not replace:
        raise FileExistsError(f"a style named {old.name!r} exists")
    style.created = style.created or time.time()
    folder().mkdir(parents=True, exist_ok=True)
    _write(style)
    if old is not None and old.reference and old.reference != style.reference:
        _drop_sound(old)
    return style


def remove(name: str) -> Style:
    style = get(name)
    _file(name).unlink()
    _drop_sound(style)
    return style


def rename(name: str, new: str) -> Style:
    style = get(name)
    new = check_name(new)
    if _file(new) != _file(name) and _file(new).exists():
        raise FileExistsError(f"a style named {new!r} exists")
    old_file = _file(name)
    style.name = new
    _write(style)
    if _file(new) != old_file:
        old_file.unlink()
    return style


def _drop_sound(style: Style) -> None:
    if style.reference and "upload" in style.reference:
        try:
            uploads.remove(style.reference["upload"])
        except uploads.UploadError:
            pass


def missing(style: Style, installed: set[str], adapters: set[str]) -> list[dict[str, str]]:
    """What a song of the style needs that this node lacks: ``{"part": "model" | "adapter"
    | "reference", "text": words}`` for each."""
    out = []
    model = style.fields.get("model")
    if isinstance(model, str) and model and model not in installed:
        out.append({"part": "model", "text": f"the model {model} (cantor pull {model})"})
    adapter = style.fields.get("adapter")
    if isinstance(adapter, str) and adapter and adapter not in adapters:
        out.append({"part": "adapter", "text": f"the adapter {adapter}"})
    if style.reference and "upload" in style.reference:
        try:
            uploads.get(style.reference["upload"])
        except (uploads.UploadError, LookupError):
            out.append({"part": "reference", "text": "its reference sound (it was removed)"})
    return out


def export_bytes(name: str) -> bytes:
    """The style as one file: a zip of ``style.json`` and its reference sound."""
    style = get(name)
    doc = style.to_json()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        if style.reference and "upload" in style.reference:
            upload = uploads.get(style.reference["upload"])
            sound = f"reference{upload.path.suffix}"
            z.write(upload.path, sound)
            doc["reference"] = {"file": sound}
        z.writestr(STYLE_FILE, json.dumps(doc, indent=1, ensure_ascii=False))
    return buf.getvalue()


def import_bytes(data: bytes, *, replace: bool = False) -> Style:
    """A style from its file (:func:`export_bytes`), its sound kept as a new upload.
    StyleError naming what is wrong with the file; FileExistsError when the name is taken
    and ``replace`` is false."""
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
        names = z.namelist()
        doc = json.loads(z.read(STYLE_FILE))
    except (zipfile.BadZipFile, KeyError, ValueError):
        raise StyleError("body", f"not a style file (a zip with {STYLE_FILE})") from None
    if not isinstance(doc, dict):
        raise StyleError("body", f"{STYLE_FILE} must hold an object")
    sound = doc.pop("reference", None)
    style = Style.from_json({**doc, "reference": None})
    if not replace and _file(style.name).exists():
        raise FileExistsError(f"a style named {style.name!r} exists")
    if sound is not None:
        member = sound.get("file") if isinstance(sound, dict) else None
        if member not in names or not str(member).startswith("reference."):
            raise StyleError("reference", "the style file names a sound it does not hold")
        info = z.getinfo(member)
        if info.file_size > uploads.MAX_BYTES:
            raise StyleError("reference", f"the sound is larger than {uploads.MAX_BYTES} bytes")
        upload_id, part = uploads.new_part()
        with z.open(info) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out)
        try:
            kept = uploads.keep(upload_id, part, style.reference_name or member)
        except uploads.UploadError as exc:
            raise StyleError("reference", str(exc)) from None
        style.reference = {"upload": kept.id}
    return save(style, replace=True)
