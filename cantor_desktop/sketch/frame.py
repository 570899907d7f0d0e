"""A source's musical frame: tempo, metre, key, its bar grid, and what each bar is.

Edits need it to fit new music to old: a repaint plays the source's sections and chords in
its region, an extension continues its tempo and key on its bar grid, a cover keeps its
tempo, key and sections, a layer and a completion play in its key on its grid.

For a Sketch song the frame is read from its plan (exact). For other audio it is measured
(cantor_desktop/song/analysis.py for tempo and key; the first beat from the onset envelope's
phase at that tempo; sections from each four bars' loudness, quiet to loud: intro or
outro at the ends, bridge, verse, chorus); the metre of outside audio is taken as 4.
"""

from __future__ import annotations

import math
from typing import Any
from dataclasses import dataclass, field, replace

import numpy as np

from . import form, music
from .instruments import SR


@dataclass
class Frame:
    bpm: float
    beats: int  # beats per bar
    tonic: int
    minor: bool
    duration: float  # seconds
    offset: float = 0.0  # a downbeat: bar k starts at offset + k × bar
    kinds: dict[int, tuple[str, float]] = field(default_factory=dict)  # bar → kind, energy
    degrees: dict[int, int] = field(default_factory=dict)  # bar → chord degree
    caption: str = ""  # the words its sounds came from (Sketch songs)
    lyrics: str = ""
    plan_seed: int | None = None  # its arrangement's seed (Sketch songs)
    melody_seed: int | None = None
    measured: bool = False

    @property
    def bar(self) -> float:
        return 60.0 / self.bpm * self.beats

    @property
    def key(self) -> str:
        return music.key_name(self.tonic, self.minor)

    def bar_at(self, t: float) -> int:
        """The bar that holds time ``t`` (s)."""
        return math.floor((t - self.offset) / self.bar + 1e-9)

    def bar_start(self, k: int) -> float:
        return self.offset + k * self.bar

    def shifted(self, seconds: float, duration: float) -> "Frame":
        """The same music moved ``seconds`` later in a take ``duration`` long (padding
        before it): bars renumbered so the offset stays within the first bar."""
        start = self.offset + seconds
        moved = math.floor(start / self.bar)
        return replace(
            self,
            duration=duration,
            offset=start - moved * self.bar,
            kinds={k + moved: v for k, v in self.kinds.items()},
            degrees={k + moved: v for k, v in self.degrees.items()},
        )

    def sections_for(
        self, first: int, count: int, fill: list[tuple[str, float]] | None = None
    ) -> tuple[form.Section, ...]:
        """Sections for bars ``first … first+count-1`` renumbered from 0: the known kinds,
        and ``fill`` (one per bar, default a verse) where a bar is unknown."""
        kinds = []
        for i in range(count):
            known = self.kinds.get(first + i)
            if known is None:
                known = (
                    fill[i]
                    if fill is not None and i < len(fill)
                    else ("verse", form.ENERGY["verse"])
                )
            kinds.append(known)
        return tuple(form.from_kinds(kinds))

    def degrees_for(self, first: int, count: int) -> tuple:
        return tuple(self.degrees.get(first + i) for i in range(count))


def of_song(song, plan) -> Frame:
    """The frame of a Sketch song from its plan."""
    kinds, degrees = {}, {}
    for s in plan.sections:
        for b in range(s.start, s.end):
            kinds[b] = (s.kind, s.energy)
    for b, d in enumerate(plan.degrees):
        degrees[b] = d
    return Frame(
        bpm=float(song.bpm),
        beats=song.beats_per_bar,
        tonic=song.tonic,
        minor=song.minor,
        duration=song.duration,
        offset=0.0,
        kinds=kinds,
        degrees=degrees,
        caption=song.caption,
        lyrics=song.lyrics,
        plan_seed=song.arrangement_seed,
        melody_seed=song.melody_seed,
    )


# ---------------------------------------------------------------- measured


def measure(
    audio: np.ndarray | None, facts: dict | None = None, samples: int | None = None
) -> Frame:
    """The frame of outside audio (48 kHz): ``facts`` (:func:`measure_facts`) when already
    measured, else measured here (``audio`` is needed then)."""
    facts = dict(facts or {})

    def heard() -> np.ndarray:
        if audio is None:
            raise ValueError("measure(): the facts given do not say it all, and no audio")
        return audio

    duration = (len(heard()) if samples is None else samples) / SR
    if "offset" not in facts:
        facts.update(measure_facts(heard()))
    bpm = float(facts.get("bpm") or 120.0)
    key = music.parse_key(facts.get("key") or "") or (0, False)
    frame = Frame(
        bpm=bpm,
        beats=int(facts.get("ts") or 4),
        tonic=key[0],
        minor=key[1],
        duration=duration,
        offset=float(facts.get("offset") or 0.0),
        measured=True,
    )
    groups = facts.get("groups")
    frame.kinds = (
        kinds_of_groups(groups, frame) if groups is not None else loudness_sections(heard(), frame)
    )
    return frame


def measure_facts(audio: np.ndarray) -> dict:
    """Tempo, key (analysis.py), the first beat and the loudness sections (one kind per four
    bars) of outside audio, as JSON values (kept in its latent's header)."""
    from ..song import analysis

    x = analysis.prepare(audio, SR)
    bpm = analysis.estimate_tempo(x, analysis.RATE, prepared=True)
    key = analysis.estimate_key(x, analysis.RATE, prepared=True, bpm=bpm or 0.0)
    offset = beat_phase(x, bpm) if bpm else 0.0
    facts: dict[str, Any] = {
        "bpm": round(bpm, 3) if bpm else None,
        "key": key,
        "ts": 4,
        "offset": round(offset, 4),
    }
    key_t = music.parse_key(key or "") or (0, False)
    frame = Frame(
        bpm=bpm or 120.0,
        beats=4,
        tonic=key_t[0],
        minor=key_t[1],
        duration=len(audio) / SR,
        offset=offset,
    )
    kinds = loudness_sections(audio, frame)
    facts["groups"] = [kinds[b][0] for b in sorted(kinds)][::4]
    return facts


def kinds_of_groups(groups: list[str], frame: Frame) -> dict[int, tuple[str, float]]:
    kinds = {}
    for g, kind in enumerate(groups):
        kind = kind if kind in form.ENERGY else "verse"
        for b in range(g * 4, g * 4 + 4):
            kinds[b] = (kind, form.ENERGY[kind])
    return kinds


def beat_phase(x: np.ndarray, bpm: float) -> float:
    """Seconds from the start to the first beat of 12 kHz mono audio at ``bpm``: the phase
    whose beats gather the most onset strength."""
    from ..song import analysis

    env = analysis.onset_envelope(x)
    if not len(env) or not np.any(env):
        return 0.0
    period = analysis.FPS * 60.0 / bpm
    beats = np.arange(0.0, len(env) - 1, period)
    best, best_score = 0.0, -1.0
    for phase in np.arange(0.0, period, 1.0):
        idx = (beats + phase).astype(int)
        idx = idx[idx < len(env)]
        score = float(env[idx].sum())
        if score > best_score:
            best, best_score = phase, score
    return best / analysis.FPS


def loudness_sections(audio: np.ndarray, frame: Frame) -> dict[int, tuple[str, float]]:
    """Bar → (kind, energy) from the loudness of each four bars: the loudest third
    choruses, the middle verses, the quietest bridges (intro and outro at the ends)."""
    bars = max(1, math.ceil((frame.duration - frame.offset) / frame.bar - 1e-9))
    groups = []
    for g in range(0, bars, 4):
        a = int(frame.bar_start(g) * SR)
        b = int(frame.bar_start(min(bars, g + 4)) * SR)
        seg = audio[max(0, a) : max(0, b)]
        rms = float(np.sqrt(np.mean(seg.astype(np.float64) ** 2))) if len(seg) else 0.0
        groups.append(20 * math.log10(max(rms, 1e-6)))
    order = sorted(range(len(groups)), key=lambda i: groups[i])
    rank = {g: r / max(1, len(groups) - 1) for r, g in enumerate(order)}
    kinds: dict[int, tuple[str, float]] = {}
    for g in range(len(groups)):
        r = rank[g] if len(groups) > 1 else 0.5
        if r >= 2 / 3:
            kind = "chorus"
        elif r >= 1 / 3:
            kind = "verse"
        elif g == 0:
            kind = "intro"
        elif g == len(groups) - 1:
            kind = "outro"
        else:
            kind = "bridge"
        for b in range(g * 4, min(bars, g * 4 + 4)):
            kinds[b] = (kind, form.ENERGY[kind])
    return kinds
