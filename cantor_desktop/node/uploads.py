"""Audio the user hands the node to edit or to learn from: a source to cover, repaint or
extend, a reference sound, a song to "understand".

``POST /v1/uploads`` streams the body into ``state/uploads/<id>.part`` (the guard caps it at
:data:`MAX_BYTES`), then checks that it is audio this node can read — WAV, FLAC, MP3, AIFF or
OGG, decoding to the end — and at most :data:`MAX_SECONDS` long, before it is kept as
``<id>.<ext>`` with ``<id>.json`` beside it. Anything else is refused with the reason and
nothing is kept. Ids are 16 hex digits, like song ids: names, never paths.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..files import write_atomic
from ..errors import CantorError
from ..system.paths import paths

MAX_BYTES = 256 * 2**20  # ace-server's own limit on a request with audio
MAX_SECONDS = 600.0  # 10 minutes, the longest song
FORMATS = {"WAV": ".wav", "FLAC": ".flac", "MP3": ".mp3", "AIFF": ".aiff", "OGG": ".ogg"}
CONTENT_TYPES = ("audio/*", "application/octet-stream")
UPLOAD_ID = re.compile(r"[0-9a-f]{16}")
MAX_CHANNELS = 8
"""ACE-Step works in stereo; more than 7.1 is no song to edit (and a 1,024-channel file
would cost 1,024 floats a frame to decode)."""
DECODE_BYTES = 4 * 2**20
"""Each block decoded while an upload is checked holds at most this much float32 audio,
whatever the channel count: three uploads checked at once stay a few MB."""


class UploadError(CantorError, ValueError):
    """The upload is not audio this node keeps; the message says why."""


@dataclass
class Upload:
    id: str
    name: str  # the file name the user gave (for people only)
    format: str  # WAV, FLAC, MP3, AIFF, OGG
    duration: float
    sample_rate: int
    channels: int
    bytes: int
    created: float

    @property
    def path(self) -> Path:
        return folder() / f"{self.id}{FORMATS[self.format]}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def folder() -> Path:
    return paths().uploads_dir


def check_id(upload_id: Any) -> str:
    if not isinstance(upload_id, str) or not UPLOAD_ID.fullmatch(upload_id):
        raise UploadError(f"not an upload id: {str(upload_id)[:40]!r}")
    return upload_id


def new_part() -> tuple[str, Path]:
    """A fresh id and the .part file the body streams into."""
    folder().mkdir(parents=True, exist_ok=True)
    upload_id = secrets.token_hex(8)
    return upload_id, folder() / f"{upload_id}.part"


def examine(part: Path) -> dict[str, Any]:
    """Decode the whole file (a renamed program or a truncated file fails here); its
    format, length, rate and channels. UploadError with the reason otherwise."""
    import soundfile as sf

    if part.stat().st_size == 0:
        raise UploadError("the upload is empty")
    try:
        info = sf.info(str(part))
    except Exception:  # soundfile raises its own errors for what is not audio
        raise UploadError(
            "this is not audio Cantor can read (WAV, FLAC, MP3, AIFF or OGG)"
        ) from None
    fmt = info.format.upper()
    if fmt not in FORMATS:
        raise UploadError(
            f"{info.format_info or fmt} audio is not taken; use WAV, FLAC, MP3, AIFF or OGG"
        )
    if info.samplerate <= 0 or info.channels <= 0:
        raise UploadError("the audio has no sample rate or no channels")
    if info.channels > MAX_CHANNELS:
        raise UploadError(
            f"the audio has {info.channels} channels; at most {MAX_CHANNELS} are taken "
            f"(ACE-Step works in stereo)"
        )
    declared = info.frames / info.samplerate if info.frames > 0 else None
    if declared is not None and declared > MAX_SECONDS + 0.5:
        raise UploadError(
            f"the audio is {declared / 60:.1f} minutes long; at most "
            f"{MAX_SECONDS / 60:.0f} minutes are taken"
        )
    frames = 0
    block_frames = max(1, DECODE_BYTES // (4 * info.channels))
    try:
        with sf.SoundFile(str(part)) as f:
            while True:
                block = f.read(block_frames, dtype="float32", always_2d=True)
                if not len(block):
                    break
                frames += len(block)
                if frames / info.samplerate > MAX_SECONDS + 0.5:
                    raise UploadError(
                        f"the audio is longer than {MAX_SECONDS / 60:.0f} minutes, the most taken"
                    )
    except UploadError:
        raise
    except Exception as exc:
        raise UploadError(f"the audio cannot be decoded to its end: {exc}") from None
    if frames == 0:
        raise UploadError("the audio holds no sound")
    missing = _missing_bytes(part, fmt)
    if missing:
        raise UploadError(
            f"the file is cut short: its header announces {missing} more bytes "
            f"of audio than it holds"
        )
    if info.frames > 0 and fmt in ("WAV", "AIFF", "FLAC") and frames < info.frames:
        raise UploadError(f"the file is cut short: {frames} of its {info.frames} frames are there")
    return {
        "format": fmt,
        "duration": round(frames / info.samplerate, 3),
        "sample_rate": info.samplerate,
        "channels": info.channels,
    }


def _missing_bytes(path: Path, fmt: str) -> int:
    """How many bytes of audio a WAV's ``data`` or an AIFF's ``SSND`` chunk announces beyond
    the end of the file (libsndfile quietly reads what is there)."""
    import struct

    if fmt not in ("WAV", "AIFF"):
        return 0
    size = path.stat().st_size
    with open(path, "rb") as fh:
        big = fmt == "AIFF"
        want = b"SSND" if big else b"data"
        pos = 12
        while pos + 8 <= size:
            fh.seek(pos)
            cid, length = struct.unpack(">4sI" if big else "<4sI", fh.read(8))
            if cid == want:
                if length in (0, 0xFFFFFFFF):  # written while streaming: no length
                    return 0
                return max(0, pos + 8 + length - size)
            pos += 8 + length + (length & 1)
    return 0


def keep(upload_id: str, part: Path, name: str) -> Upload:
    """Examine the streamed file and keep it, or remove it and raise UploadError."""
    try:
        facts = examine(part)
        upload = Upload(
            id=upload_id,
            name=_display_name(name),
            bytes=part.stat().st_size,
            created=time.time(),
            **facts,
        )
        os.replace(part, upload.path)
        write_atomic(folder() / f"{upload_id}.json", json.dumps(upload.to_json()).encode())
        return upload
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def get(upload_id: str) -> Upload:
    check_id(upload_id)
    try:
        data = json.loads((folder() / f"{upload_id}.json").read_text("utf-8"))
        upload = Upload(**data)
    except (OSError, ValueError, TypeError):
        raise LookupError(f"no upload with id {upload_id!r}") from None
    if not upload.path.is_file():
        raise LookupError(f"the upload {upload_id} is gone")
    return upload


def remove(upload_id: str) -> bool:
    check_id(upload_id)
    found = False
    for ext in (*FORMATS.values(), ".json", ".part"):
        p = folder() / f"{upload_id}{ext}"
        if p.exists():
            p.unlink()
            found = True
    for latent in folder().glob(f"{upload_id}.*.f32"):  # what engines encoded of it
        latent.unlink(missing_ok=True)
    return found


def _display_name(name: str) -> str:
    last = (name or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return last[:200] or "upload"
