"""What an edit starts from: a take of a Cantor song or an uploaded file, as the engine wants
it — the latent the take's own render left (so the source is never encoded again), or audio
the engine decodes (WAV or MP3; FLAC, AIFF and OGG are converted here).

Latents of every take are kept in ``state/latents/<song>_take<n>.<engine>.f32`` when the
song is saved, and an upload's in ``state/uploads/<id>.<engine>.f32`` once an engine has
encoded it. A latent is an engine's own (the Sketch's says nothing to ACE-Step's VAE): it is
sent only to the kind of engine that made it, else the audio goes.
"""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import write_atomic
from ..engine.client import LATENT_FRAME_BYTES, EngineError, Part
from ..errors import CantorError
from ..system.paths import paths
from ..song.record import Song, SongState
from ..song.request import SongRequest
from . import take_files, uploads
from .song_files import MAX_SIDECAR_BYTES

if TYPE_CHECKING:
    from ..engine.client import EngineClient, Track

log = logging.getLogger(__name__)

LATENT_FPS = 25.0
ENGINE_DECODES = (".wav", ".mp3")


class SourceError(CantorError, LookupError):
    """A source or reference that cannot be used; ``field`` names the request's field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass
class Source:
    """One source (or reference) ready for the engine."""

    ref: dict[str, Any]  # as the request named it
    duration: float  # seconds
    audio_path: Path  # the audio on this machine
    latent: bytes | None  # the kept latent, when there is one
    name: str  # for people and the logs
    codes: str | None = None  # a take's own audio codes (songs with lyrics)
    facts: dict[str, Any] | None = None  # a take's bpm, key and time signature
    take_file: bool = False  # a take's audio (opened as take_files allows), not an upload

    def parts(self, audio_name: str, latent_name: str) -> dict[str, Part]:
        """The multipart parts for the engine: the latent when kept, else the audio."""
        if self.latent is not None:
            return {latent_name: Part(f"{latent_name}.f32", self.latent)}
        return {audio_name: engine_audio(self.audio_path, take_file=self.take_file)}


def latents_dir() -> Path:
    return paths().latents_dir


def take_latent_file(song_id: str, take: int, engine: str) -> Path:
    return latents_dir() / f"{song_id}_take{take}.{engine}.f32"


def upload_latent_file(upload_id: str, engine: str) -> Path:
    return uploads.folder() / f"{upload_id}.{engine}.f32"


def forget_latents(song_id: str) -> None:
    """A forgotten song is edited no more: its kept latents go."""
    for path in latents_dir().glob(f"{song_id}_take*.f32"):
        path.unlink(missing_ok=True)


def keep_latent(path: Path, latent: bytes | None) -> None:
    if latent and len(latent) % LATENT_FRAME_BYTES == 0:
        write_atomic(path, latent)


def keep_take_latents(song_id: str, tracks: list[Track], engine: str) -> None:
    """Each take's latent, kept for the edits of it (``engine``'s own)."""
    for n, track in enumerate(tracks, start=1):
        keep_latent(take_latent_file(song_id, n, engine), track.latent)


def _read_latent(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if data and len(data) % LATENT_FRAME_BYTES == 0 else None


def engine_audio(path: Path, *, take_file: bool = False) -> Part:
    """Audio the engine decodes: WAV and MP3 as they are, the rest converted to WAV. A
    take's file (``take_file``) is opened only as :func:`.take_files.open_take` allows."""
    with take_files.open_take(path) if take_file else open(path, "rb") as fh:
        if path.suffix.lower() in ENGINE_DECODES:
            return Part(
                path.name,
                fh.read(),
                "audio/mpeg" if path.suffix.lower() == ".mp3" else "audio/wav",
            )
        import soundfile as sf

        data, rate = sf.read(fh, dtype="float32", always_2d=True)
    out = io.BytesIO()
    sf.write(out, data, rate, format="WAV", subtype="PCM_24")
    return Part(path.with_suffix(".wav").name, out.getvalue(), "audio/wav")


def resolve(
    field: str, ref: dict[str, Any], songs: dict[str, Song], engine: str | None = None
) -> Source:
    """The source a request names, checked: the song is done and has that take, or the
    upload exists. SourceError naming ``field`` otherwise. With ``engine`` (the kind that
    will read it: "sketch", "acestep"), the latent that kind kept for it comes along."""
    if "song" in ref:
        song = songs.get(ref["song"])
        if song is None:
            raise SourceError(field, f"no song with id {ref['song']!r} on this node")
        if song.state != SongState.DONE:
            raise SourceError(
                field, f"song {song.id} is {song.state}: only a finished song can be a source"
            )
        take = song.take(int(ref.get("take") or 1))
        if take is None:
            raise SourceError(
                field, f"song {song.id} has {len(song.takes)} take(s), not take {ref.get('take')}"
            )
        try:
            audio = take_files.checked(take.audio)
        except take_files.OutsideSongs as exc:
            raise SourceError(field, f"song {song.id} take {take.n}: {exc}") from None
        if not audio.is_file():
            raise SourceError(field, f"the audio of song {song.id} take {take.n} is gone ({audio})")
        latent = _read_latent(take_latent_file(song.id, take.n, engine)) if engine else None
        duration = take.duration or (
            len(latent) / LATENT_FRAME_BYTES / LATENT_FPS if latent else 0.0
        )
        return Source(
            ref,
            float(duration),
            audio,
            latent,
            f"“{song.name[:40]}” take {take.n}",
            codes=_audio_codes(audio.with_suffix(".json")),
            facts={"bpm": take.bpm, "key": take.key, "time_signature": take.time_signature},
            take_file=True,
        )
    try:
        upload = uploads.get(ref["upload"])
    except (uploads.UploadError, LookupError) as exc:
        raise SourceError(field, str(exc)) from None
    latent = _read_latent(upload_latent_file(upload.id, engine)) if engine else None
    return Source(ref, upload.duration, upload.path, latent, f"upload “{upload.name}”")


def resolve_request(request: SongRequest, songs: dict[str, Song], engine: str) -> dict[str, Source]:
    """The request's source, reference and codes, checked again now (a file may have gone
    since the song was queued), by field."""
    found = {}
    for name in ("source", "reference", "codes_from"):
        ref = getattr(request, name)
        if ref:
            found[name] = resolve(name, ref, songs, engine)
    return found


async def engine_parts(
    client: EngineClient, found: dict[str, Source], wake: asyncio.Event, engine: str
) -> dict[str, Part] | None:
    """The multipart parts of an edit: the source's latent when kept (a Cantor take, or an
    upload encoded once before), else its audio; likewise the reference. An upload the
    engine has not encoded yet is encoded now, once: every later edit of it sends the
    latent."""
    parts: dict[str, Part] = {}
    for name, audio_name, latent_name in (
        ("source", "audio", "src_latents"),
        ("reference", "ref_audio", "ref_latents"),
    ):
        src = found.get(name)
        if src is None:
            continue
        if src.latent is None and "upload" in src.ref:
            audio = await asyncio.to_thread(engine_audio, src.audio_path)
            try:
                src.latent = await client.encode(audio, wake=wake)
                await asyncio.to_thread(
                    keep_latent, upload_latent_file(src.ref["upload"], engine), src.latent
                )
            except EngineError as exc:  # an engine without /vae: the audio, then
                log.info("%s could not be encoded once (%s); sending its audio", src.name, exc)
        parts.update(await asyncio.to_thread(src.parts, audio_name, latent_name))
    return parts or None


def _audio_codes(sidecar: Path) -> str | None:
    """A take's audio codes, as its sidecar kept them (songs made through the LM)."""
    import json

    try:
        with take_files.open_take(sidecar) as fh:
            data = json.loads(fh.read(MAX_SIDECAR_BYTES).decode("utf-8"))
    except (OSError, ValueError):  # take_files.OutsideSongs is a ValueError
        return None
    lm = data.get("lm_metadata") if isinstance(data, dict) else None
    codes = lm.get("audio_codes") if isinstance(lm, dict) else None
    return codes if isinstance(codes, str) and codes.strip() else None
