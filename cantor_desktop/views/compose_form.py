"""The Compose form's state, without Qt: text fields in, a song request (or the reason not) out.

Every check is :func:`cantor_desktop.song.request.validate`, the node's own rules, so what
blocks Generate here is exactly what the node would refuse.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from ..song import musical_keys, request as song_request
from ..song.lyrics import INSTRUMENTAL
from ..song.request import RequestError

SKETCH_MODEL = "sketch"
ADVANCED_FIELDS = tuple(n for n in song_request.STYLE_FIELDS if n != "codes_from")
"""The Advanced section's fields: the request's style fields a musician sets (``codes_from``
is Render again's, never typed)."""
ADVANCED_TEXT = tuple(n for n in ADVANCED_FIELDS if n not in ("lm_negative_prompt", "lock_caption"))
"""The Advanced fields whose text "" or "auto" leaves the engine's default (the negative
prompt is free text, Lock my caption a tick)."""
LYRICS_HINT = (
    "[Verse]\nwrite the first verse here\n\n[Chorus]\nthe chorus\n\n"
    "Structure tags: [Intro] [Verse] [Pre-Chorus] [Chorus] [Bridge] [Outro]"
)
KEYS = tuple(k.display for k in musical_keys.ALL)  # "E♭ minor": one spelling per key


@dataclass
class ComposeForm:
    """What the musician typed. Empty text means "auto" (the model decides)."""

    caption: str = ""
    lyrics: str = ""
    instrumental: bool = False
    duration: str = ""
    bpm: str = ""
    key: str = ""
    time_signature: str = ""
    language: str = ""
    seed: str = ""  # empty = random
    seed_locked: bool = False
    model: str = SKETCH_MODEL
    format: str = "wav24"
    takes: int = 1
    # a cover of a song or an upload, and a reference sound (their names for people)
    cover_of: dict[str, Any] | None = None  # {"song": id, "take": n} or {"upload": id}
    cover_name: str = ""
    strength: float = 1.0  # share of the steps that hear the source
    faithful: bool = False
    reference: dict[str, Any] | None = None
    reference_name: str = ""
    # Advanced: "" is auto (the engine's default for the model)
    steps: str = ""
    guidance: str = ""
    shift: str = ""
    solver: str = ""
    lm_temperature: str = ""
    lm_cfg: str = ""
    lm_top_p: str = ""
    lm_top_k: str = ""
    lm_negative_prompt: str = ""
    lock_caption: bool = False
    adapter: str = ""
    adapter_scale: str = ""

    def request(self) -> dict[str, Any]:
        """The JSON body for ``POST /v1/songs`` (auto fields left out)."""
        # a pasted control character (a terminal's colour code, a NUL) never reaches the node
        body: dict[str, Any] = {"caption": song_request.CONTROL_CHARACTER.sub("", self.caption)}
        body["lyrics"] = INSTRUMENTAL if self.instrumental else self.lyrics
        for name in ("duration", "bpm", "key", "time_signature", "language"):
            text = str(getattr(self, name)).strip()
            if text and text.lower() != "auto":
                body[name] = text
        body["seed"] = self.seed.strip() if (self.seed_locked and self.seed.strip()) else -1
        if self.model:
            body["model"] = self.model
        if self.format:
            body["format"] = self.format
        body["batch"] = self.takes
        if self.cover_of:
            body.update(task="cover", source=self.cover_of, strength=round(self.strength, 2))
            if self.faithful:
                body["faithful"] = True
        if self.reference:
            body["reference"] = self.reference
        for name in ADVANCED_TEXT:
            text = str(getattr(self, name)).strip()
            if text and text.lower() != "auto":
                body[name] = text
        if self.lm_negative_prompt.strip():
            body["lm_negative_prompt"] = self.lm_negative_prompt.strip()
        if self.lock_caption:
            body["lock_caption"] = True
        return body

    @property
    def advanced_set(self) -> int:
        """How many advanced controls are not auto (shown on the folded section)."""
        return sum(
            1
            for n in ADVANCED_FIELDS
            if n != "lock_caption"
            and str(getattr(self, n)).strip()
            and str(getattr(self, n)).lower() != "auto"
        ) + int(self.lock_caption)

    def problem(self) -> RequestError | None:
        """The first field the node would refuse, or None when Generate may go."""
        found = self.problems()
        return found[0] if found else None

    def problems(self) -> list[RequestError]:
        """Every field the node would refuse, each once, in the form's order (the node's own
        rules, asked again without each refused field until the rest passes)."""
        body = self.request()
        found: list[RequestError] = []
        for _ in range(len(song_request.FIELDS) + 1):
            try:
                song_request.validate(body)
                break
            except RequestError as exc:
                found.append(exc)
                if exc.field == "caption":
                    body["caption"] = "caption"  # check the others all the same
                elif exc.field in body:
                    del body[exc.field]
                else:
                    break
        order = {name: i for i, name in enumerate(song_request.FIELDS)}
        return sorted(found, key=lambda e: order.get(e.field, len(order)))

    def validated(self) -> dict[str, Any]:
        """The request as the node will receive it, typed and normalised; RequestError if not."""
        checked = song_request.validate(self.request())
        body = checked.to_dict()
        return {k: v for k, v in body.items() if v is not None}

    def lock_seed(self, seed: int | None = None) -> int:
        """Lock the seed, choosing one now when none is given; returns it (shown in the form)."""
        if seed is None or seed < 0:
            seed = random.randint(0, song_request.SEED_MAX)
        self.seed = str(seed)
        self.seed_locked = True
        return seed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ComposeForm":
        """A saved draft back (unknown or mistyped fields are left at their defaults)."""
        form = cls()
        for f in fields(cls):
            value = data.get(f.name)
            default = getattr(form, f.name)
            if value is None:
                continue
            if type(value) is type(default) or (default is None and isinstance(value, dict)):
                setattr(form, f.name, value)
            elif (
                isinstance(default, float)
                and isinstance(value, int)
                and not isinstance(value, bool)
            ):
                setattr(form, f.name, float(value))
        return form

    def with_style(self, style: Mapping[str, Any]) -> "ComposeForm":
        """A copy of the form with a style's recipe filled in (as the node lists it): its
        fields replace the form's, the lyrics, length and takes stay the musician's, its
        sound becomes the reference, its seed policy the seed's lock. Still editable."""
        recipe = style.get("fields") or {}
        filled = ComposeForm.from_json(self.to_json())
        base = ComposeForm.from_settings({**recipe, "model": recipe.get("model") or self.model})
        for name in ("caption", "bpm", "key", "time_signature", "language", "model"):
            if recipe.get(name) is not None:
                setattr(filled, name, getattr(base, name))
        for name in ADVANCED_FIELDS:
            setattr(filled, name, getattr(base, name))
        if style.get("reference"):
            filled.reference = dict(style["reference"])
            filled.reference_name = str(style.get("reference_name") or style.get("name") or "")
        seed = style.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            filled.seed, filled.seed_locked = str(seed), True
        else:
            filled.seed_locked = False
        return filled

    def recipe(self) -> dict[str, Any]:
        """What a style saved from this form keeps (the request's recipe fields, typed as
        the node types them) and its reference; RequestError when the form is not a song."""
        from ..song.style import RECIPE_FIELDS

        checked = self.validated()
        return {
            "fields": {k: checked[k] for k in RECIPE_FIELDS if checked.get(k) is not None},
            "seed": checked["seed"]
            if self.seed_locked and checked.get("seed", -1) >= 0
            else "random",
            "reference": self.reference,
        }

    @classmethod
    def from_settings(cls, params: Mapping[str, Any], seed: int | None = None) -> "ComposeForm":
        """ "Use these settings": a finished song's parameters back into the form (seed locked)."""

        def text(name: str) -> str:
            value = params.get(name)
            if value is None:
                return ""
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            return str(value)

        lyrics = params.get("lyrics") or ""
        instrumental = song_request.is_instrumental(lyrics)
        used_seed = seed if seed is not None else params.get("seed")
        form = cls(
            caption=str(params.get("caption") or ""),
            lyrics="" if instrumental else lyrics,
            instrumental=instrumental,
            duration=text("duration"),
            bpm=text("bpm"),
            key=text("key"),
            time_signature=text("time_signature"),
            language=text("language"),
            model=str(params.get("model") or SKETCH_MODEL),
            format=str(params.get("format") or "wav24"),
            takes=int(params.get("batch") or 1),
        )
        for name in ADVANCED_FIELDS:
            if name != "lock_caption":
                setattr(form, name, text(name))
        form.lock_caption = bool(params.get("lock_caption"))
        if isinstance(used_seed, int) and used_seed >= 0:
            form.seed, form.seed_locked = str(used_seed), True
        return form
