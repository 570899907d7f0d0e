"""The Sketch's audio codes: ACE-Step-shaped 5 Hz tokens that encode a song's plan.

ACE-Step's LM writes ``audio_codes`` (5 tokens a second) and its DiT renders them; sent
back, they make the same song again without the LM ("same song, new render"). The Sketch's
LM writes codes the Sketch's synth can read the same way:

- the first :data:`HEADER` tokens carry the arrangement: ``MAGIC``, the version, the plan's
  seed (three 15-bit words), the tempo × 10, tonic × 2 + minor, beats per bar, the
  duration × 10 (two words) and a checksum;
- every later token (one per 0.2 s) says what the plan plays then: ``PLAN`` + section kind
  × 64 + chord degree × 8 + energy (0…7).

A synth request carrying such codes takes its arrangement (style, form, chords, patterns,
melody) from them and only its render (the voices' noise, the room) from its own seed;
tempo, key, metre and length come from the codes unless the request names them. Codes
from elsewhere (a real LM's) only seed the melody.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAGIC = 23100
VERSION = 1
HEADER = 11
PLAN = 32768
_TOKEN = re.compile(r"<\|audio_code_(\d+)\|>")
_KINDS = ("intro", "verse", "pre", "chorus", "bridge", "solo", "breakdown", "outro")


@dataclass(frozen=True)
class Decoded:
    plan_seed: int
    bpm: float
    tonic: int
    minor: bool
    beats: int
    duration: float


def tokens(text: str) -> list[int]:
    """The numbers of ``<|audio_code_N|>`` tokens, or of a comma list."""
    found = _TOKEN.findall(text or "")
    if found:
        return [int(t) for t in found]
    return [int(t) for t in re.findall(r"\d+", text or "")]


def _checksum(words: list[int]) -> int:
    return sum((i + 1) * w for i, w in enumerate(words)) % 32749


def encode(song, plan) -> str:
    """The codes of a Sketch song (render.Song) and its plan (arrange.Plan)."""
    n = max(HEADER, int(round(song.duration * 5)))
    seed = int(song.arrangement_seed) & ((1 << 45) - 1)
    tenths = int(round(song.duration * 10))
    words = [
        MAGIC,
        VERSION,
        seed & 0x7FFF,
        (seed >> 15) & 0x7FFF,
        (seed >> 30) & 0x7FFF,
        int(round(song.bpm * 10)) & 0x7FFF,
        song.tonic * 2 + int(song.minor),
        song.beats_per_bar,
        tenths & 0x7FFF,
        tenths >> 15,
    ]
    words.append(_checksum(words))
    bar_s = song.bar_seconds
    kinds: dict[int, tuple[str, float]] = {}
    for s in plan.sections:
        for b in range(s.start, s.end):
            kinds[b] = (s.kind, s.energy)
    for i in range(n - HEADER):
        t = (HEADER + i) / 5.0
        bar = min(len(plan.degrees) - 1, int(t / bar_s)) if plan.degrees else 0
        kind, energy = kinds.get(bar, ("verse", 0.5))
        degree = plan.degrees[bar] if plan.degrees else 0
        words.append(
            PLAN + _KINDS.index(kind) * 64 + (degree % 8) * 8 + min(7, int(energy * 7.999))
        )
    return "".join(f"<|audio_code_{w}|>" for w in words)


def decode(text: str) -> Decoded | None:
    """The arrangement in Sketch codes; None for codes from elsewhere (or damaged)."""
    words = tokens(text)
    if len(words) < HEADER or words[0] != MAGIC or words[1] != VERSION:
        return None
    if _checksum(words[: HEADER - 1]) != words[HEADER - 1]:
        return None
    seed = words[2] | (words[3] << 15) | (words[4] << 30)
    tenths = words[8] | (words[9] << 15)
    if not words[5] or words[7] not in (2, 3, 4, 6) or not tenths or words[6] >= 24:
        return None
    return Decoded(
        plan_seed=seed,
        bpm=words[5] / 10,
        tonic=words[6] // 2,
        minor=bool(words[6] % 2),
        beats=words[7],
        duration=tenths / 10,
    )
