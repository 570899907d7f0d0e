"""A song request and its rules: one place, used by the node, the CLI and the app's form.

Bad input raises :class:`RequestError` naming the field, so the node can answer a 4xx before
anything reaches an engine, and the Compose page can show the same reason as you type.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from .config import SONG_FORMATS, short_repr

INSTRUMENTAL = "[Instrumental]"
DURATION_RANGE = (10.0, 600.0)
BPM_RANGE = (30, 300)
TIME_SIGNATURES = (2, 3, 4, 6)
BATCH_RANGE = (1, 4)
SEED_MAX = 2**32 - 1
CAPTION_MAX = 2000
LYRICS_MAX = 20000

NOTES = ("C", "C#", "Db", "D", "D#", "Eb", "E", "F", "F#", "Gb", "G", "G#", "Ab", "A", "A#",
         "Bb", "B")
MODES = ("major", "minor")
_KEY_RE = re.compile(r"^\s*([A-Ga-g])\s*([#♯b♭]?)\s+(major|minor|maj|min)\s*$", re.IGNORECASE)

# ~50 vocal languages ACE-Step knows, plus "unknown" (the model decides)
LANGUAGES = ("unknown", "en", "zh", "ja", "ko", "es", "fr", "de", "it", "pt", "ru", "ar",
             "hi", "bn", "id", "ms", "th", "vi", "tr", "pl", "nl", "sv", "no", "da", "fi",
             "cs", "sk", "hu", "ro", "bg", "el", "uk", "he", "fa", "ur", "ta", "te", "mr",
             "gu", "kn", "ml", "pa", "tl", "sw", "yue", "hr", "sr", "sl", "lt", "lv", "et")

FIELDS = ("caption", "lyrics", "duration", "bpm", "key", "time_signature", "language",
          "seed", "model", "format", "batch")


class RequestError(ValueError):
    """A field of a song request is not allowed; ``field`` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def is_instrumental(lyrics: str | None) -> bool:
    """Absent, empty, or ``[Instrumental]`` in any case with any surrounding white space."""
    if lyrics is None:
        return True
    text = lyrics.strip()
    return text == "" or text.lower() == INSTRUMENTAL.lower()


def normalise_key(text: str) -> str:
    """"f# MINOR" → "F# minor"; "Bb maj" → "Bb major". RequestError when it is no key."""
    found = _KEY_RE.match(text or "")
    if not found:
        raise RequestError("key", f"{short_repr(text)} is not a key; write a note and major or minor, "
                                  "e.g. \"F# minor\" or \"Bb major\"")
    note = found.group(1).upper() + found.group(2).replace("♯", "#").replace("♭", "b")
    if note not in NOTES:
        raise RequestError("key", f"{short_repr(text)} is not a key: {note} is not a note")
    mode = "major" if found.group(3).lower().startswith("maj") else "minor"
    return f"{note} {mode}"


@dataclass
class SongRequest:
    """A validated song request. ``None`` means "let the model choose"."""

    caption: str
    lyrics: str = INSTRUMENTAL
    duration: float | None = None
    bpm: int | None = None
    key: str | None = None
    time_signature: int | None = None
    language: str | None = None
    seed: int = -1
    model: str | None = None
    format: str | None = None
    batch: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def instrumental(self) -> bool:
        return is_instrumental(self.lyrics)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not data["extra"]:
            data.pop("extra")
        return data


def _number(name: str, value: Any, *, integer: bool) -> float | int:
    if isinstance(value, bool) or value is None:
        raise RequestError(name, f"must be a number, not {short_repr(value)}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise RequestError(name, f"must be a number, not {short_repr(value)}") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value):  # NaN, ±Infinity
        raise RequestError(name, f"must be a number, not {short_repr(value)}")
    if integer:
        if float(value) != int(value):
            raise RequestError(name, f"must be a whole number, not {short_repr(value)}")
        return int(value)
    return float(value)


def _ranged(name: str, value: Any, lo: float, hi: float, *, integer: bool, unit: str = ""):
    number = _number(name, value, integer=integer)
    if not (lo <= number <= hi):
        lo_s, hi_s = (int(lo), int(hi)) if float(lo).is_integer() else (lo, hi)
        raise RequestError(name, f"must be from {lo_s} to {hi_s}{unit}, not {short_repr(value)}")
    return number


def _auto(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto"))


def validate(data: Mapping[str, Any], *, default_format: str | None = None) -> SongRequest:
    """Check a request (JSON-like mapping) field by field; raise RequestError on the first bad one."""
    if not isinstance(data, Mapping):
        raise RequestError("body", "must be a JSON object")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(unknown[0], f"unknown field; known fields: {', '.join(FIELDS)}")

    caption = data.get("caption")
    if not isinstance(caption, str) or not caption.strip():
        raise RequestError("caption", "is required: describe the song (style, instruments, mood)")
    if len(caption) > CAPTION_MAX:
        raise RequestError("caption", f"is too long ({len(caption)} characters; at most {CAPTION_MAX})")

    lyrics = data.get("lyrics")
    if lyrics is not None and not isinstance(lyrics, str):
        raise RequestError("lyrics", "must be text, or [Instrumental]")
    if lyrics is not None and len(lyrics) > LYRICS_MAX:
        raise RequestError("lyrics", f"are too long ({len(lyrics)} characters; at most {LYRICS_MAX})")
    lyrics = INSTRUMENTAL if is_instrumental(lyrics) else lyrics

    duration = None if _auto(data.get("duration")) else _ranged(
        "duration", data["duration"], *DURATION_RANGE, integer=False, unit=" seconds")
    bpm = None if _auto(data.get("bpm")) else _ranged("bpm", data["bpm"], *BPM_RANGE, integer=True)
    key = None
    if not _auto(data.get("key")):
        if not isinstance(data["key"], str):
            raise RequestError("key", "must be text like \"F# minor\"")
        key = normalise_key(data["key"])
    time_signature = None
    if not _auto(data.get("time_signature")):
        ts = data["time_signature"]
        if isinstance(ts, str) and "/" in ts:
            ts = ts.split("/", 1)[0]
        ts = _number("time_signature", ts, integer=True)
        if ts not in TIME_SIGNATURES:
            raise RequestError("time_signature", f"must be 2, 3, 4 or 6 (beats per bar), not "
                                                 f"{short_repr(data['time_signature'])}")
        time_signature = int(ts)
    language = None
    if not _auto(data.get("language")):
        lang = data["language"]
        if not isinstance(lang, str) or lang.strip().lower() not in LANGUAGES:
            raise RequestError("language", f"{short_repr(lang)} is not a known language code; "
                                           f"use one of {', '.join(LANGUAGES)}")
        language = lang.strip().lower()
    seed = -1 if data.get("seed") is None else _number("seed", data["seed"], integer=True)
    if seed != -1 and not (0 <= seed <= SEED_MAX):
        raise RequestError("seed", f"must be -1 (random) or from 0 to {SEED_MAX}, not {short_repr(seed)}")
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise RequestError("model", "must be a model name")
    fmt = data.get("format")
    if fmt is None or (isinstance(fmt, str) and not fmt.strip()):
        fmt = default_format
    if fmt is not None and (not isinstance(fmt, str) or fmt not in SONG_FORMATS):
        raise RequestError("format", f"{short_repr(fmt)} is not a format; use one of {', '.join(SONG_FORMATS)}")
    batch = 1 if data.get("batch") is None else _ranged("batch", data["batch"], *BATCH_RANGE,
                                                       integer=True)
    return SongRequest(caption=caption.strip(), lyrics=lyrics, duration=duration, bpm=bpm,
                       key=key, time_signature=time_signature, language=language, seed=seed,
                       model=model.strip() if model else None, format=fmt, batch=batch)
