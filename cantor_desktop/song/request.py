"""A song request and its rules: one place, used by the node, the CLI and the app's form.

Bad input raises :class:`RequestError` naming the field, so the node can answer a 4xx before
anything reaches an engine, and the Compose page can show the same reason as you type.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from . import musical_keys
from ..errors import CantorError, short_repr
from .lyrics import INSTRUMENTAL, is_instrumental

DURATION_RANGE = (10.0, 600.0)
BPM_RANGE = (30, 300)
TIME_SIGNATURES = (2, 3, 4, 6)
BATCH_RANGE = (1, 4)
SEED_MAX = 2**32 - 1
CAPTION_MAX = 2000
CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""What never belongs in a caption (tabs and line breaks do): a pasted terminal colour code,
a NUL, a form feed."""
CAPTION_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"
"""The same rule as the API documents it."""
LYRICS_MAX = 20000
CONTEXT_RANGE = (1.0, 600.0)  # extend.context: seconds of the song a new sung part hears
CONTEXT_DEFAULT = 30.0  # … when the request names none
SONG_FORMATS = ("wav16", "wav24", "wav32", "flac", "mp3")
"""The audio formats a song is written in (``format``; node.toml ``songs.format``)."""

# ~50 vocal languages ACE-Step knows, plus "unknown" (the model decides)
LANGUAGES = (
    "unknown",
    "en",
    "zh",
    "ja",
    "ko",
    "es",
    "fr",
    "de",
    "it",
    "pt",
    "ru",
    "ar",
    "hi",
    "bn",
    "id",
    "ms",
    "th",
    "vi",
    "tr",
    "pl",
    "nl",
    "sv",
    "no",
    "da",
    "fi",
    "cs",
    "sk",
    "hu",
    "ro",
    "bg",
    "el",
    "uk",
    "he",
    "fa",
    "ur",
    "ta",
    "te",
    "mr",
    "gu",
    "kn",
    "ml",
    "pa",
    "tl",
    "sw",
    "yue",
    "hr",
    "sr",
    "sl",
    "lt",
    "lv",
    "et",
)

BASIC_FIELDS = (
    "caption",
    "lyrics",
    "duration",
    "bpm",
    "key",
    "time_signature",
    "language",
    "seed",
    "model",
    "format",
    "batch",
)
EDIT_FIELDS = (
    "task",
    "source",
    "reference",
    "region",
    "extend",
    "strength",
    "noise",
    "faithful",
    "track",
)
STYLE_FIELDS = (
    "adapter",
    "adapter_scale",
    "steps",
    "guidance",
    "shift",
    "solver",
    "lm_temperature",
    "lm_cfg",
    "lm_top_p",
    "lm_top_k",
    "lm_negative_prompt",
    "lock_caption",
    "codes_from",
)
FIELDS = BASIC_FIELDS + EDIT_FIELDS + STYLE_FIELDS

TASKS = ("text2music", "cover", "repaint", "extend", "extract", "lego", "complete")
SOURCE_TASKS = ("cover", "repaint", "extend", "extract", "lego", "complete")
BASE_TASKS = ("extract", "lego", "complete")
"""Tasks that give coherent audio only on a base DiT (acestep-v15-base, xl-base)."""
TRACKS = (
    "vocals",
    "backing_vocals",
    "drums",
    "bass",
    "guitar",
    "keyboard",
    "percussion",
    "strings",
    "synth",
    "fx",
    "brass",
    "woodwinds",
)
SOLVERS = ("euler", "sde", "dpm3m", "stork4")
MIN_REGION = 1.0  # seconds: a repainted region is at least this long
STEPS_RANGE = (1, 200)
GUIDANCE_RANGE = (0.0, 15.0)
SHIFT_RANGE = (0.0, 10.0)
ADAPTER_SCALE_RANGE = (0.0, 2.0)
LM_TEMPERATURE_RANGE = (0.0, 2.0)
LM_CFG_RANGE = (0.0, 10.0)
LM_TOP_K_RANGE = (0, 200)
NEGATIVE_MAX = 2000


class RequestError(CantorError, ValueError):
    """A field of a song request is not allowed; ``field`` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def normalise_key(text: str) -> str:
    """A key in any spelling, in its usual one (:mod:`.musical_keys`): "f# MINOR" →
    "F# minor", "D#m" → "Eb minor", "B♭ maj" → "Bb major". RequestError when it is no key."""
    key = musical_keys.parse(text, need_mode=True)
    if key is None:
        raise RequestError(
            "key",
            f"{short_repr(text)} is not a key; write a note and major or minor, "
            'e.g. "F# minor", "Eb minor", "E♭m" or "Bb major"',
        )
    return key.name


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
    # editing (None / defaults: a song from text)
    task: str = "text2music"
    source: dict[str, Any] | None = None  # {"song": id, "take": n} or {"upload": id}
    reference: dict[str, Any] | None = None  # the same shapes: a timbre to borrow
    region: dict[str, float] | None = None  # {"start": s, "end": s} (repaint, lego)
    extend: dict[str, Any] | None = None  # {"before": s, "after": s} (+ "lyrics", "context")
    strength: float | None = None  # cover: share of the steps that hear the source
    noise: float | None = None  # cover: start from a noised source
    faithful: bool = False  # cover: the source not quantised
    track: str | None = None  # extract, lego: one; complete: "a | b"
    # style and the controls behind "Advanced" (None: the engine's default)
    adapter: str | None = None
    adapter_scale: float | None = None
    steps: int | None = None
    guidance: float | None = None
    shift: float | None = None
    solver: str | None = None
    lm_temperature: float | None = None
    lm_cfg: float | None = None
    lm_top_p: float | None = None
    lm_top_k: int | None = None
    lm_negative_prompt: str | None = None
    lock_caption: bool = False
    codes_from: dict[str, Any] | None = None  # {"song": id, "take": n}: its audio codes

    @property
    def instrumental(self) -> bool:
        return is_instrumental(self.lyrics)

    @property
    def needs_source(self) -> bool:
        return self.task in SOURCE_TASKS

    def to_dict(self) -> dict[str, Any]:
        """Every field that says something (defaults of the editing and style fields are
        left out, so a text-to-music request reads as it always did)."""
        data = asdict(self)
        for name in EDIT_FIELDS + STYLE_FIELDS:
            if data[name] in (None, False) or (name == "task" and data[name] == "text2music"):
                data.pop(name)
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


def _text(name: str, value: Any, limit: int, *, must: str, long: str = "is") -> str | None:
    """A text field (None when absent): text, at most ``limit`` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(name, must)
    if len(value) > limit:
        raise RequestError(name, f"{long} too long ({len(value)} characters; at most {limit})")
    return value


def _continuation(extend: Mapping[str, Any], before: float, after: float) -> dict[str, Any]:
    """An extend's new lyrics (sung in what is added after the song) and its context (how
    many seconds of the song's end the new part hears), checked."""
    out: dict[str, Any] = {}
    lyrics = _text(
        "extend.lyrics",
        extend.get("lyrics"),
        LYRICS_MAX,
        must="must be text: the lines the new part sings",
        long="are",
    )
    if lyrics is not None:
        if lyrics.strip() and not is_instrumental(lyrics):
            if before or not after:
                raise RequestError(
                    "extend.lyrics",
                    "go with music added after the song (extend.after), not before it",
                )
            out["lyrics"] = lyrics.strip()
    context = extend.get("context")
    if context is not None:
        if "lyrics" not in out:
            raise RequestError("extend.context", "goes with extend.lyrics (a new part to sing)")
        out["context"] = _ranged(
            "extend.context", context, CONTEXT_RANGE[0], CONTEXT_RANGE[1], integer=False
        )
    return out


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
    control = CONTROL_CHARACTER.search(caption)
    if control is not None:
        raise RequestError(
            "caption",
            f"has a control character (U+{ord(control.group()):04X}) where text belongs; remove it",
        )
    if len(caption) > CAPTION_MAX:
        raise RequestError(
            "caption", f"is too long ({len(caption)} characters; at most {CAPTION_MAX})"
        )

    lyrics = _text(
        "lyrics", data.get("lyrics"), LYRICS_MAX, must="must be text, or [Instrumental]", long="are"
    )
    lyrics = lyrics if lyrics is not None and not is_instrumental(lyrics) else INSTRUMENTAL

    duration = (
        None
        if _auto(data.get("duration"))
        else _ranged("duration", data["duration"], *DURATION_RANGE, integer=False, unit=" seconds")
    )
    bpm = None if _auto(data.get("bpm")) else _ranged("bpm", data["bpm"], *BPM_RANGE, integer=True)
    key = None
    if not _auto(data.get("key")):
        if not isinstance(data["key"], str):
            raise RequestError("key", 'must be text like "F# minor"')
        key = normalise_key(data["key"])
    time_signature = None
    if not _auto(data.get("time_signature")):
        ts = data["time_signature"]
        if isinstance(ts, str) and "/" in ts:
            ts = ts.split("/", 1)[0]
        ts = _number("time_signature", ts, integer=True)
        if ts not in TIME_SIGNATURES:
            raise RequestError(
                "time_signature",
                f"must be 2, 3, 4 or 6 (beats per bar), not {short_repr(data['time_signature'])}",
            )
        time_signature = int(ts)
    language = None
    if not _auto(data.get("language")):
        lang = data["language"]
        if not isinstance(lang, str) or lang.strip().lower() not in LANGUAGES:
            raise RequestError(
                "language",
                f"{short_repr(lang)} is not a known language code; "
                f"use one of {', '.join(LANGUAGES)}",
            )
        language = lang.strip().lower()
    seed = -1 if data.get("seed") is None else int(_number("seed", data["seed"], integer=True))
    if seed != -1 and not (0 <= seed <= SEED_MAX):
        raise RequestError(
            "seed", f"must be -1 (random) or from 0 to {SEED_MAX}, not {short_repr(seed)}"
        )
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise RequestError("model", "must be a model name")
    fmt = data.get("format")
    if fmt is None or (isinstance(fmt, str) and not fmt.strip()):
        fmt = default_format
    if fmt is not None and (not isinstance(fmt, str) or fmt not in SONG_FORMATS):
        raise RequestError(
            "format", f"{short_repr(fmt)} is not a format; use one of {', '.join(SONG_FORMATS)}"
        )
    batch = (
        1
        if data.get("batch") is None
        else _ranged("batch", data["batch"], *BATCH_RANGE, integer=True)
    )
    return SongRequest(
        caption=caption.strip(),
        lyrics=lyrics,
        duration=duration,
        bpm=bpm,
        key=key,
        time_signature=time_signature,
        language=language,
        seed=seed,
        model=model.strip() if model else None,
        format=fmt,
        batch=batch,
        **_editing(data),
        **_style(data),
    )


def check_ref(name: str, value: Any, *, songs: bool = True, uploads: bool = True) -> dict[str, Any]:
    """``{"song": id, "take": n}`` or ``{"upload": id}`` (the ids' existence is the node's
    to check)."""
    from .record import check_song_id

    if not isinstance(value, Mapping):
        raise RequestError(name, 'must be {"song": ID, "take": N} or {"upload": ID}')
    given = set(value)
    if songs and "song" in value and given <= {"song", "take"}:
        try:
            song = check_song_id(value["song"])
        except ValueError:
            raise RequestError(name, f"{short_repr(value['song'])} is not a song id") from None
        take = (
            1
            if value.get("take") is None
            else _ranged(f"{name}.take", value["take"], 1, BATCH_RANGE[1], integer=True)
        )
        return {"song": song, "take": take}
    if uploads and "upload" in value and given == {"upload"}:
        upload = value["upload"]
        if not isinstance(upload, str) or not re.fullmatch(r"[0-9a-f]{16}", upload):
            raise RequestError(name, f"{short_repr(upload)} is not an upload id")
        return {"upload": upload}
    shapes = ['{"song": ID, "take": N}'] if songs else []
    shapes += ['{"upload": ID}'] if uploads else []
    raise RequestError(name, f"must be {' or '.join(shapes)}, not {short_repr(value)}")


def _unit(name: str, value: Any) -> float | None:
    return None if value is None else _ranged(name, value, 0.0, 1.0, integer=False)


def _flag(name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(name, f"must be true or false, not {short_repr(value)}")
    return value


def _editing(data: Mapping[str, Any]) -> dict[str, Any]:
    """task, source, reference, region, extend, strength, noise, faithful, track — each in
    range and shape; what a task needs is there, and what it cannot use is refused."""
    task = data.get("task") or "text2music"
    if task not in TASKS:
        raise RequestError("task", f"{short_repr(task)} is not a task; one of {', '.join(TASKS)}")
    out: dict[str, Any] = {"task": task}
    source = data.get("source")
    if task in SOURCE_TASKS and source is None:
        raise RequestError("source", f"is required for {task}: the song (or upload) to work on")
    if source is not None:
        if task not in SOURCE_TASKS:
            raise RequestError(
                "source", f"is not used by {task}; a source goes with {', '.join(SOURCE_TASKS)}"
            )
        out["source"] = check_ref("source", source)
    if data.get("reference") is not None:
        out["reference"] = check_ref("reference", data["reference"])
    region = data.get("region")
    if region is not None:
        if task not in ("repaint", "lego"):
            raise RequestError("region", "goes with repaint (the part to make again) or lego")
        if not isinstance(region, Mapping) or set(region) != {"start", "end"}:
            raise RequestError("region", 'must be {"start": seconds, "end": seconds}')
        start = _ranged("region.start", region["start"], 0, DURATION_RANGE[1], integer=False)
        end = _ranged("region.end", region["end"], 0, DURATION_RANGE[1], integer=False)
        if end - start < MIN_REGION:
            raise RequestError(
                "region",
                f"must be at least {MIN_REGION:g} s long (it is "
                f"{end - start:g} s, from {start:g} to {end:g})",
            )
        out["region"] = {"start": start, "end": end}
    elif task == "repaint":
        raise RequestError("region", 'is required for repaint: {"start": s, "end": s}')
    extend = data.get("extend")
    if extend is not None:
        if task != "extend":
            raise RequestError("extend", "goes with the extend task")
        if (
            not isinstance(extend, Mapping)
            or not set(extend) <= {"before", "after", "lyrics", "context"}
            or not set(extend) & {"before", "after"}
        ):
            raise RequestError(
                "extend",
                'must be {"before": seconds, "after": seconds} (and for what is added after: '
                '"lyrics" to sing, "context": seconds of the song heard)',
            )
        before = _ranged(
            "extend.before", extend.get("before", 0), 0, DURATION_RANGE[1], integer=False
        )
        after = _ranged("extend.after", extend.get("after", 0), 0, DURATION_RANGE[1], integer=False)
        if before + after < MIN_REGION:
            raise RequestError("extend", f"must add at least {MIN_REGION:g} s before or after")
        out["extend"] = {"before": before, "after": after, **_continuation(extend, before, after)}
    elif task == "extend":
        raise RequestError("extend", 'is required for extend: {"before": s, "after": s}')
    for name in ("strength", "noise", "faithful"):
        if data.get(name) is not None and task != "cover":
            raise RequestError(name, "goes with the cover task")
    out["strength"] = _unit("strength", data.get("strength"))
    out["noise"] = _unit("noise", data.get("noise"))
    out["faithful"] = _flag("faithful", data.get("faithful"))
    track = data.get("track")
    if task in ("extract", "lego", "complete"):
        if track is None:
            raise RequestError("track", f"is required for {task}: one of {', '.join(TRACKS)}")
        names = (
            [t.strip().lower() for t in str(track).split("|")] if isinstance(track, str) else None
        )
        if not names or any(t not in TRACKS for t in names):
            raise RequestError(
                "track", f"{short_repr(track)} is not a track; one of {', '.join(TRACKS)}"
            )
        if len(names) > 1 and task != "complete":
            raise RequestError("track", f'{task} takes one track (complete takes several, "a | b")')
        out["track"] = " | ".join(names)
    elif track is not None:
        raise RequestError("track", "goes with extract, lego or complete")
    return out


def _style(data: Mapping[str, Any]) -> dict[str, Any]:
    """An adapter and the sampler and language-model controls, each in range."""
    out: dict[str, Any] = {}
    adapter = data.get("adapter")
    if adapter is not None and (not isinstance(adapter, str) or not adapter.strip()):
        raise RequestError("adapter", "must be the name of an adapter (`cantor adapters`)")
    out["adapter"] = adapter.strip() if adapter else None
    scale = data.get("adapter_scale")
    if scale is not None and adapter is None:
        raise RequestError("adapter_scale", "goes with an adapter")
    out["adapter_scale"] = (
        None
        if scale is None
        else _ranged("adapter_scale", scale, *ADAPTER_SCALE_RANGE, integer=False)
    )
    ranged = (
        ("steps", STEPS_RANGE, True),
        ("guidance", GUIDANCE_RANGE, False),
        ("shift", SHIFT_RANGE, False),
        ("lm_temperature", LM_TEMPERATURE_RANGE, False),
        ("lm_cfg", LM_CFG_RANGE, False),
        ("lm_top_p", (0.0, 1.0), False),
        ("lm_top_k", LM_TOP_K_RANGE, True),
    )
    for name, (lo, hi), integer in ranged:
        value = data.get(name)
        out[name] = None if value is None else _ranged(name, value, lo, hi, integer=integer)
    solver = data.get("solver")
    if solver is not None and solver not in SOLVERS:
        raise RequestError(
            "solver", f"{short_repr(solver)} is not a solver; one of {', '.join(SOLVERS)}"
        )
    out["solver"] = solver
    negative = _text(
        "lm_negative_prompt", data.get("lm_negative_prompt"), NEGATIVE_MAX, must="must be text"
    )
    out["lm_negative_prompt"] = negative or None
    out["lock_caption"] = _flag("lock_caption", data.get("lock_caption"))
    codes = data.get("codes_from")
    out["codes_from"] = None if codes is None else check_ref("codes_from", codes, uploads=False)
    return out
