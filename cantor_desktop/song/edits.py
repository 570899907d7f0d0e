"""Edits of a song as the CLI and the app build them (no Qt, no I/O): what an edit copies
from the song it starts from, which model it runs on (extract, lego and complete need a
base DiT), how stems are named, and the tracks and times a musician types.

The node checks every request again (:mod:`cantor_desktop.song.request` and its source
checks); this module only chooses well, so that what is sent is what the musician meant.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from .request import BASE_TASKS, DURATION_RANGE, TRACKS, RequestError

SKETCH = "sketch"
BASE_PULL = "acestep-v15-base"  # what `cantor pull` takes for the base DiT
BASE_MODEL = "acestep-v15-base-Q8_0"  # the one the node names when a base is missing
READY = "ready"

KEPT_FIELDS = ("caption", "lyrics", "model", "format", "language", "key", "bpm", "time_signature")
"""What an edit of a Cantor song keeps from that song's own request."""

TRACK_WORDS = {t: t.replace("_", " ") for t in TRACKS}


def parse_tracks(text: str | Iterable[str], field: str = "tracks") -> list[str]:
    """``"drums,bass"``, ``"all"`` or a list → track names in the engine's order of
    :data:`TRACKS` (each once); RequestError naming ``field`` on an unknown one."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = [str(t).strip().lower().replace(" ", "_").replace("-", "_") for t in items]
    names = [n for n in names if n]
    if not names:
        raise RequestError(field, f"name at least one track: {', '.join(TRACKS)}, or all")
    if "all" in names:
        return list(TRACKS)
    unknown = [n for n in names if n not in TRACKS]
    if unknown:
        raise RequestError(
            field, f"{unknown[0]!r} is not a track; one of {', '.join(TRACKS)}, or all"
        )
    return [t for t in TRACKS if t in names]


def parse_seconds(text: Any, field: str) -> float:
    """``75``, ``75.5``, ``1:15`` or ``1:02.5`` → seconds; RequestError naming ``field``."""
    value = str(text).strip()
    found = re.fullmatch(r"(?:(\d+):)?(\d+(?:\.\d*)?|\.\d+)", value)
    if not found:
        raise RequestError(
            field, f"{value!r} is not a time; write seconds (75) or minutes:seconds (1:15)"
        )
    minutes, seconds = found.groups()
    if minutes is not None and float(seconds) >= 60:
        raise RequestError(field, f"{value!r}: the seconds after the colon must be below 60")
    total = float(seconds) + 60 * int(minutes or 0)
    if total > DURATION_RANGE[1]:
        raise RequestError(field, f"{value!r} is past 10 minutes, the longest song there is")
    return total


# -- models ------------------------------------------------------------------------------------


def is_base(model: Mapping[str, Any]) -> bool:
    """A base DiT (acestep-v15-base, xl-base): the only ones extract, lego and complete
    give coherent audio on."""
    variant = str(model.get("variant") or "")
    return variant == "base" or variant.endswith("-base")


def installed_base(models: Iterable[Mapping[str, Any]]) -> str | None:
    """The base model to use among the node's models (``GET /v1/models``): the one the
    node suggests when it is ready, else any ready base model."""
    ready = [m for m in models if is_base(m) and m.get("state") == READY]
    ready.sort(key=lambda m: (m.get("name") != BASE_MODEL, str(m.get("name"))))
    return str(ready[0]["name"]) if ready else None


def base_offer(models: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The catalogue entry to pull when no base model is ready (``GET /v1/models?all=true``
    lists it with ``download_bytes``: what is still missing, companions counted)."""
    bases = [m for m in models if is_base(m)]
    return next((m for m in bases if m.get("name") == BASE_MODEL), bases[0] if bases else None)


def needs_base(task: str, source_model: str | None) -> bool:
    """A base model must be found for this edit: one of the base tasks on a song the Sketch
    did not make (the Sketch does its own stems)."""
    return task in BASE_TASKS and source_model != SKETCH


def model_for(
    task: str,
    source_model: str | None,
    models: Iterable[Mapping[str, Any]],
    asked: str | None = None,
) -> str | None:
    """The model an edit asks for: the one named; for extract, lego and complete a ready
    base model (a Sketch song stays with the Sketch); else the source song's own model.
    None lets the node choose (its default; the Sketch on a machine without ACE-Step).
    Without a base model the source's model is sent and the node refuses it, naming the
    base model to pull and its size."""
    if asked:
        return asked
    if needs_base(task, source_model):
        return installed_base(models) or source_model
    return source_model or None


# -- requests ----------------------------------------------------------------------------------


def edit_request(
    task: str, source: Mapping[str, Any], base: Mapping[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """An edit's request: ``base`` (the source song's own request, when it is a Cantor
    song) gives :data:`KEPT_FIELDS`; ``fields`` override them (None: left out)."""
    request = {k: base[k] for k in KEPT_FIELDS if base and base.get(k) is not None}
    request.update(task=task, source=dict(source))
    request.update({k: v for k, v in fields.items() if v is not None})
    return request


def stem_title(title: str, caption: str, track: str) -> str:
    """``{title}_{track}``: the song's title, else its caption's first words (as an export
    names it), and the track — what a DAW shows for the stem."""
    from .naming import slug

    name = title.strip() or slug(caption)
    return f"{name}_{track}"
