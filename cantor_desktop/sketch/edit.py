"""Edits, and the recipes that make every take of the Sketch again.

Every take the Sketch makes has a *recipe* (JSON, kept in its latent's header: latent.py),
and rendering it gives the take's audio again, sample for sample; an edit (repaint and
extend, cover, extract, lego, complete) is a recipe over its source's. What each task does:
docs/sketch.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import form, frame as frames, render, stems
from .frame import Frame
from .instruments import SR
from .render import HEADROOM, PARTS, Renderer, Song
from .request import is_instrumental

FADE = 0.05  # seconds: the cross-fade inside a region's edges
# words that make a layer's instrument play (added to the caption of a lego layer)
LAYER_WORDS = {
    "vocals": "wordless vocals",
    "backing_vocals": "choir",
    "drums": "drums",
    "bass": "bass guitar",
    "guitar": "acoustic guitar",
    "keyboard": "piano",
    "percussion": "epic taiko percussion",
    "strings": "strings",
    "synth": "synth lead",
    "fx": "rain",
    "brass": "brass",
    "woodwinds": "flute",
}
VOCAL_FILL = (
    "[Verse]\nooh ooh ooh ooh ooh ooh\nooh ooh ooh ooh ooh ooh\n"
    "[Chorus]\nah ah ah ah ah ah ah ah\nah ah ah ah ah ah ah ah"
)


class EditFailed(Exception):
    """The edit cannot be made; the reason was logged as the engine's error line."""


@dataclass
class Source:
    """A source (or reference) as the Sketch knows it."""

    recipe: dict
    frame: Frame
    samples: int
    via: str  # "latents" or "audio"


@dataclass
class Build:
    renderers: list[Renderer]
    finish: Callable[[], np.ndarray]


class Context:
    """What rendering a recipe needs from the engine: the audio it remembers, its log."""

    def __init__(self, memory, log: Callable[[str], None]):
        self.memory = memory
        self.log = log


# ---------------------------------------------------------------- helpers


def place(x: np.ndarray, at: int, n: int) -> np.ndarray:
    """``x`` at sample ``at`` of ``n`` samples of silence (cut where it does not fit)."""
    out = np.zeros((n, 2), dtype=np.float32)
    a, b = max(0, at), min(n, at + len(x))
    if b > a:
        out[a:b] = x[a - at : b - at]
    return out


def ramp(length: int, fade: int, fade_in: bool, fade_out: bool) -> np.ndarray:
    """1 over ``length`` samples, rising over the first ``fade`` and falling over the last
    (where asked), as a column for stereo."""
    w = np.ones(length, dtype=np.float32)
    f = min(fade, length // 2)
    if f > 0 and fade_in:
        w[:f] = np.linspace(0.0, 1.0, f, endpoint=False, dtype=np.float32)
    if f > 0 and fade_out:
        w[length - f :] = np.linspace(1.0, 0.0, f, endpoint=False, dtype=np.float32)
    return w[:, None]


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0


def loudness(x: np.ndarray) -> float:
    """RMS of the louder half of 100-ms blocks (a quiet tail does not pull it down)."""
    block = SR // 10
    n = len(x) // block
    if n == 0:
        return rms(x)
    energy = np.mean(np.square(x[: n * block].reshape(n, block, -1), dtype=np.float64), axis=(1, 2))
    loud = np.sort(energy)[n // 2 :]
    return float(np.sqrt(loud.mean())) if loud.size else 0.0


def lyrics_of(req: dict) -> str:
    return "" if is_instrumental(req.get("lyrics", "")) else req["lyrics"]


def caption_of(req: dict, ref: Source | None) -> str:
    caption = str(req.get("caption") or "").strip()
    if ref is not None and ref.frame.caption:
        caption = f"{caption}, {ref.frame.caption}" if caption else ref.frame.caption
    return caption


def wanted(parts) -> set[str] | None:
    return None if parts is None else set(parts) & set(PARTS)


# ---------------------------------------------------------------- what a recipe is


def length_of(recipe: dict) -> int:
    """The samples a recipe renders (cheap)."""
    kind = recipe["t"]
    if kind == "song":
        return int(round(float(recipe["song"]["duration"]) * SR))
    if kind in ("audio", "repaint", "cover"):
        return int(recipe["n"])
    return length_of(recipe["src"])


def level_of(recipe: dict) -> float | None:
    """The gain from the Sketch's render scale to this take's (None: not a Sketch take)."""
    kind = recipe["t"]
    if kind == "song":
        return recipe.get("gain")
    if kind == "audio":
        return None
    if kind in ("repaint", "extract"):
        return level_of(recipe["src"])
    if kind == "cover":
        level = (
            (recipe.get("gain") or 1.0)
            * (recipe.get("post") or 1.0)
            * (1.0 - recipe.get("noise", 0.0))
        )
        return level if level > 0 else None
    base = level_of(recipe["src"])
    return (base if base is not None else recipe.get("gain") or 1.0) * (recipe.get("post") or 1.0)


def frame_of(recipe: dict) -> Frame:
    """The musical frame of a take from its recipe (plans only, no audio)."""
    kind = recipe["t"]
    if kind == "song":
        song = Song.from_json(recipe["song"])
        return frames.of_song(song, render.plan(song))
    if kind == "audio":
        return frames.measure(None, recipe["facts"], samples=int(recipe["n"]))
    if kind == "repaint":
        f = frame_of(recipe["src"]).shifted(recipe["lpad"] / SR, recipe["n"] / SR)
        local = Song.from_json(recipe["song"])
        _overlay(f, local, recipe["at"])
        return f
    if kind == "cover":
        song = Song.from_json(recipe["song"])
        f = frames.of_song(song, render.plan(song)).shifted(recipe["at"] / SR, recipe["n"] / SR)
        return f
    return frame_of(recipe["src"])


def _overlay(f: Frame, local: Song, at: int) -> None:
    """Bars a local song played where its frame knew none (an extension's)."""
    first = round((at / SR - f.offset) / f.bar)
    plan = render.plan(local)
    for s in plan.sections:
        for b in range(s.start, s.end):
            f.kinds.setdefault(first + b, (s.kind, s.energy))
    for b, d in enumerate(plan.degrees):
        f.degrees.setdefault(first + b, d)


# ---------------------------------------------------------------- rendering a recipe


def build(recipe: dict, ctx: Context, steps: int, parts=None) -> Build:
    """The renderers a recipe needs (step them all) and the call that gives its audio."""
    return _BUILDERS[recipe["t"]](recipe, ctx, steps, wanted(parts))


def render_now(recipe: dict, ctx: Context, parts=None) -> np.ndarray:
    b = build(recipe, ctx, 1, parts)
    for r in b.renderers:
        r.step(0)
    return b.finish()


def _song(recipe, ctx, steps, parts) -> Build:
    song = Song.from_json(recipe["song"])
    r = Renderer(song, steps, parts=parts)

    def finish() -> np.ndarray:
        out = r.finish()
        if recipe.get("gain") is None:
            recipe["gain"] = render.master_gain(out, recipe.get("norm", True))
        out *= np.float32(recipe["gain"])
        r.buf = np.zeros((0, 2), dtype=np.float32)  # the render buffer is spent: let it go
        return out

    return Build([r], finish)


def _audio(recipe, ctx, steps, parts) -> Build:
    def finish() -> np.ndarray:
        audio = ctx.memory.get(recipe["fp"])
        n = int(recipe["n"])
        if audio is None:
            ctx.log(
                f"[Sketch] WARNING: the audio of latent {recipe['fp']} is no longer held "
                "by this engine: silence in its place"
            )
            return np.zeros((n, 2), dtype=np.float32)
        audio = place(audio, 0, n)
        if parts is None:
            return audio
        out = np.zeros_like(audio)
        for p in sorted(parts):
            out += stems.stand_in(audio, p)
        return out

    return Build([], finish)


def _region_weights(recipe) -> tuple[int, int, np.ndarray]:
    rs, re_ = int(recipe["rs"]), int(recipe["re"])
    edges = recipe.get("edges", [True, True])
    return rs, re_, ramp(re_ - rs, int(recipe["fade"]), bool(edges[0]), bool(edges[1]))


def _repaint(recipe, ctx, steps, parts) -> Build:
    src = build(recipe["src"], ctx, steps, parts)
    r = Renderer(Song.from_json(recipe["song"]), steps, parts=parts)

    def finish() -> np.ndarray:
        n, lpad = int(recipe["n"]), int(recipe["lpad"])
        out = place(src.finish(), lpad, n)
        new = place(r.finish(), int(recipe["at"]), n)
        r.buf = np.zeros((0, 2), dtype=np.float32)  # the render buffer is spent: let it go
        rs, re_, w = _region_weights(recipe)
        if recipe.get("gain") is None:
            src_len = length_of(recipe["src"])
            level = level_of(recipe["src"])
            if level is None:
                margin = 8 * SR
                near = out[max(lpad, rs - margin) : min(lpad + src_len, re_ + margin)]
                have = loudness(new[rs:re_])
                level = loudness(near) / have if have > 0 and loudness(near) > 0 else 1.0
            recipe["gain"] = _capped(out[rs:re_] * (1 - w), new[rs:re_] * w, level)
        out[rs:re_] = out[rs:re_] * (1 - w) + new[rs:re_] * (np.float32(recipe["gain"]) * w)
        return out

    return Build(src.renderers + [r], finish)


def _capped(kept: np.ndarray, new: np.ndarray, gain: float) -> float:
    """``gain`` for ``new``, lowered until ``kept + gain × new`` stays under -1 dBFS."""
    for _ in range(4):
        top = render.peak(kept + np.float32(gain) * new) if new.size else 0.0
        if top <= HEADROOM:
            break
        gain *= HEADROOM / top * 0.999
    return float(gain)


def _cover(recipe, ctx, steps, parts) -> Build:
    r = Renderer(Song.from_json(recipe["song"]), steps, parts=parts)
    noise = float(recipe.get("noise", 0.0))
    src = build(recipe["src"], ctx, steps, parts) if noise > 0 else None

    def finish() -> np.ndarray:
        n = int(recipe["n"])
        out = place(r.finish(), int(recipe["at"]), n)
        r.buf = np.zeros((0, 2), dtype=np.float32)  # the render buffer is spent: let it go
        if recipe.get("gain") is None:
            recipe["gain"] = render.master_gain(out, True)
        out *= np.float32(recipe["gain"])
        if src is not None:
            out = out * np.float32(1 - noise) + place(src.finish(), 0, n) * np.float32(noise)
        if recipe.get("post") is None:
            recipe["post"] = render.master_gain(out, recipe.get("norm", True))
        out *= np.float32(recipe["post"])
        return out

    return Build([r] + (src.renderers if src else []), finish)


def _extract(recipe, ctx, steps, parts) -> Build:
    track = recipe["track"]
    n = length_of(recipe)
    if not track:  # "the track": everything there is
        return build(recipe["src"], ctx, steps, parts)
    take = {track} if parts is None else ({track} & parts)
    if track not in PARTS or not take:
        return Build([], lambda: np.zeros((n, 2), dtype=np.float32))
    return build(recipe["src"], ctx, steps, take)


def _layered(recipe, ctx, steps, parts, layer_parts: set[str], target: float) -> Build:
    src = build(recipe["src"], ctx, steps, parts)
    take = layer_parts if parts is None else (layer_parts & parts)
    r = Renderer(Song.from_json(recipe["song"]), steps, parts=take) if take else None

    def finish() -> np.ndarray:
        out = src.finish()
        if r is not None:
            n = len(out)
            layer = place(r.finish(), int(recipe["at"]), n)
            r.buf = np.zeros((0, 2), dtype=np.float32)  # the render buffer is spent: let it go
            rs, re_, w = _region_weights(recipe) if "rs" in recipe else (0, n, None)
            if w is not None:
                layer[:rs] = 0.0
                layer[re_:] = 0.0
                layer[rs:re_] *= w
            if recipe.get("gain") is None:
                level = level_of(recipe["src"])
                if level is None:
                    have, near = loudness(layer[rs:re_]), loudness(out[rs:re_])
                    level = target * near / have if have > 0 and near > 0 else 1.0
                recipe["gain"] = float(level)
            out = out + layer * np.float32(recipe["gain"])
        if recipe.get("post") is None:
            top = render.peak(out)
            recipe["post"] = HEADROOM / top if top > HEADROOM else 1.0
        out *= np.float32(recipe["post"])
        return out

    return Build(src.renderers + ([r] if r else []), finish)


def _lego(recipe, ctx, steps, parts) -> Build:
    return _layered(recipe, ctx, steps, parts, {recipe["track"]} & set(PARTS), 0.5)


def _complete(recipe, ctx, steps, parts) -> Build:
    return _layered(recipe, ctx, steps, parts, set(PARTS) - set(recipe["tracks"]), 1.0)


_BUILDERS = {
    "song": _song,
    "audio": _audio,
    "repaint": _repaint,
    "cover": _cover,
    "extract": _extract,
    "lego": _lego,
    "complete": _complete,
}


# ---------------------------------------------------------------- making an edit


def text2music(song: Song, fmt: str) -> dict:
    return {"t": "song", "song": song.to_json(), "gain": None, "norm": fmt != "wav32"}


def audio_recipe(fp: str, samples: int, facts: dict) -> dict:
    return {"t": "audio", "fp": fp, "n": int(samples), "facts": facts}


def _local_song(
    f: Frame,
    first: int,
    count: int,
    *,
    seed: int,
    caption: str,
    lyrics: str,
    fill: list[tuple[str, float]] | None = None,
    duration: float | None = None,
    fade_in: bool = False,
    fade_out: bool = False,
    keep_chords: bool = True,
    plan_seed: int | None = None,
    melody_seed: int | None = None,
) -> Song:
    """A song on ``f``'s grid from bar ``first`` for ``count`` bars."""
    return Song(
        bpm=f.bpm,
        beats_per_bar=f.beats,
        tonic=f.tonic,
        minor=f.minor,
        duration=duration if duration is not None else count * f.bar,
        seed=seed,
        lyrics=lyrics,
        caption=caption,
        plan_seed=plan_seed,
        melody_seed=melody_seed,
        sections=f.sections_for(first, count, fill),
        degrees=f.degrees_for(first, count) if keep_chords else None,
        fade_in=fade_in,
        fade_out=fade_out,
    )


def repaint(req: dict, seed: int, src: Source, ref: Source | None, log) -> dict:
    """A repaint (or an extension: a region before 0 or past the end) of ``src``."""
    d = src.samples / SR
    a, b = float(req["repainting_start"]), float(req["repainting_end"])
    end = d if b < 0 else b
    lpad, rpad = max(0.0, -a), max(0.0, end - d)
    if src.via == "latents":  # latents are padded by whole frames
        lpad_n = int(lpad * 25 + 0.5) * 1920
        rpad_n = int(rpad * 25 + 0.5) * 1920
    else:
        lpad_n, rpad_n = int(lpad * SR), int(rpad * SR)
    n = lpad_n + src.samples + rpad_n
    if lpad > 0 or rpad > 0:
        if src.via == "latents":
            log(
                f"[Outpaint] latent pad left={lpad:.1f}s ({lpad_n // 1920}) right={rpad:.1f}s "
                f"({rpad_n // 1920}) total={n / SR:.1f}s"
            )
        else:
            log(f"[Outpaint] audio pad left={lpad:.1f}s right={rpad:.1f}s total={n / SR:.1f}s")
    lp = lpad_n / SR
    rs_t = max(0.0, a)
    re_t = (lp if a < 0 else d + lp) if b < 0 else b + lp
    if re_t <= rs_t:
        log(f"[Region] ERROR: end ({re_t:.1f}) <= start ({rs_t:.1f})")
        raise EditFailed
    log(f"[Region] {rs_t:.1f}s..{re_t:.1f}s (canvas={n / SR:.1f}s)")
    rs, re_ = min(n, int(round(rs_t * SR))), min(n, int(round(re_t * SR)))
    if re_ <= rs:
        log(f"[Region] ERROR: end ({re_t:.1f}) <= start ({rs_t:.1f})")
        raise EditFailed
    f = src.frame.shifted(lp, n / SR)
    first = f.bar_at(rs / SR)
    last = f.bar_at(max(rs, re_ - 1) / SR)
    to_end = re_ >= n
    count = last - first + 1 + (0 if to_end else 1)  # a bar's margin after
    at = int(round(f.bar_start(first) * SR))
    src_end = (lpad_n + src.samples) / SR
    after = [k for k in range(first, first + count) if f.bar_start(k) >= src_end - 1e-6]
    before = [k for k in range(first, first + count) if f.bar_start(k + 1) <= lp + 1e-6]
    cont = form.continuation(len(after), seed)
    lead = form.lead_in(len(before))
    fill = []
    for k in range(first, first + count):
        if k in after:
            fill.append(cont[after.index(k)])
        elif k in before:
            fill.append(lead[before.index(k)])
        else:
            fill.append(("verse", form.ENERGY["verse"]))
    duration = (n - at) / SR if to_end else None
    song = _local_song(
        f,
        first,
        count,
        seed=seed,
        caption=caption_of(req, ref),
        lyrics=lyrics_of(req),
        fill=fill,
        duration=duration,
        fade_in=at <= 0 and rs == 0,
        fade_out=to_end,
    )
    fade = int(FADE * SR)
    return {
        "t": "repaint",
        "src": src.recipe,
        "lpad": lpad_n,
        "n": n,
        "rs": rs,
        "re": re_,
        "fade": fade,
        "edges": [0 < rs, re_ < n],
        "song": song.to_json(),
        "at": at,
        "gain": None,
    }


def cover(
    req: dict,
    seed: int,
    src: Source,
    ref: Source | None,
    log,
    *,
    steps: int,
    faithful: bool,
    fmt: str,
) -> dict:
    f = src.frame
    strength = min(1.0, max(0.0, float(req["audio_cover_strength"])))
    noise = min(1.0, max(0.0, float(req["cover_noise_strength"])))
    if strength < 1.0:
        log(
            f"[Context-Silence] audio_cover_strength={strength:.2f} -> switch at step "
            f"{int(steps * strength)}/{steps}"
        )
    if noise > 0:
        log(
            f"[Init-Noise] cover_noise_strength={noise:.2f} -> noise_level={1 - noise:.4f}, "
            f"nearest_t={1 - noise:.4f}, remaining_steps={max(1, round(steps * (1 - noise)))}"
        )
    lyrics = lyrics_of(req) or f.lyrics
    keep_melody = faithful or strength >= 0.75
    song, at = _over_all_of(
        src,
        seed=seed,
        caption=caption_of(req, ref),
        lyrics=lyrics,
        keep_chords=faithful or strength >= 0.5,
        plan_seed=f.plan_seed if faithful else None,
        melody_seed=(f.melody_seed if f.melody_seed is not None else f.plan_seed)
        if keep_melody
        else None,
    )
    recipe = {
        "t": "cover",
        "song": song.to_json(),
        "at": at,
        "n": src.samples,
        "gain": None,
        "noise": noise,
        "post": None,
        "norm": fmt != "wav32",
    }
    if noise > 0:
        recipe["src"] = src.recipe
    return recipe


def extract(req: dict, src: Source, log) -> dict:
    track = str(req.get("track") or "").strip()
    log("[Synth-Run] task=extract")
    if track and track not in PARTS:
        log(f"[Extract] WARNING: '{track}' is not a standard track name")
    return {"t": "extract", "src": src.recipe, "track": track}


def _over_all_of(src: Source, **song: Any) -> tuple[Song, int]:
    """A song over all of ``src``, faded in and out, and its start in samples: from the bar
    that holds the first sample (it may start before it: a pickup) to the end. ``song``:
    the rest of :func:`_local_song`'s arguments."""
    f = src.frame
    first = f.bar_at(0.0)
    at = int(round(f.bar_start(first) * SR))
    bars = max(1, math.ceil((src.samples - at) / SR / f.bar - 1e-9))
    duration = (src.samples - at) / SR
    return _local_song(f, first, bars, duration=duration, fade_in=True, fade_out=True, **song), at


def _region(req: dict, n: int) -> dict:
    a, b = float(req["repainting_start"]), float(req["repainting_end"])
    if b > a:
        rs, re_ = max(0, int(round(a * SR))), min(n, int(round(b * SR)))
        if re_ > rs:
            return {"rs": rs, "re": re_, "fade": int(FADE * SR), "edges": [rs > 0, re_ < n]}
    return {}


def lego(req: dict, seed: int, src: Source, ref: Source | None, log) -> dict:
    track = str(req.get("track") or "").strip()
    log("[Synth-Run] task=lego")
    if track not in PARTS:
        log(f"[Lego] WARNING: '{track}' is not a standard track name")
    words = LAYER_WORDS.get(track, "")
    caption = caption_of(req, ref) or src.frame.caption  # the source's genre by default
    if track == "guitar" and ("electric" in caption.lower() or "rock" in caption.lower()):
        words = "electric guitar"
    caption = f"{words}, {caption}" if caption else words  # named first: it always plays
    lyrics = lyrics_of(req) or (VOCAL_FILL if track == "vocals" else "")
    song, at = _over_all_of(src, seed=seed, caption=caption, lyrics=lyrics)
    recipe = {
        "t": "lego",
        "src": src.recipe,
        "track": track,
        "song": song.to_json(),
        "at": at,
        "gain": None,
        "post": None,
        **_region(req, src.samples),
    }
    if track in PARTS and track not in render.plan(song).parts:
        log(f"[Sketch] WARNING: lego: no {track} part plays in this caption's style")
    return recipe


def complete(req: dict, seed: int, src: Source, ref: Source | None, log) -> dict:
    tracks = [t.strip() for t in str(req.get("track") or "").split("|") if t.strip()]
    log("[Synth-Run] task=complete")
    for t in tracks:
        if t not in PARTS:
            log(f"[Complete] WARNING: '{t}' is not a standard track name")
    song, at = _over_all_of(src, seed=seed, caption=caption_of(req, ref), lyrics=lyrics_of(req))
    return {
        "t": "complete",
        "src": src.recipe,
        "tracks": tracks,
        "song": song.to_json(),
        "at": at,
        "gain": None,
        "post": None,
    }


__all__ = [
    "Build",
    "Context",
    "EditFailed",
    "Source",
    "build",
    "cover",
    "complete",
    "extract",
    "frame_of",
    "length_of",
    "lego",
    "level_of",
    "render_now",
    "repaint",
    "text2music",
]
