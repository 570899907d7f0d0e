"""A style: a song's recipe kept under a name, to make more songs that sound alike — the
caption, the reference sound, the adapter and its scale, tempo, key, time signature,
language, the advanced fields, and a seed policy.

A style is a set of request fields (:data:`RECIPE_FIELDS`) checked by the one request
validator (:func:`.request.validate`), a reference (an upload the node keeps for the style)
and its seed policy: ``"random"`` (a new seed each song) or a fixed number (the same
performance each time, for a template). Applying a style (:func:`apply`) fills a request's
missing fields from it; what the request gives itself wins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import short_repr
from .request import STYLE_FIELDS, RequestError, check_ref, validate

RECIPE_FIELDS = ("caption", "bpm", "key", "time_signature", "language", "model") + tuple(
    name for name in STYLE_FIELDS if name != "codes_from"
)
"""The request fields a style keeps (never the lyrics, a source or the song's length: those
are each song's own)."""

RANDOM = "random"
NAME_MAX = 80
NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f/\\]*[^\s\x00-\x1f\x7f-\x9f/\\][^\x00-\x1f\x7f-\x9f/\\]*$"
"""A style's name as the API documents it: no control characters, no / or \\, and more
than blank space."""
_NAME = re.compile(NAME_PATTERN)


class StyleError(ValueError):
    """A style that cannot be kept; ``field`` names the part at fault."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def check_name(name: Any) -> str:
    """A style's name: any text a musician types (no slashes or control characters)."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name.strip()) > NAME_MAX
        or not _NAME.fullmatch(name)
    ):
        raise StyleError(
            "name", f"{short_repr(name)} is not a style name (1–{NAME_MAX} characters, no / or \\)"
        )
    return name.strip()


@dataclass
class Style:
    name: str
    fields: dict[str, Any]
    seed: int | str = RANDOM  # RANDOM, or the seed every song of the style uses
    reference: dict[str, Any] | None = None  # {"upload": id}: the node's copy of the sound
    reference_name: str = ""  # the sound's own name, for people
    created: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "fields": dict(self.fields),
            "seed": self.seed,
            "reference": self.reference,
            "reference_name": self.reference_name,
            "created": self.created,
        }
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Style:
        """A style as kept or sent, checked (StyleError names what is wrong)."""
        if not isinstance(data, Mapping):
            raise StyleError("style", "must be an object")
        unknown = sorted(set(data) - {*cls.__dataclass_fields__} - {"extra"})
        if unknown:
            raise StyleError(unknown[0], "unknown field; known: name, fields, seed, reference")
        name = check_name(data.get("name"))
        fields = check_fields(data.get("fields"))
        seed = check_seed(data.get("seed", RANDOM))
        reference = data.get("reference")
        if reference is not None:
            try:
                reference = check_ref("reference", reference, songs=False)
            except RequestError as exc:
                raise StyleError("reference", str(exc).split(": ", 1)[-1]) from None
        created = data.get("created") or 0.0
        if not isinstance(created, (int, float)) or isinstance(created, bool):
            raise StyleError("created", "must be a time")
        shown = data.get("reference_name") or ""
        if not isinstance(shown, str):
            raise StyleError("reference_name", "must be text")
        return cls(name, fields, seed, reference, shown[:200], float(created))


def check_fields(fields: Any) -> dict[str, Any]:
    """The recipe's fields, each checked as a song request checks it."""
    if not isinstance(fields, Mapping):
        raise StyleError("fields", "must be an object of song settings")
    unknown = sorted(set(fields) - set(RECIPE_FIELDS))
    if unknown:
        raise StyleError(
            unknown[0], f"not kept by a style; a style keeps {', '.join(RECIPE_FIELDS)}"
        )
    kept = {k: v for k, v in fields.items() if v is not None}
    try:
        validate({"caption": "a style", "model": "sketch", **kept})
    except RequestError as exc:
        raise StyleError(exc.field, exc.message) from None
    return kept


def check_seed(seed: Any) -> int | str:
    if seed == RANDOM:
        return RANDOM
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**32:
        return seed
    raise StyleError("seed", f'"random" or a number from 0 to {2**32 - 1}, not {short_repr(seed)}')


def from_request(request: Mapping[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The recipe fields of a song's request (its seed kept only when ``seed`` is given)."""
    return {k: request[k] for k in RECIPE_FIELDS if request.get(k) is not None}


def apply(style: Style, request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with the style's fields where it has none of its own, its reference when
    it names none, and its seed when it gives none (a random seed for ``"random"``)."""
    out = dict(request)
    for k, v in style.fields.items():
        if out.get(k) is None:
            out[k] = v
    if style.reference is not None and out.get("reference") is None:
        out["reference"] = dict(style.reference)
    if out.get("seed") is None and style.seed != RANDOM:
        out["seed"] = style.seed
    return out
