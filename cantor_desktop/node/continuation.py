"""An extend that sings new lyrics: what is added after a song sings the lines it was given.

The engine's own extend is outpainting, a repaint past the song's end: the DiT fills the new
seconds from the song around them, the LM does not run and the lyrics barely steer it, so
the new part continues the music and sings nothing new (see ``docs/upstream.md``). A
continuation with lyrics is made in three of the engine's own jobs instead, the first two
the way a new song is made:

1. ``/lm`` writes audio codes for the new lyrics in the song's tempo, key, metre and
   language, for ``after`` seconds;
2. ``/synth`` renders those codes with the song's last ``context`` seconds as its timbre
   reference (``ref_audio``), so the voice and the instruments are the song's;
3. ``/synth`` repaints :data:`SEAM_S` seconds each side of the join on the song followed by
   the new part: the join is made in one piece, everything else kept as it was.

Takes: the render makes one new part per take; each is joined on its own, with its seed.
"""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.client import Part, Track
from ..errors import CantorError
from ..song.request import CONTEXT_DEFAULT
from .sources import Source, engine_audio

if TYPE_CHECKING:
    from ..engine.client import EngineClient

RATE = 48000  # the engine's rate: it renders, and decodes every upload, at 48 kHz stereo
SEAM_S = 2.0  # seconds each side of the join that the last job makes again
_RENDER_FORMAT = "wav24"  # the new part as the node reads it back: levelled as a song is
LM_SHARE, RENDER_SHARE = 0.1, 0.55  # the song's progress when the LM and the render are done
_NOT_FOR_NEW_PART = ("task_type", "repainting_start", "repainting_end", "audio_codes")


class ContinuationError(CantorError):
    """The song to extend cannot be read: the song fails with this, in these words."""


def wanted(request_extend: Mapping[str, Any] | None) -> bool:
    """Whether an extend's request asks for new lyrics to be sung."""
    return bool(request_extend and request_extend.get("lyrics"))


def lm_request(
    body: Mapping[str, Any],
    lyrics: str,
    after: float,
    seed: int,
    facts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The LM's request for the new part: the song's fields (caption, tempo, key, metre,
    language, models) with the new lyrics, as a new song of ``after`` seconds. Tempo, key
    and metre the request left open are the take's own (``facts``), so the new part is in
    the song's time and key, not in the LM's choice."""
    out = {k: v for k, v in body.items() if k not in _NOT_FOR_NEW_PART}
    out.update(lyrics=lyrics, duration=float(after), seed=seed, lm_seed=seed)
    facts = facts or {}
    for name, fact in (("bpm", "bpm"), ("keyscale", "key"), ("timesignature", "time_signature")):
        if out.get(name) in (None, "") and facts.get(fact) not in (None, ""):
            value = facts[fact]
            out[name] = round(float(value)) if name == "bpm" else str(value)
    return out


def render_request(enriched: Mapping[str, Any], takes: int) -> dict[str, Any]:
    """The new part's render: the LM's request as it came, ``takes`` of them."""
    return {**enriched, "synth_batch_size": takes, "output_format": _RENDER_FORMAT}


def join_request(body: Mapping[str, Any], lyrics: str, join_s: float, end_s: float, seed: int):
    """The repaint that joins: :data:`SEAM_S` each side of ``join_s`` (clamped to the
    canvas of ``end_s`` seconds), with the new lyrics, one take."""
    out = {k: v for k, v in body.items() if k not in _NOT_FOR_NEW_PART}
    out.update(
        task_type="repaint",
        lyrics=lyrics,
        repainting_start=max(0.0, join_s - SEAM_S),
        repainting_end=min(end_s, join_s + SEAM_S),
        seed=seed,
        synth_batch_size=1,
    )
    out.pop("duration", None)
    out.pop("lm_seed", None)
    return out


def read_audio(data: bytes) -> np.ndarray:
    """48 kHz stereo float32 ``(n, 2)`` of a WAV, MP3 or FLAC file's bytes."""
    import soundfile as sf

    audio, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    if audio.shape[1] == 1:
        audio = np.repeat(audio, 2, axis=1)
    audio = audio[:, :2]
    if rate != RATE:
        import soxr

        audio = soxr.resample(np.ascontiguousarray(audio), rate, RATE, quality="HQ")
    return np.ascontiguousarray(audio, dtype=np.float32)


def wav_part(audio: np.ndarray, name: str) -> Part:
    """Audio as a 24-bit WAV part (what the engine decodes), clipped to full scale."""
    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, np.clip(audio, -1.0, 1.0), RATE, format="WAV", subtype="PCM_24")
    return Part(f"{name}.wav", out.getvalue(), "audio/wav")


def song_audio(source: Source) -> np.ndarray:
    """The song being extended, as samples (a take's file opened as take_files allows)."""
    try:
        return read_audio(engine_audio(source.audio_path, take_file=source.take_file).data)
    except (OSError, ValueError, RuntimeError) as exc:  # soundfile's LibsndfileError too
        raise ContinuationError(f"{source.name} could not be read to extend it: {exc}") from exc


async def sing(
    client: EngineClient,
    body: Mapping[str, Any],
    source: Source,
    extend: Mapping[str, Any],
    *,
    on_stage: Callable[[str], None] | None = None,
    on_span: Callable[[float, float], None] | None = None,
    wake: asyncio.Event | None = None,
    sent: dict[str, Any] | None = None,
) -> list[Track]:
    """The extended song's takes, made by the three jobs above. ``body`` is the extend's
    engine request (its fields and models), ``extend`` the song request's; ``sent`` is
    filled with each job's request as it went (the audio codes counted, not copied);
    ``on_span(lo, hi)`` is told which share of the song's progress each job fills."""
    sent = {} if sent is None else sent
    span = on_span or (lambda lo, hi: None)
    lyrics, after = str(extend["lyrics"]), float(extend["after"])
    context = float(extend.get("context") or CONTEXT_DEFAULT)
    takes = max(1, int(body.get("synth_batch_size", 1)))
    seed = int(body.get("seed", -1))
    if seed < 0:  # one seed for every job of a take, so the take can be made again
        seed = random.randrange(2**31 - takes)
    song = await asyncio.to_thread(song_audio, source)
    heard = song[-int(context * RATE) :]
    if on_stage:
        on_stage("lm")
    span(0.0, LM_SHARE)
    sent["lm"] = {**lm_request(body, lyrics, after, seed, source.facts), "lm_mode": "generate"}
    enriched = await client.lm(sent["lm"], wake=wake)
    if not enriched or not str(enriched[0].get("audio_codes") or "").strip():
        raise ContinuationError("the engine's LM wrote no audio codes for the new lines")
    if on_stage:
        on_stage("synth")
    reference = await asyncio.to_thread(wav_part, heard, "context")
    render = render_request(enriched[0], takes)
    sent["render"] = {k: v for k, v in render.items() if k != "audio_codes"}
    sent["render"]["audio_codes_count"] = len(str(render["audio_codes"]).split(","))
    sent["render"]["ref_audio_s"] = round(len(heard) / RATE, 3)
    span(LM_SHARE, RENDER_SHARE)
    new_parts = await client.synth(render, wake=wake, parts={"ref_audio": reference})
    sent["joins"] = []
    tracks: list[Track] = []
    each = (1.0 - RENDER_SHARE) / max(1, len(new_parts))
    for n, new_part in enumerate(new_parts):
        span(RENDER_SHARE + n * each, RENDER_SHARE + (n + 1) * each)
        # the LM may write a little more than asked: the new part is what was asked for
        added = (await asyncio.to_thread(read_audio, new_part.audio))[: int(after * RATE)]
        canvas = await asyncio.to_thread(
            wav_part, np.concatenate([song, added]), f"extended{n + 1}"
        )
        join = join_request(
            body, lyrics, len(song) / RATE, (len(song) + len(added)) / RATE, seed + n
        )
        sent["joins"].append(join)
        tracks += await client.synth(join, wake=wake, parts={"audio": canvas})
    return tracks
