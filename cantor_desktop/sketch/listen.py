"""What the Sketch hears in a source: ace-server's ``/understand``.

Tempo and key are measured from the audio with cantor_desktop/song/analysis.py: a Sketch take is
rendered again from its recipe and measured; outside audio was measured when it came in
(its latent's header keeps what was found). The time signature is the plan's for a Sketch
take and 4 for other audio (never measured); the duration is the audio's. The caption
describes what plays — for a Sketch take the genre, instruments, voice, mood and pace of
its style; for other audio its pace, brightness and weight — in the words of a caption.
Lyrics are left empty (the Sketch cannot hear words). A Sketch song's audio codes are its
plan's (codes.py), so "same song, new render" works from an understood take too.
"""

from __future__ import annotations

import numpy as np

from . import codes, edit, render
from .instruments import SR
from .request import DEFAULTS, sparse
from .style import style_for
from .words import GENRE_CAPTION, INSTRUMENT_NAMES


def song_leaf(recipe: dict):
    """The Song whose sounds a take has (the cover's, else its source's), or None."""
    kind = recipe["t"]
    if kind in ("song", "cover"):
        return render.Song.from_json(recipe["song"])
    if kind == "audio":
        return None
    return song_leaf(recipe["src"])


def pace(bpm: float | None) -> str:
    if not bpm:
        return "free-time"
    return "slow" if bpm < 80 else "mid-tempo" if bpm < 110 else "upbeat" if bpm < 135 else "fast"


def describe(recipe: dict, bpm: float | None, minor: bool, audio: np.ndarray | None) -> str:
    song = song_leaf(recipe)
    mood = "moody" if minor else "bright"
    if song is not None:
        style = style_for(song.caption, song.arrangement_seed)
        words = [GENRE_CAPTION.get(style.genre, style.genre)]
        words += [INSTRUMENT_NAMES[i] for i in style.instruments if i in INSTRUMENT_NAMES]
        if style.drums != "none":
            words.append("drums")
        if style.bass != "none":
            words.append({"808": "808 bass", "upright": "upright bass"}.get(style.bass, "bass"))
        words += list(style.textures)
        words.append("wordless vocals" if song.lyrics else "instrumental")
        return ", ".join(words + [mood, pace(bpm)])
    words = [pace(bpm), mood]
    if audio is not None and len(audio):
        mono = audio.mean(axis=1) if audio.ndim == 2 else audio
        spec = np.abs(np.fft.rfft(mono[: SR * 60] * 1.0)) ** 2
        freqs = np.fft.rfftfreq(min(len(mono), SR * 60), 1 / SR)
        total = spec.sum()
        if total > 0:
            centroid = float((spec * freqs).sum() / total)
            words.append("bright-sounding" if centroid > 2500 else "warm")
            if spec[freqs < 150].sum() / total > 0.4:
                words.append("bass-heavy")
    return ", ".join(words + ["instrumental track"])


def understand(source: edit.Source, req: dict, ctx: edit.Context) -> dict:
    """The request the Sketch hears in ``source`` (engine field names, sparse like ace-server
    writes it)."""
    from ..song import analysis

    recipe = source.recipe
    audio = None
    if recipe["t"] == "audio":
        facts = recipe.get("facts") or {}
        bpm, key = facts.get("bpm"), facts.get("key")
        audio = ctx.memory.get(recipe["fp"])
        ts = str(facts.get("ts") or 4)
    else:
        audio = edit.render_now(recipe, ctx)
        x = analysis.prepare(audio, SR)
        bpm = analysis.estimate_tempo(x, analysis.RATE, prepared=True)
        key = analysis.estimate_key(x, analysis.RATE, prepared=True, bpm=bpm or 0.0)
        ts = str(source.frame.beats)
    minor = bool(key and key.endswith("minor"))
    heard = dict(DEFAULTS)
    heard.update(
        caption=describe(recipe, bpm, minor, audio),
        lyrics="",
        duration=round(source.samples / SR, 2),
        timesignature=ts,
        seed=req.get("seed", -1),
    )
    if bpm:
        heard["bpm"] = int(round(bpm))
    if key:
        heard["keyscale"] = key
    song = song_leaf(recipe) if recipe["t"] == "song" else None
    if song is not None:
        heard["audio_codes"] = codes.encode(song, render.plan(song))
    return sparse(heard)


def result_lines(heard: dict) -> list[str]:
    """The ``[Understand-Result]`` lines ace-server prints."""
    lines = []
    if heard.get("bpm"):
        lines.append(f"[Understand-Result] bpm: {heard['bpm']}")
    if heard.get("duration"):
        lines.append(f"[Understand-Result] duration: {heard['duration']:.0f}s")
    if heard.get("keyscale"):
        lines.append(f"[Understand-Result] keyscale: {heard['keyscale']}")
    if heard.get("timesignature"):
        lines.append(f"[Understand-Result] timesig: {heard['timesignature']}")
    caption = heard.get("caption", "")
    lines.append(f"[Understand-Result] caption: {caption[:80]}{'...' if len(caption) > 80 else ''}")
    lines.append(f"[Understand-Result] lyrics: {len(heard.get('lyrics', ''))} chars")
    lines.append(
        f"[Understand-Result] audio_codes: "
        f"{codes.tokens(heard.get('audio_codes', '')).__len__()} codes"
    )
    return lines
