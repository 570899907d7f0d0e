"""Compose without Qt: what the form may send, why not, and the words the page shows.

The page's fields make a :class:`~.compose_form.ComposeForm`; :class:`ComposeViewModel`
holds the rest of the page's state (the song a cover starts from, the reference sound, the
node's models, adapters and pool, whether Generate was asked for) and answers the page's
questions: every field the node would refuse and how it is named, which fields to outline,
which machine of the pool may make the song, what the language model's answer or a dropped
file changes in the form, what a queue row's button does, and the draft kept across
restarts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client.pool_view import PoolView
from ..models.catalogue import SKETCH_DISPLAY, canonical_model
from ..song import musical_keys
from ..song import request as song_request
from ..song.record import Song, SongState
from .compose_form import SKETCH_MODEL, ComposeForm

ANY_NODE = "Any node"
LABELS = {
    "caption": "Caption",
    "lyrics": "Lyrics",
    "duration": "Duration",
    "bpm": "BPM",
    "key": "Key",
    "time_signature": "Time signature",
    "language": "Language",
    "seed": "Seed",
    "model": "Model",
    "format": "Format",
    "batch": "Takes",
    "adapter": "Adapter",
    "adapter_scale": "Adapter scale",
    "node": "Node",
}
"""Each request field by the label the form gives it (a problem is named so)."""
LM_MODES = {"inspire": "Writing a song from your idea…", "format": "Tidying…"}
"""The language model's helpers (Inspire me, Tidy my lyrics) and what the page says while
each works."""
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".aiff", ".aif", ".ogg")
"""Files the page takes when dropped on it (to fill the form from, or to cover)."""
READY_STATES = ("ready", "installed", "downloaded")


def strength_words(strength: float) -> str:
    """What a cover's strength does, in a sentence (it is the share of the steps that hear
    the source)."""
    pct = int(round(strength * 100))
    if strength >= 0.85:
        how = "keeps the source's structure, melody and timing; the caption restyles its sound"
    elif strength >= 0.5:
        how = "follows the source's outline; the caption changes its sound and details"
    elif strength >= 0.2:
        how = "only the source's broad shape survives; mostly a new song in its tempo"
    else:
        how = "barely hears the source: close to a new song from the caption"
    return f"{pct} % of the steps hear the source: it {how}."


@dataclass(frozen=True)
class Verdict:
    """The form checked: every problem (the node's rules, the adapter, the pool's member)."""

    problems: tuple[song_request.RequestError, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(p.field for p in self.problems)

    @property
    def text(self) -> str:
        """One line per problem, each named by its field's label ("" when Generate may go)."""
        return "\n".join(f"{LABELS.get(p.field, p.field)} {p.message}" for p in self.problems)


@dataclass(frozen=True)
class NodeChoice:
    """A row of the Node list: a member of the pool (greyed out when it cannot make it)."""

    label: str
    name: str  # "" is any member
    usable: bool = True


class ComposeViewModel:
    def __init__(self) -> None:
        self.cover: tuple[dict[str, Any], str] | None = None  # the source, its name
        self.reference: tuple[dict[str, Any], str] | None = None
        self.dropped: tuple[dict[str, Any], str] | None = None  # a file heard: "Cover this file"
        self.tried = False  # Generate asked for: empty required fields are outlined too
        self.touched: set[str] = set()  # fields that held something once: their errors show
        self.models: list[Any] = []  # the node's models (dicts, or names)
        self.pool: PoolView | None = None
        self.adapters: list[dict[str, Any]] = []
        self.adapters_known = False  # the node's adapter list was read
        self.format_chosen = False  # a format chosen here outlives the node's default

    # -- checking -------------------------------------------------------------------------
    def check(self, form: ComposeForm, node: str | None) -> Verdict:
        """Every field the node would refuse, all at once; then the adapter and the pool's
        member, which the node would refuse too."""
        problems = form.problems()
        adapter = self.adapter_problem(form)
        if adapter is not None and all(p.field != "adapter" for p in problems):
            problems.append(adapter)
        member = self.node_problem(node, form.model)
        if member is not None:
            problems.append(member)
        return Verdict(tuple(problems))

    def outlined(self, verdict: Verdict, field: str, holds_input: bool) -> bool:
        """Whether a field is outlined: it is refused and holds (or held) something, or
        Generate was asked for."""
        if holds_input:
            self.touched.add(field)
        return field in verdict.fields and (self.tried or field in self.touched)

    def said(self, verdict: Verdict) -> str:
        """What the message line says of the problems: those of the fields the musician
        touched, or all once Generate was asked for; nothing on an untouched form (the
        Generate button's tooltip names them all)."""
        shown = [p for p in verdict.problems if self.tried or p.field in self.touched]
        return Verdict(tuple(shown)).text

    def adapter_problem(self, form: ComposeForm) -> song_request.RequestError | None:
        """What the node would say about the chosen adapter: not installed, or made for
        the other size of DiT than the chosen model's."""
        name = form.adapter.strip()
        if not name or not self.adapters_known:
            return None
        found = next((a for a in self.adapters if a.get("name") == name), None)
        if found is None:
            return song_request.RequestError(
                "adapter", f"{name} is not installed on the node (Library → Add adapter…)"
            )
        if found.get("problem"):
            return song_request.RequestError(
                "adapter", f"{name} cannot be used: {found['problem']}"
            )
        dit, model = found.get("dit"), form.model
        if dit and model and model != SKETCH_MODEL and (dit == "XL") != ("xl" in model.lower()):
            article = "an" if dit == "XL" else "a"
            return song_request.RequestError(
                "adapter", f"{name} was made for the {dit} DiT; choose {article} {dit} model"
            )
        return None

    @staticmethod
    def advanced_title(form: ComposeForm, shown: bool) -> str:
        count = form.advanced_set
        return f"Advanced {'▾' if shown else '▸'}" + (f"  ({count} set)" if count else "")

    # -- where the song starts from -------------------------------------------------------
    def cover_text(self) -> str:
        return f"Cover of “{self.cover[1]}” — strength" if self.cover else ""

    def reference_text(self) -> str:
        if not self.reference:
            return ""
        return (
            f"Reference sound: “{self.reference[1]}” (its timbre "
            f"is borrowed; the song is still your caption's)"
        )

    # -- the models and the pool's members ------------------------------------------------
    def model_choices(self) -> list[tuple[str, str]]:
        """(label, model) for the Model list: the Sketch, the node's ready models, and in a
        pool the models only other members have (named with who has them)."""
        out = [(SKETCH_DISPLAY, SKETCH_MODEL)]
        here = {SKETCH_MODEL}
        for m in self.models:
            name = m.get("name") if isinstance(m, dict) else str(m)
            state = m.get("state", "ready") if isinstance(m, dict) else "ready"
            if name and name != SKETCH_MODEL and state in READY_STATES:
                out.append((m.get("title") or name if isinstance(m, dict) else name, name))
                here.add(canonical_model(name))
        for name, makers in sorted(self.pool_models().items()):
            if name not in here:
                out.append((f"{name} (on {', '.join(makers)})", name))
        return out

    def pool_models(self) -> dict[str, list[str]]:
        """Every model a live member of the pool has → those members' names."""
        out: dict[str, list[str]] = {}
        for m in self.pool.alive if self.pool is not None else ():
            for model in m.models:
                out.setdefault(model, []).append(m.name)
        return out

    def set_pool(self, view: PoolView | None) -> bool:
        """The node's pool (None: in none); True when the Model list must be filled again
        (the models only other members have changed)."""
        before = self.pool_models()
        self.pool = view
        return self.pool_models() != before

    def node_choices(self, model: str, current: str) -> list[NodeChoice] | None:
        """The Node list: "Any node", then each live member, one that lacks ``model``
        greyed out (saying so); the chosen ``current`` member that left the pool stays,
        marked, until another is chosen. None: who is in the pool is not known now (the
        list stays as it was)."""
        if self.pool is not None and not self.pool.reachable:
            return None
        choices = [NodeChoice(ANY_NODE, "")]
        if self.pool is not None:
            for choice in self.pool.choices(model or SKETCH_MODEL):
                choices.append(NodeChoice(choice.label, choice.name, choice.usable))
            if current and all(row.name != current for row in choices):
                choices.append(NodeChoice(f"{current} — not in the pool now", current, False))
        return choices

    def chosen_node(self, current: str) -> str | None:
        """The member the song goes to (None: any member, or no pool)."""
        if self.pool is None:
            return None
        return current or None

    def node_problem(self, name: str | None, model: str) -> song_request.RequestError | None:
        """The chosen member cannot make the song: not in the pool now, or without the
        model (the node would refuse it)."""
        if name is None or self.pool is None or not self.pool.reachable:
            return None  # (an unreachable pool: the node says so when asked)
        member = self.pool.member(name)
        if member is None or not member.alive:
            return song_request.RequestError(
                "node", f"{name} is not in the pool now; choose {ANY_NODE} or another member"
            )
        if not member.can_make(model):
            return song_request.RequestError(
                "node", f"{name} does not have {model}; choose {ANY_NODE} or another member"
            )
        return None

    # -- the language model and a dropped file --------------------------------------------
    @staticmethod
    def lm_problem(mode: str, form: ComposeForm) -> str | None:
        """Why the language model cannot be asked yet (None: it can)."""
        if mode == "inspire" and not form.caption.strip():
            return "Inspire me: write a short idea in Caption first"
        return None

    @staticmethod
    def lm_request(form: ComposeForm) -> dict[str, Any]:
        """What the language model is given: the caption, the lyrics, the model."""
        return {
            "caption": form.caption,
            "lyrics": "" if form.instrumental else form.lyrics,
            "model": form.model,
        }

    @staticmethod
    def with_lm_answer(form: ComposeForm, answer: Mapping[str, Any]) -> ComposeForm:
        """The form with the language model's caption and lyrics; its tempo, length and key
        only where the form leaves them to the model."""
        changes: dict[str, Any] = {}
        if answer.get("caption"):
            changes["caption"] = answer["caption"]
        if answer.get("lyrics") and not song_request.is_instrumental(answer["lyrics"]):
            changes.update(instrumental=False, lyrics=answer["lyrics"])
        for name in ("bpm", "duration"):
            if answer.get(name) and not getattr(form, name).strip():
                changes[name] = f"{answer[name]:g}"
        if answer.get("key") and not form.key:
            changes["key"] = musical_keys.display(answer["key"])
        return dataclasses.replace(form, **changes)

    @staticmethod
    def dropped_audio(paths: Sequence[str]) -> str | None:
        """The first of the dropped files the page takes (audio)."""
        return next((p for p in paths if p.lower().endswith(AUDIO_EXTENSIONS)), None)

    def with_file_heard(
        self, form: ComposeForm, upload: Mapping[str, Any], heard: Mapping[str, Any], name: str
    ) -> ComposeForm:
        """The form filled from what the node heard in a dropped file (no reference sound:
        the file is the song now); the file is kept to be covered instead."""
        changes: dict[str, Any] = {"reference": None, "reference_name": ""}
        if heard.get("caption"):
            changes["caption"] = heard["caption"]
        lyrics = heard.get("lyrics")
        if lyrics and not song_request.is_instrumental(lyrics):
            changes.update(instrumental=False, lyrics=lyrics)
        else:
            changes["instrumental"] = True
        for key in ("bpm", "duration"):
            if heard.get(key):
                changes[key] = f"{heard[key]:g}"
        if heard.get("key"):
            changes["key"] = musical_keys.display(heard["key"])
        for key in ("time_signature", "language"):
            if heard.get(key):
                changes[key] = str(heard[key])
        self.reference = None
        self.dropped = ({"upload": upload["id"]}, name)
        return dataclasses.replace(form, **changes)

    @staticmethod
    def heard_words(name: str) -> str:
        return f"Filled from {name}: edit it, or make a cover of the file (Cover this file)"

    # -- the queue ------------------------------------------------------------------------
    @staticmethod
    def row_action(song: Song) -> str:
        """What a queue row's button does: ``play`` a finished song (in Songs), ``retry``
        one that failed or was cancelled, ``cancel`` one in flight."""
        if song.state == SongState.DONE:
            return "play"
        if song.state in (SongState.FAILED, SongState.CANCELLED):
            return "retry"
        return "cancel"

    # -- the format and the draft ---------------------------------------------------------
    @staticmethod
    def default_format(node_config: Mapping[str, Any], ours: str) -> str:
        """The node's default song format (its settings, else our node.toml's)."""
        fmt = node_config.get("songs.format")
        return fmt if fmt in song_request.SONG_FORMATS else ours

    def format_from_node(self, values: Mapping[str, Any]) -> str | None:
        """A changed default format reaches the form at once, unless one was chosen here."""
        fmt = values.get("songs.format")
        if fmt in song_request.SONG_FORMATS and not self.format_chosen:
            return str(fmt)
        return None

    @staticmethod
    def draft_bytes(form: ComposeForm) -> bytes:
        return json.dumps(form.to_json()).encode("utf-8")

    def read_draft(self, path: Path, default_format: str) -> ComposeForm | None:
        """The draft kept across restarts (None: there is none, or it is not one)."""
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        form = ComposeForm.from_json(data)
        self.format_chosen = form.format != default_format
        return form
