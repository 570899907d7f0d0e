"""Hardware & Backends without Qt: the node's machine in words, a row per backend (its
state, its evidence, what it offers), and a backend action followed from its events (what
the page's log says, how far it is, what comes next).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import config
from .transfer import human_bytes

FAMILY = "acestep"


def family_status(system: Mapping[str, Any]) -> dict[str, Any]:
    """The family's backend status from /v1/system (``families`` or the older ``backends``)."""
    fam = (system.get("families") or {}).get(FAMILY)
    if fam is None:
        fam = (system.get("backends") or {}).get(FAMILY) or {}
        status = fam.get("status")
        if isinstance(status, dict):
            fam = {**status, **{k: v for k, v in fam.items() if k != "status"}}
    return dict(fam)


def backend_rows(system: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One dict per backend: name, state, evidence, reason, pinned, default."""
    hw = system.get("hardware") or {}
    evidence = hw.get("backends") or {}
    fam = family_status(system)
    listed = fam.get("backends") or []
    status = (
        {b.get("name"): b for b in listed if isinstance(b, dict)}
        if isinstance(listed, list)
        else dict(listed)
    )
    known = bool(evidence or status)  # nothing yet: the node has not described the machine
    rows = []
    for name in config.BACKENDS:
        ev = evidence.get(name) or {}
        st = status.get(name) or {}
        if not known:
            state = "unknown"
        else:  # not installed but this machine can run it: it can be installed
            state = st.get("state") or (
                "installable" if ev.get("supported", name == "cpu") else "unsupported"
            )
            if state == "available":
                state = "installable"
        supported = known and state != "unsupported" and bool(ev.get("supported", True))
        rows.append(
            {
                "name": name,
                "state": str(state).replace("_", " "),
                "evidence": "; ".join(st.get("evidence") or ev.get("evidence") or []),
                "reason": st.get("message") or ev.get("reason") or "",
                "version": st.get("version") or "",
                "pinned": fam.get("pinned") == name or bool(st.get("pinned")),
                "default": fam.get("default") == name,
                "installed": bool(st.get("installed")),
                "supported": supported,
                "measured": st.get("measured") or None,
                "software": str(st.get("software") or ev.get("software") or ""),
            }
        )
    _compare_speeds(rows)
    return rows


SLOWER_BY = 1.2
"""A backend measured this many times slower than the fastest one here is said to be slower."""


def _per_step(row: Mapping[str, Any]) -> float:
    measured = row.get("measured")
    if isinstance(measured, Mapping):
        return float(measured.get("seconds_per_step") or 0.0)
    return 0.0


def _compare_speeds(rows: list[dict[str, Any]]) -> None:
    """Mark each backend measured clearly slower than the fastest one measured here with
    ``slower``: (the faster backend, how many times slower)."""
    timed = [r for r in rows if _per_step(r) > 0]
    if len(timed) < 2:
        return
    fastest = min(timed, key=_per_step)
    for row in timed:
        ratio = _per_step(row) / _per_step(fastest)
        if row is not fastest and ratio >= SLOWER_BY:
            row["slower"] = (fastest["name"], ratio)


def speed_words(row: Mapping[str, Any]) -> str:
    """What the row says first: its speed measured in this machine's songs, and the
    software device it would run on (a GPU backend that computes on the CPU)."""
    said = []
    measured = row.get("measured")
    if isinstance(measured, Mapping) and measured.get("seconds_per_step"):
        songs = int(measured.get("songs") or 0)
        said.append(
            f"{float(measured['seconds_per_step']):.2f} s a step for a minute of song, "
            f"measured here ({songs} song{'s' if songs != 1 else ''})"
        )
    slower = row.get("slower")
    if slower:
        faster, ratio = slower
        said.append(f"{ratio:.1f}× slower than {faster} here: Use {faster}")
    if row.get("software"):
        said.append(f"software device ({row['software']}): it computes on the CPU")
    return " · ".join(said)


def machine_text(system: Mapping[str, Any]) -> str:
    hw = system.get("hardware") or {}
    if not hw:
        return "Waiting for the node to describe this machine…"
    if "error" in hw:
        return f"Could not read the hardware: {hw['error']}"
    lines = [
        f"<b>{hw.get('os', '?')} · {hw.get('arch', '?')}</b>",
        f"CPU: {hw.get('cpu_name') or 'unknown'}"
        + (f" ({', '.join(hw.get('cpu_features') or [])})" if hw.get("cpu_features") else ""),
        f"Memory: {human_bytes(hw.get('ram_bytes'))}",
    ]
    gpus = hw.get("gpus") or []
    if not gpus:
        lines.append("GPUs: none found")
    for g in gpus:
        vram = f", {g['vram_mib'] / 1024:.1f} GiB VRAM" if g.get("vram_mib") else ""
        drv = f", driver {g['driver']}" if g.get("driver") else ""
        lines.append(f"GPU: {g.get('name', '?')} ({g.get('vendor', '')}{drv}{vram})")
    return "<br>".join(lines)


EVENT_MARKS = {"rejected": "✗ ", "failed": "✗ ", "skipped": "– ", "chosen": "✓ ", "done": "✓ "}
NEXT = "Next: download an ACE-Step model in Library (the built-in Sketch engine works meanwhile)."


def cell_text(row: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """A backend row's cells: (name, state, what the evidence column shows, its tooltip)."""
    name = (
        row["name"]
        + ("  (pinned)" if row["pinned"] else "")
        + ("  (auto choice)" if row["default"] and not row["pinned"] else "")
    )
    state = row["state"] + (f" {row['version']}" if row["version"] and row["installed"] else "")
    shown = (
        row["evidence"]
        if row["supported"] and row["evidence"]
        else (
            row["reason"]
            or row["evidence"]
            or ("waiting for the node" if row["state"] == "unknown" else "")
        )
    )
    if row["state"] == "rejected":  # the engine's own reason, first
        shown = row["reason"]
    first = speed_words(row)
    if first:  # what this machine measured is the first thing to read
        shown = first + (" · " + shown if shown else "")
    tip = row["evidence"] + ("\n" + row["reason"] if row["reason"] else "")
    return name, state, shown, tip


def row_offer(row: Mapping[str, Any]) -> tuple[str, str, str | None, bool, bool]:
    """What a backend row offers: (its button, the button's tooltip, the backend it uses —
    None unpins —, whether it may act, whether Update is offered too)."""
    installed = row["installed"] or row["state"] in ("installed", "ready", "in use")
    if row["pinned"]:
        return "Unpin (auto)", "", None, True, installed
    if row["state"] == "rejected":
        tip = "Fetch this backend again, trial-load it, and pin it if it works"
        return "Try again", tip, row["name"], bool(row["supported"]), installed
    tip = "Fetch this backend if needed, check that it loads, and pin it"
    label = "Use" if installed else "Install && use"
    return label, tip, row["name"], bool(row["supported"]), installed


def model_ready(models: Sequence[Mapping[str, Any]]) -> bool:
    """An ACE-Step model is on the node (the Sketch does not count)."""
    return any(
        m.get("state") in ("installed", "ready")
        and m.get("name") != "sketch"
        and not m.get("builtin")
        for m in models
    )


@dataclass
class EventShown:
    """What one of the action's events changes: lines for the log, the progress (0–1000),
    and at the end the failure (``why``, worded by the page) and the controls back."""

    lines: list[str] = field(default_factory=list)
    scroll: bool = False  # the log shows its last line (an event, or Done)
    progress: int | None = None
    ended: bool = False
    failed: str | None = None  # why the action could not be done ("" : said in the log)


class HardwareViewModel:
    def __init__(self) -> None:
        self.running_key: str | None = None  # the action running (its task's key)
        self.running_action: str | None = None
        self._backend: str | None = None

    def start(self, action: str, backend: str | None, key: str) -> str:
        """The action started: what the log says."""
        self.running_key, self.running_action, self._backend = key, action, backend
        if action == "use":
            return f"Switching to {backend}…" if backend else "Unpinning: back to auto…"
        if action == "update":
            return "Updating the installed backends…"
        return "Finding the best backend…"

    @staticmethod
    def what(action: str | None, backend: str | None = None) -> str:
        """An action as what could not be done ("find the best backend")."""
        if action == "use":
            return f"switch to {backend}" if backend else "unpin the backend"
        return "update the backends" if action == "update" else "find the best backend"

    @property
    def running_what(self) -> str:
        return self.what(self.running_action, self._backend)

    def event(self, event: Mapping[str, Any], models: Sequence[Mapping[str, Any]]) -> EventShown:
        shown = EventShown()
        state = event.get("state")
        if state in ("done", "failed", "cancelled"):
            shown.ended = True
            if state == "done":
                shown.lines.append("Done.")
                shown.scroll = True
                if self.running_action in ("find", "use") and not model_ready(models):
                    shown.lines.append(NEXT)
            else:
                shown.lines.append(f"{str(state).capitalize()}.")
                if state == "failed" and event.get("error"):
                    shown.failed = str(event["error"])
            self.running_key = None
            return shown
        done, total = event.get("done") or event.get("received"), event.get("total")
        if isinstance(done, (int, float)) and total:
            shown.progress = int(1000 * done / total)
        elif isinstance(event.get("progress"), (int, float)):
            shown.progress = int(1000 * event["progress"])
        text = event.get("message") or event.get("reason")
        backend = event.get("backend")
        kind = event.get("kind") or event.get("event") or ""
        if text and (kind != "download" or event.get("progress") in (None, 0)):
            mark = EVENT_MARKS.get(kind, "")
            prefix = f"{backend}: " if backend and not str(text).startswith(f"{backend}:") else ""
            shown.lines.append(f"{mark}{prefix}{text}")
            shown.scroll = True
        return shown
