"""Songs as the app shows them, without Qt: one tolerant reader of the node's song JSON."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..nodeclient import check_song_id

FINAL_STATES = ("done", "failed", "cancelled")


def _epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def _files(value: Any) -> list[str]:
    out: list[str] = []
    for item in value or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping):
            path = item.get("audio") or item.get("path") or item.get("file")
            if path:
                out.append(str(path))
    return out


@dataclass
class SongRecord:
    id: str
    state: str = "queued"
    stage: str | None = None
    progress: float = 0.0
    eta: float | None = None
    error: str | None = None
    caption: str = ""
    created: float = 0.0
    duration: float | None = None
    model: str = ""
    seed: int | None = None
    files: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str | None:
        return self.files[0] if self.files else None

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_node(cls, data: Mapping[str, Any]) -> "SongRecord":
        params = dict(data.get("request") or data.get("params") or {})
        first = (data.get("files") or [{}])[0]
        first = first if isinstance(first, Mapping) else {}
        seed = first.get("seed", data.get("seed"))
        if seed is None:
            seed = params.get("seed")
        duration = first.get("duration", data.get("duration"))
        if duration is None:
            duration = params.get("duration")
        return cls(
            id=check_song_id(data.get("id")),
            state=str(data.get("state") or "queued"),
            stage=data.get("stage"),
            progress=float(data.get("progress") or 0.0),
            eta=data.get("eta"),
            error=(data.get("error") or {}).get("message") if isinstance(data.get("error"), Mapping)
            else data.get("error"),
            caption=str(data.get("caption") or params.get("caption") or ""),
            created=_epoch(data.get("created") or data.get("created_at")
                           or data.get("queued_at") or data.get("finished_at")),
            duration=float(duration) if isinstance(duration, (int, float)) else None,
            model=str(data.get("model") or params.get("model") or ""),
            seed=seed if isinstance(seed, int) and seed >= 0 else None,
            files=_files(data.get("files")),
            params=params,
        )

    def apply_event(self, event: str, data: Mapping[str, Any]) -> None:
        """Fold one SSE event (queued, stage, progress, done, failed, cancelled) into the record."""
        if event == "queued":
            self.state = "queued"
        elif event == "stage":
            self.state = "running"
            self.stage = data.get("stage", self.stage)
        elif event == "progress":
            self.state = "running"
            self.stage = data.get("stage", self.stage)
            value = data.get("progress")
            if isinstance(value, (int, float)):
                self.progress = max(self.progress if self.stage == data.get("stage") else 0.0,
                                    float(value))
            self.eta = data.get("eta")
        elif event == "done":
            self.state, self.progress, self.eta = "done", 1.0, 0.0
            if data.get("files"):
                self.files = _files(data.get("files"))
                first = data["files"][0] if isinstance(data["files"][0], Mapping) else {}
                if isinstance(first.get("seed"), int) and first["seed"] >= 0:
                    self.seed = first["seed"]
                if isinstance(first.get("duration"), (int, float)):
                    self.duration = float(first["duration"])
        elif event == "failed":
            err = data.get("error")
            self.state = "failed"
            self.error = err.get("message") if isinstance(err, Mapping) else (err or "failed")
        elif event == "cancelled":
            self.state = "cancelled"

    def when(self) -> str:
        if not self.created:
            return ""
        return _dt.datetime.fromtimestamp(self.created).strftime("%Y-%m-%d %H:%M")

    def status_text(self) -> str:
        if self.state == "queued":
            return "Queued"
        if self.state == "running":
            stage = {"lm": "Writing the arrangement", "synth": "Rendering audio",
                     "saving": "Saving"}.get(self.stage or "", "Working")
            return f"{stage} — {int(self.progress * 100)}%"
        if self.state == "failed":
            return f"Failed: {self.error or 'no reason given'}"
        return self.state.capitalize()
