"""A song's form: its sections in bars, from the lyrics' structure tags or made up for an
instrumental, and where each sung line falls.

With lyrics, every tag opens a section ([Intro], [Verse 2], [Pre-Chorus], [Chorus], [Bridge],
[Solo], [Outro] and their common spellings, see :func:`music.section_kind`); its lines are
placed one eighth note per syllable from a bar line, with a bar's breath after each line,
and a tag with no line under it is an instrumental section of that kind. Without lyrics a
form is made to the song's length: intro, then verse / pre-chorus / chorus blocks with a
bridge, solo or breakdown between later choruses, then an outro.
"""

from __future__ import annotations

import random
from typing import Any
from dataclasses import dataclass, replace

from . import music

# how full each kind of section is played (0 silent … 1 everything)
ENERGY = {
    "intro": 0.3,
    "verse": 0.45,
    "pre": 0.65,
    "chorus": 0.9,
    "bridge": 0.4,
    "solo": 0.75,
    "breakdown": 0.2,
    "outro": 0.3,
}
EMPTY_BARS = 4  # an instrumental section named by a tag with no lines


@dataclass(frozen=True)
class Section:
    kind: str  # one of music.SECTION_NAMES
    start: int  # first bar
    bars: int
    number: int  # 1 for the first section of its kind, 2 for the next …
    energy: float
    last: bool = False  # the last section of its kind

    @property
    def end(self) -> int:
        return self.start + self.bars


@dataclass(frozen=True)
class Line:
    """A sung line: its first syllable's time, the time per syllable, and its section."""

    start: float  # seconds
    slot: float  # seconds per syllable
    kind: str
    text: str
    words: tuple[int, ...]  # syllables per word


def _sections(kinds: list[str]) -> list[Section]:
    """Sections from one kind per bar (a new section where the kind or block changes)."""
    runs: list[list] = []
    for bar, kind in enumerate(kinds):
        if runs and runs[-1][0] == kind:
            runs[-1][2] += 1
        else:
            runs.append([kind, bar, 1])
    return _number(runs)


def _number(runs) -> list[Section]:
    counts: dict[str, int] = {}
    total = {k: sum(1 for r in runs if r[0] == k) for k, *_ in runs}
    out = []
    for kind, start, bars in runs:
        counts[kind] = counts.get(kind, 0) + 1
        n = counts[kind]
        energy = ENERGY[kind]
        if kind == "verse":
            energy += 0.06 * (min(n, 3) - 1)  # later verses fill out
        elif kind == "chorus" and n == total[kind] and n > 1:
            energy = 1.0  # the last chorus is the biggest
        out.append(Section(kind, start, bars, n, round(energy, 3), n == total[kind]))
    return out


# ---------------------------------------------------------------- instrumental


def generated(bars: int, seed: int) -> list[Section]:
    """A form for an instrumental of ``bars`` bars (deterministic for the seed)."""
    rng = random.Random(f"form\0{seed}")
    if bars <= 4:
        return _number([["verse", 0, bars]]) if bars > 0 else []
    if bars < 8:
        return _number([["intro", 0, 1], ["verse", 1, bars - 1]])
    # four-bar phrases throughout (an intro of four bars once there is room), so phrases
    # start where a listener counts them from the first sound
    intro = 4 if bars >= 16 else 2
    outro = 4 if bars >= 40 else (2 if bars >= 12 else 1)
    middle = bars - intro - outro
    unit = 8 if middle >= 40 else 4
    half = 4
    plan: list[tuple[str, int]] = []
    left = middle
    for block in _blocks(rng, unit, half):
        size = sum(n for _, n in block)
        if size <= left:
            plan += block
            left -= size
            continue
        if left >= 8:  # a shortened verse and chorus
            v = (left // 2) // 4 * 4 or 4
            plan += [("verse", v), ("chorus", left - v)]
        elif left and plan:  # a longer last section
            plan[-1] = (plan[-1][0], plan[-1][1] + left)
        elif left:
            plan.append(("verse", left))
        break
    runs: list[list[Any]] = [["intro", 0, intro]]  # [kind, first bar, bars]
    bar = intro
    for kind, n in plan:
        if runs[-1][0] == kind:
            runs[-1][2] += n
        else:
            runs.append([kind, bar, n])
        bar += n
    runs.append(["outro", bar, outro])
    return _number(runs)


def _blocks(rng: random.Random, unit: int, half: int):
    """Blocks of sections, in order, for as long as the song needs."""
    yield (
        [("verse", unit), ("chorus", unit)]
        if unit == 4
        else [("verse", unit), ("pre", half), ("chorus", unit)]
    )
    yield [("verse", unit), ("pre", half), ("chorus", unit)]
    yield [(rng.choice(["bridge", "solo"]), unit), ("chorus", unit)]
    options = [
        [("verse", unit), ("pre", half), ("chorus", unit)],
        [("breakdown", half), ("pre", half), ("chorus", unit)],
        [("solo", unit), ("chorus", unit)],
        [("bridge", unit), ("chorus", unit)],
    ]
    last = None
    while True:
        block = rng.choice([b for b in options if b is not last])
        last = block
        yield block


# ---------------------------------------------------------------- given (edits)


def fitted(sections, bars: int) -> list[Section]:
    """Given sections cut or stretched to exactly ``bars`` bars (the last one takes up the
    rest)."""
    out = [replace(s, bars=min(s.bars, bars - s.start)) for s in sections if s.start < bars]
    if not out:
        return generated(bars, 0)
    if out[-1].end < bars:
        out[-1] = replace(out[-1], bars=bars - out[-1].start)
    return out


def from_kinds(kinds: list[tuple[str, float]]) -> list[Section]:
    """Sections from one (kind, energy) per bar: a new section where either changes;
    numbered by kind in order, the last of each kind marked."""
    runs: list[list] = []
    for bar, (kind, energy) in enumerate(kinds):
        if runs and (runs[-1][0], runs[-1][3]) == (kind, energy):
            runs[-1][2] += 1
        else:
            runs.append([kind, bar, 1, energy])
    counts: dict[str, int] = {}
    total = {r[0]: sum(1 for x in runs if x[0] == r[0]) for r in runs}
    out = []
    for kind, start, n, energy in runs:
        counts[kind] = counts.get(kind, 0) + 1
        out.append(Section(kind, start, n, counts[kind], energy, counts[kind] == total[kind]))
    return out


def continuation(bars: int, seed: int) -> list[tuple[str, float]]:
    """(kind, energy) per bar for music that goes on after a song ends: verse and chorus
    in fours (a chorus first when the song ended quietly is not guessed: a verse), an outro
    to close."""
    if bars <= 2:
        return [("outro", ENERGY["outro"])] * bars
    outro = 4 if bars >= 16 else (2 if bars >= 6 else 1)
    rng = random.Random(f"continue\0{seed}")
    body: list[str] = []
    kinds = ["verse", "chorus"] if rng.random() < 0.5 else ["verse", "pre", "chorus"]
    while len(body) < bars - outro:
        for kind in kinds:
            body += [kind] * 4
    body = body[: bars - outro]
    return [(k, ENERGY[k]) for k in body] + [("outro", ENERGY["outro"])] * outro


def lead_in(bars: int) -> list[tuple[str, float]]:
    """(kind, energy) per bar for music put before a song: an intro, then a verse when
    there are more than four bars."""
    intro = bars if bars <= 4 else 4
    return [("intro", ENERGY["intro"])] * intro + [("verse", ENERGY["verse"])] * (bars - intro)


# ---------------------------------------------------------------- with lyrics


def from_lyrics(
    lyrics: str, bars: int, bar_s: float, slots_per_bar: int, duration: float
) -> tuple[list[Section], list[Line]]:
    """Sections and sung lines for lyrics, fitted into ``bars`` bars (``duration`` s).

    Lines keep an eighth note per syllable and a bar's breath after each while they fit;
    spare bars go between lines (up to two) and then to the outro. Too many words: tagged
    instrumental sections shrink first, then every line is sung faster."""
    blocks = music.lyric_blocks(lyrics)
    if not any(lines for _, lines in blocks):
        return generated(bars, 0), []
    intro = 0 if blocks[0][0] == "intro" else (2 if bars >= 8 else (1 if bars >= 3 else 0))
    outro = 0 if blocks[-1][0] == "outro" else (1 if bars >= 4 else 0)
    need = [[-(-sum(w) // slots_per_bar) + 1 for _, w in lines] for _, lines in blocks]
    sung = sum(sum(n) for n in need)
    empties = sum(EMPTY_BARS for _, lines in blocks if not lines)
    room = max(0, bars - intro - outro - sung)
    per_empty = EMPTY_BARS if empties <= room else (room * EMPTY_BARS) // max(1, empties)
    empty_bars = [0 if lines else per_empty for _, lines in blocks]
    fixed = intro + outro + sum(empty_bars)
    avail_s = duration - fixed * bar_s
    scale_t = min(1.0, avail_s / (sung * bar_s)) if sung else 1.0
    scale_t = max(scale_t, 1e-3)
    n_lines = sum(len(lines) for _, lines in blocks)
    spare = int(avail_s / bar_s + 1e-9) - sung if scale_t >= 1.0 else 0
    gap = min(2, spare // n_lines) if spare > 0 else 0
    half = bar_s / slots_per_bar
    placed: list[Line] = []
    spans: list[tuple[float, float, str]] = []
    cursor = intro * bar_s
    for (kind, lines), line_need, eb in zip(blocks, need, empty_bars):
        start = cursor
        if not lines:
            cursor += eb * bar_s
        for (text, words), n in zip(lines, line_need):
            placed.append(Line(cursor, half * scale_t, kind, text, tuple(words)))
            cursor += (n + gap) * bar_s * scale_t
        if cursor > start:
            spans.append((start, cursor, kind))
    kinds = []
    block_of = []
    for bar in range(bars):
        t = bar * bar_s + 1e-6
        i = next((k for k, (a, b, _) in enumerate(spans) if a <= t < b), None)
        if i is None:
            i = -1 if not spans or t < spans[0][0] else len(spans)
            if i == len(spans) and spans[-1][2] == "outro":
                i -= 1  # a tagged outro rings on to the end
        block_of.append(i)
        kinds.append("intro" if i == -1 else ("outro" if i == len(spans) else spans[i][2]))
    runs: list[list] = []
    for bar, (kind, i) in enumerate(zip(kinds, block_of)):
        if runs and runs[-1][3] == i:
            runs[-1][2] += 1
        else:
            runs.append([kind, bar, 1, i])
    return _number([r[:3] for r in runs]), placed
