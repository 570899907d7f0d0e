"""Did the take do what was asked? Its tempo and key measured from its audio
(:mod:`.analysis`) beside what the request asked (or the language model chose), with a
verdict a musician reads at a glance.

- Tempo: within :data:`BPM_TOLERANCE` of what was asked is ``ok``; near half or double of it
  is ``half time`` / ``double time`` (the commonest miss: a song asked at 120 that grooves
  at 60); anything else is ``off``.
- Key: the asked key is ``ok`` when the audio fits it nearly as well as the key it fits best
  (within :data:`KEY_MARGIN` of the spread of the 24 keys' scores: on 20-s Sketch songs a
  key read a fifth or a third away from the one played sits within 0.22, a key a step away
  beyond 0.95); else, against the best key: its relative key (A minor for C major) shares
  every note and is ``relative`` — not a miss; the same tonic in the other mode is
  ``parallel``, and any other key ``off``.

A take is marked (:func:`missed`) when either verdict is a miss. Nothing is judged that was
not asked or chosen: a fact measured for lack of a request has nothing to be checked against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import musical_keys

if TYPE_CHECKING:
    import numpy as np

KEY_MARGIN = 0.3
"""How much worse (a share of the best key's lead over the average key) the asked key may
fit and still be ``ok``."""
BPM_TOLERANCE = 0.04
"""How far (a fraction of the asked tempo) a measured tempo may be and still be ``ok``."""

OK, HALF, DOUBLE, OFF = "ok", "half time", "double time", "off"
RELATIVE, PARALLEL = "relative", "parallel"
MISSES = frozenset({HALF, DOUBLE, OFF, PARALLEL})
JUDGED = ("asked", "lm")
"""Where a fact must come from to be checked: the request, or the language model's choice."""
CHECKED_TASKS = ("text2music", "cover")
"""The tasks whose takes are checked: those that make a whole new song (an edit keeps its
source's tempo and key, and a stem has neither a groove nor a key of its own to judge)."""


def tempo_verdict(asked: float, measured: float | None) -> str | None:
    if not asked or not measured:
        return None
    for ratio, verdict in ((1.0, OK), (0.5, HALF), (2.0, DOUBLE)):
        if abs(measured - asked * ratio) <= asked * ratio * BPM_TOLERANCE:
            return verdict
    return OFF


def key_verdict(asked: str, measured: str | None, fits: bool = False) -> str | None:
    """``fits``: the audio fits the asked key within :data:`KEY_MARGIN` of the best one."""
    a, m = musical_keys.parse(asked), musical_keys.parse(measured)
    if a is None or m is None:
        return None
    if a == m or fits:
        return OK
    tonic, minor, other, other_minor = a.tonic, a.minor, m.tonic, m.minor
    if minor != other_minor:
        relative = (tonic + 3) % 12 if minor else (tonic + 9) % 12
        if other == relative:
            return RELATIVE
        if other == tonic:
            return PARALLEL
    return OFF


def check(
    facts: Mapping[str, Any],
    measured_bpm: float | None,
    measured_key: str | None,
    key_fits: bool = False,
) -> dict[str, Any]:
    """``{"bpm": {"asked", "measured", "verdict"}, "key": {…}}`` for the facts that were
    asked or chosen (``facts``: a take's ``bpm``, ``key`` and ``facts_from``)."""
    sources = facts.get("facts_from") or {}
    out: dict[str, Any] = {}
    bpm = facts.get("bpm")
    if sources.get("bpm") in JUDGED and isinstance(bpm, (int, float)) and bpm:
        verdict = tempo_verdict(float(bpm), measured_bpm)
        if verdict is not None:
            out["bpm"] = {
                "asked": float(bpm),
                "measured": round(float(measured_bpm or 0), 1),
                "verdict": verdict,
            }
    key = facts.get("key")
    if sources.get("key") in JUDGED and isinstance(key, str) and key:
        verdict = key_verdict(key, measured_key, key_fits)
        if verdict is not None:
            out["key"] = {"asked": key, "measured": measured_key, "verdict": verdict}
    return out


def measure(
    facts: Mapping[str, Any],
    audio: bytes | np.ndarray,
    rate: int | None = None,
    task: str | None = None,
) -> dict[str, Any]:
    """:func:`check` of a take's facts against its audio (a file's bytes, or samples and
    their ``rate``), measured only when something was asked or chosen for a new song or a
    cover (``task``; None is a new song): {} otherwise, and for audio that cannot be read."""
    if (task or "text2music") not in CHECKED_TASKS:
        return {}
    sources = facts.get("facts_from") or {}
    if not any(sources.get(f) in JUDGED and facts.get(f) for f in ("bpm", "key")):
        return {}
    from . import analysis

    if isinstance(audio, (bytes, bytearray, memoryview)):
        try:
            audio, rate = analysis.decode(bytes(audio))
        except Exception:
            return {}
    if rate is None:
        raise ValueError("measure: samples need their rate")
    x = analysis.prepare(audio, rate)
    bpm = analysis.estimate_tempo(x, analysis.RATE, prepared=True)
    key, fits = None, False
    scores = analysis.key_scores(x, bpm or None) if len(x) >= analysis.RATE else None
    if scores is not None:
        mode, tonic = divmod(int(scores.argmax()), 12)
        key = analysis.key_name(tonic, bool(mode))
        asked = musical_keys.parse(facts.get("key"))
        best, average = float(scores.max()), float(scores.mean())
        if asked is not None and best > average:
            gap = (best - float(scores[int(asked.minor), asked.tonic])) / (best - average)
            fits = gap <= KEY_MARGIN
    return check(facts, bpm, key, fits)


def missed(found: Mapping[str, Any] | None) -> list[str]:
    """The facts a take missed (``"bpm"``, ``"key"``), from its ``check``."""
    if not isinstance(found, Mapping):
        return []
    return [
        f
        for f in ("bpm", "key")
        if isinstance(found.get(f), Mapping) and found[f].get("verdict") in MISSES
    ]


def sanitised(value: Any) -> dict[str, Any]:
    """A take's ``check`` as read from a record: only the fields above, of their types."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    for fact, kind in (("bpm", (int, float)), ("key", str)):
        part = value.get(fact)
        if not isinstance(part, Mapping) or not isinstance(part.get("verdict"), str):
            continue
        asked, measured = part.get("asked"), part.get("measured")
        if not isinstance(asked, kind) or isinstance(asked, bool):
            continue
        if measured is not None and (not isinstance(measured, kind) or isinstance(measured, bool)):
            continue
        if part["verdict"] not in MISSES | {OK, RELATIVE}:
            continue
        out[fact] = {"asked": asked, "measured": measured, "verdict": part["verdict"]}
    return out
