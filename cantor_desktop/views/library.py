"""The Library without Qt: the node's models and what each row shows and offers, the model
recommended for the node's machine, each pull's progress from its typed events, and the
words for every outcome (a download, an import, the Hugging Face token, the adapters).

:class:`LibraryViewModel` holds the page's state — the models as the node listed them, the
pulls running, failed or paused, the recommendation — and answers the page in plain values
(:class:`ModelRow`, :class:`PullShown`, :class:`~.messages.Message`), which the page draws.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ..models.advice import Machine, Recommendation, describe, family_words, recommend
from ..models.events import PullEvent, PullStep
from .messages import DANGER, NEWS, WARNING, Message, failure
from .transfer import TransferMeter, human_bytes, human_duration

READY = "ready"
DEFAULT_QUANT = "Q8_0"
STAR = "★"
KINDS = {"dit": "DiT", "text_enc": "text encoder", "vae": "VAE", "lm": "language model"}
WAITING = "The catalogue shows here once the node answers (Start node, bottom right)."
ACTION_TIPS = {
    "Discard": "delete the partly downloaded files on the node",
    "Cancel": "stop and delete the partly downloaded files on the node",
    "Pause": "stop; Resume carries on where it stopped",
    "Retry": "try the download again (what arrived is kept)",
}
"""What a row's button does, where its label does not say it all."""


def done_message(name: str, event: PullEvent) -> str:
    """What a finished pull says: ready, or downloaded with the engine problem and what to do."""
    if event.engine_ready is False:
        reason = (event.engine_error or "the engine step failed").strip().rstrip(".")
        return (
            f"{name}: Model ready. No engine yet: {reason} — "
            f"Hardware & Backends → Find the best backend"
        )
    return f"{name} is downloaded and ready."


def failed_message(name: str, event: PullEvent) -> str:
    """The page's line for a failed pull; addresses shortened to the file they name (the
    row's tooltip keeps the node's whole message)."""
    reason = re.sub(r"https?://\S+/([^/\s]+?):", r"\1:", event.message).rstrip(".")
    text = failure(f"download {name}", reason) + "."
    if event.error_type == "NeedsToken":
        text += " Save a Hugging Face token below (it is kept on the node's machine), then Retry."
    return text


def row_actions(
    state: str, *, builtin: bool, pulling: bool, failed: bool, partial: bool
) -> list[str]:
    """The buttons a row offers, by what the model is doing."""
    if builtin:
        return []
    if pulling:
        return ["Pause", "Cancel"]
    if failed:
        return ["Retry", "Discard"] if partial else ["Retry"]
    if state == READY:
        return ["Remove"]
    if state in ("partial", "paused"):
        return ["Resume", "Discard"]
    if state in ("corrupt", "missing companion"):
        return ["Repair"]
    return ["Download"]


def file_name(path: str) -> str:
    """The last part of a path from any OS (a folder's own name for a folder)."""
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _named(name: str, why: str) -> str:
    """ "name: why", unless the reason already starts with the name."""
    return why if why.startswith(name) else f"{name}: {why}"


@dataclass(frozen=True)
class ModelRow:
    """A model's row, as the table shows it (its State cell and buttons: :meth:`state`)."""

    text: str  # the title (★ when recommended) and what it is for, on two lines
    tooltip: str
    bold: bool
    size: str
    bar: tuple[int, str] | None  # progress (0–1000) and its words; None: no bar


@dataclass(frozen=True)
class StateCell:
    text: str
    tooltip: str
    tone: str | None
    actions: tuple[str, ...]
    always_ready: bool  # the built-in Sketch: no buttons, a word instead


@dataclass(frozen=True)
class Advice:
    """The recommendation's banner: its text (rich), and its Download button if any."""

    text: str
    button: str | None


@dataclass
class PullShown:
    """What one pull event changes on the page (None: that part stays as it is)."""

    message: Message | None = None
    ended: bool = False  # speed and time left cleared; actions, filter and advice again
    drop_bar: bool = False  # nothing arrived before it failed: no bar
    actions: bool = False  # the row's buttons change (a pull started elsewhere)
    state: str | None = None
    state_tip: str | None = None
    bar_value: int | None = None
    bar_text: str | None = None
    bar_tip: str | None = None
    speed: str | None = None
    time_left: str | None = None


@dataclass(frozen=True)
class AdapterRow:
    name: str
    tooltip: str
    size: str
    made_for: str
    problem: bool


class LibraryViewModel:
    def __init__(self) -> None:
        self.models: dict[str, dict[str, Any]] = {}  # by name, in the node's order
        self.rows: dict[str, int] = {}  # model → its row in the table
        self.pulling: set[str] = set()  # models whose pull is running
        self.failed: dict[str, str] = {}  # model → why its last pull failed
        self.paused: set[str] = set()
        self.recommended: Recommendation | None = None
        self._shown: dict[str, dict[str, Any]] = {}  # each row as last drawn
        self._kinds: dict[str, str] = {}  # file name → kind, from pull plans
        self._received: dict[str, int] = {}  # model → bytes its running pull got
        self._meters: dict[str, TransferMeter] = {}

    # -- the models -----------------------------------------------------------------------
    def take_models(
        self, models: Sequence[Mapping[str, Any]], system: Mapping[str, Any]
    ) -> tuple[bool, list[str]]:
        """The node's library read again: (the rows are new, the models whose row to draw
        again). Rows whose model did not change are left alone."""
        unique: dict[str, dict[str, Any]] = {}
        for m in models:
            unique.setdefault(m["name"], dict(m))
        self.models = unique
        advice_moved = self.update_advice(system)
        names = list(unique)
        new_rows = names != list(self.rows)
        if new_rows:
            self.rows = {name: row for row, name in enumerate(names)}
        if new_rows or advice_moved:
            self._shown = {}
        redraw = [name for name, m in unique.items() if self._shown.get(name) != m]
        self._shown.update({name: unique[name] for name in redraw})
        return new_rows, redraw

    def row(self, name: str) -> ModelRow:
        m = self.models.get(name, {})
        title = m.get("display_name") or name
        marked = self.recommended is not None and self.recommended.name == name
        if marked:
            title = f"{STAR} {title}"
        about = (
            "for trying things out: no download"
            if m.get("builtin")
            else family_words(m.get("variant"))
        )
        tip = (
            name,
            "Recommended for this machine." if marked else "",
            describe(m.get("variant"), m.get("quant")) or about,
        )
        state = m.get("state", "")
        size, to_get = int(m.get("size_bytes") or 0), int(m.get("download_bytes") or 0)
        if m.get("builtin"):
            size_text = "built in"
        elif state == READY or not to_get:
            size_text = human_bytes(size)
        else:
            size_text = f"{human_bytes(to_get)} to get"
        bar = None
        if not m.get("builtin") and (size or name in self.pulling):
            bar = (
                1000 if state == READY else int(1000 * size / max(1, size + to_get)),
                READY if state == READY else f"{human_bytes(size)} of {human_bytes(size + to_get)}",
            )
        return ModelRow(
            text=f"{title}\n{about}" if about else title,
            tooltip="\n".join(x for x in tip if x),
            bold=marked,
            size=size_text,
            bar=bar,
        )

    def state_word(self, name: str) -> str:
        """What the row's State column says now."""
        if name in self.pulling:
            return "downloading"
        if name in self.failed:
            return "failed"
        state = str(self.models.get(name, {}).get("state", ""))
        return "paused" if state == "partial" and name in self.paused else state

    def state(self, name: str) -> StateCell:
        m = self.models.get(name, {})
        word = self.state_word(name)
        actions = row_actions(
            word,
            builtin=bool(m.get("builtin")),
            pulling=word == "downloading",
            failed=word == "failed",
            partial=int(m.get("size_bytes") or 0) > 0,
        )
        return StateCell(
            text="" if m.get("builtin") else word,
            tooltip=self.failed.get(name, ""),
            tone=DANGER if word == "failed" else None,
            actions=tuple(actions),
            always_ready=bool(m.get("builtin")),
        )

    def hidden(self, name: str, every_quant: bool) -> bool:
        """Quantisations other than Q8_0 are folded away unless asked for (or on the
        node, recommended, failed or being pulled)."""
        m = self.models.get(name, {})
        rec = self.recommended.name if self.recommended else None
        return not (
            every_quant
            or m.get("builtin")
            or name == rec
            or name in self.failed
            or m.get("quant") in (None, DEFAULT_QUANT)
            or m.get("state") not in ("not downloaded", None)
            or name in self.pulling
        )

    def details(self, name: str | None) -> str:
        """What the selected model is (rich text), "" for none."""
        m = self.models.get(name or "", {})
        if not m or name is None:
            return ""
        text = describe(m.get("variant"), m.get("quant"))
        return (
            f"<b>{escape(m.get('display_name') or name)}</b> "
            f"({escape(name)}) — {text or 'a model file you brought'}"
        )

    def disk_line(self, remote: bool) -> str:
        mine = [m for m in self.models.values() if not m.get("builtin")]
        used = sum(int(m.get("size_bytes") or 0) for m in mine)
        folder = next(
            (m.get("folder") for m in mine if m.get("folder") and not m.get("imported")), None
        )
        where = " on the node's machine" if remote else ""
        return f"Models use {human_bytes(used)}{where}" + (f" · {folder}" if folder else "")

    def waiting(self, shown: str) -> str | None:
        """The line while the node has not answered (``shown``: what the line says now);
        None: leave the line as it is."""
        if not self.models:
            return WAITING
        return "" if shown == WAITING else None

    # -- the recommendation ---------------------------------------------------------------
    def update_advice(self, system: Mapping[str, Any]) -> bool:
        """Recompute the model suggested for the node's machine; True when it changed."""
        names = [n for n, m in self.models.items() if not m.get("builtin")]
        rec = recommend(Machine.from_system(system), names) if names else None
        changed = rec != self.recommended
        self.recommended = rec
        if changed:
            self._shown = {}  # the star moved: every row is drawn again
        return changed

    def advice(self) -> Advice | None:
        rec = self.recommended
        if rec is None or rec.name not in self.models:
            return None
        m = self.models[rec.name]
        ready = m.get("state") == READY
        text = (
            f"{STAR} <b>Recommended for this machine: "
            f"{escape(m.get('display_name') or rec.name)}</b>"
            f"{' (downloaded)' if ready else ''} — {rec.reason}"
        )
        if ready or rec.name in self.pulling:
            return Advice(text, None)
        to_get = int(m.get("download_bytes") or 0)
        return Advice(text, f"Download ({human_bytes(to_get)})" if to_get else "Download")

    # -- pulls ----------------------------------------------------------------------------
    def start_pull(self, name: str) -> None:
        self._meters[name] = TransferMeter()
        self.failed.pop(name, None)
        self.paused.discard(name)
        self.pulling.add(name)
        self._received[name] = 0

    def pause(self, name: str) -> None:
        self.paused.add(name)

    def discarded(self, name: str, answer: Mapping[str, Any]) -> Message:
        """The partly downloaded files were deleted: what the page says."""
        self.failed.pop(name, None)
        self.paused.discard(name)
        gone = answer.get("deleted") or []
        if not gone:
            return Message(f"{name}: nothing partly downloaded was left to delete.")
        freed = human_bytes(answer.get("freed_bytes") or 0)
        return Message(f"{name}: deleted {len(gone)} partly downloaded file(s), {freed}.")

    def pull_event(self, name: str, event: PullEvent) -> PullShown:
        """One of a pull's events, folded into the page's state: what it changes."""
        step = event.type
        if event.is_terminal:
            self.pulling.discard(name)
            shown = PullShown(ended=True)
            if step is PullStep.DONE:
                self.failed.pop(name, None)
                tone = WARNING if event.engine_ready is False else NEWS
                shown.message = Message(done_message(name, event), tone)
                if name in self.models:
                    self.models[name] = {**self.models[name], "state": READY}
            elif step is PullStep.FAILED:
                self.failed[name] = event.message
                shown.message = Message(failed_message(name, event), DANGER)
                shown.drop_bar = not self._received.get(name) and not self.models.get(name, {}).get(
                    "size_bytes"
                )
            else:
                self.paused.add(name)
                shown.message = Message(f"{name}: paused. Resume carries on where it stopped.")
            return shown
        shown = PullShown()
        if name not in self.pulling:  # a pull started elsewhere (the first-run banner)
            self.pulling.add(name)
            shown.actions = True
        if step is PullStep.CATALOGUE:
            shown.state = "asking the hub…"
        elif step is PullStep.ENGINE:
            shown.state, shown.state_tip = "engine…", event.message
        elif step is PullStep.PLAN:
            self._kinds.update({str(f.get("name")): str(f.get("kind")) for f in event.files})
            shown.bar_text = f"0 / {human_bytes(event.total)}"
        elif step in (PullStep.FILE_START, PullStep.PROGRESS, PullStep.FILE_DONE):
            self._progress(name, event, shown)
        return shown

    def _progress(self, name: str, event: PullEvent, shown: PullShown) -> None:
        meter = self._meters.setdefault(name, TransferMeter())
        meter.add(event.received)
        self._received[name] = event.received
        if event.total:
            shown.bar_value = int(1000 * (event.fraction or 0))
            shown.bar_text = f"{human_bytes(event.received)} / {human_bytes(event.total)}"
        speed = event.speed or meter.speed()
        eta = event.eta if event.eta is not None else meter.eta(event.total)
        shown.speed, shown.time_left = f"{human_bytes(speed)}/s", human_duration(eta)
        tip = f"{human_bytes(speed)}/s, {human_duration(eta)} left"
        if event.file:
            tip = (
                f"{event.file}: {human_bytes(event.file_received)} / "
                f"{human_bytes(event.file_total)} — {tip}"
            )
            pct = (
                f" {int(100 * event.file_received / event.file_total)}%" if event.file_total else ""
            )
            what = KINDS.get(self._kinds.get(event.file, ""), event.file)
            shown.state, shown.state_tip = f"{what}{pct}", tip  # this file; the bar: all
        shown.bar_tip = tip

    # -- import ---------------------------------------------------------------------------
    @staticmethod
    def importing(count: int, remote: bool) -> str:
        if remote:
            return f"Sending {count} file(s) to the node…"
        return f"Importing {count} file(s)…"

    @staticmethod
    def sending(path: str, sent: int, total: int) -> str:
        return f"Sending {file_name(path)} to the node: {human_bytes(sent)} of {human_bytes(total)}"

    @staticmethod
    def imported(outcomes: Sequence[tuple[str, Any, str]], remote: bool) -> Message:
        good = [p for p, answer, _e in outcomes if answer is not None]
        bad = [(p, e) for p, answer, e in outcomes if answer is None]
        text = f"Imported {len(good)} of {len(outcomes)} file(s)"
        if remote and good:
            text += " into the node's models folder"
        if bad:
            text += ". Not imported: " + "; ".join(f"{file_name(p)}: {e}" for p, e in bad)
        return Message(text + ".", DANGER if bad else NEWS)

    # -- the Hugging Face token (on the node's machine) -----------------------------------
    @staticmethod
    def token_state(status: Mapping[str, Any]) -> tuple[str, str, bool, str]:
        """(what the state says, its tooltip, whether Remove may act, the field's hint)."""
        on = bool(status.get("set"))
        source = status.get("source")
        said = "✓ set" + (" (HF_TOKEN)" if source == "environment" else "") if on else "not set"
        hint = "type a new one to replace it" if on else "for gated models only"
        return said, str(status.get("note") or ""), on and source == "keyring", hint

    # -- adapters (LoRA) ------------------------------------------------------------------
    @staticmethod
    def adapter_row(a: Mapping[str, Any]) -> AdapterRow:
        name = str(a["name"])
        facts = [
            f"{a.get('engine_name') or name} ({(a.get('format') or '?').upper()})",
            a.get("path") or "",
        ]
        if a.get("base_model"):
            facts.append(f"base model: {a['base_model']}")
        if a.get("rank"):
            facts.append(
                f"rank {a['rank']}" + (f", alpha {a['alpha']:g}" if a.get("alpha") else "")
            )
        if a.get("targets"):
            facts.append("changes " + ", ".join(a["targets"]))
        return AdapterRow(
            name=name,
            tooltip="\n".join(f for f in facts if f),
            size=human_bytes(int(a.get("size") or 0)),
            made_for=a.get("made_for") or f"cannot be used: {a.get('problem')}",
            problem=bool(a.get("problem")),
        )

    @staticmethod
    def adapters_note(adapters: Sequence[Mapping[str, Any]], loaded: bool, remote: bool) -> str:
        where = " on the node's machine" if remote else ""
        if adapters:
            used = sum(int(a.get("size") or 0) for a in adapters)
            return (
                f"{len(adapters)} adapter(s), {human_bytes(used)}{where}"
                f" · Compose → Advanced → Adapter uses one"
            )
        if loaded:
            return (
                f"none yet{where}: add a .safetensors LoRA or a PEFT folder made for ACE-Step 1.5"
            )
        return ""

    @staticmethod
    def adding(count: int, remote: bool) -> str:
        if remote:
            return f"Sending {count} adapter(s) to the node…"
        return f"Adding {count} adapter(s)…"

    @staticmethod
    def adapters_added(outcomes: Sequence[tuple[str, Any, str]]) -> Message:
        good = [answer for _p, answer, _e in outcomes if answer is not None]
        bad = [(p, e) for p, answer, e in outcomes if answer is None]
        text = "; ".join(f"Added {a['name']} (made for {a.get('made_for')})" for a in good)
        if bad:
            not_added = "; ".join(_named(file_name(p), e) for p, e in bad)
            text += ("; " if text else "") + "Not added: " + not_added
        return Message(text.rstrip(".") + ".", DANGER if bad else NEWS)

    @staticmethod
    def adapter_removed(name: str, answer: Mapping[str, Any]) -> Message:
        return Message(f"{name} removed, {human_bytes(int(answer.get('freed_bytes') or 0))} freed.")
