"""How fast each backend really is on this machine, measured in the songs it made.

Every finished song on an ACE-Step engine tells the node its DiT's seconds per diffusion
step (the time between the engine's ``[DiT] Step k/N`` lines); :func:`record` keeps the
last :data:`KEPT` of each backend in ``state/backend-speeds.json``. A step's cost grows with
the length of the audio, so each figure is brought to one minute of audio before they are
compared (:func:`summary`). The backends' status shows the figure, and says so when a GPU
backend measured slower than the CPU here (a software device, a silent fall-back to the
CPU inside a GPU build): then the CPU is the faster choice.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..files import write_atomic
from ..system.paths import paths

FILE = "backend-speeds.json"
KEPT = 20  # measurements kept per backend (the newest)
SLOWER_BY = 1.25
"""A GPU backend counts as slower than the CPU when its figure is at least this much higher."""


@dataclass(frozen=True)
class Speed:
    """What a backend measured here: seconds per diffusion step for a minute of audio (the
    median of its last songs), over how many songs, and of which models."""

    seconds_per_step: float
    songs: int
    models: tuple[str, ...]
    at: float  # the newest measurement (time.time())

    def words(self) -> str:
        models = ", ".join(self.models)
        return (
            f"{self.seconds_per_step:.2f} s a diffusion step for a minute of audio "
            f"(measured in {self.songs} song{'s' if self.songs != 1 else ''}: {models})"
        )

    def to_dict(self) -> dict:
        return {
            "seconds_per_step": round(self.seconds_per_step, 4),
            "songs": self.songs,
            "models": list(self.models),
            "at": self.at,
        }


def _path() -> Path:
    return paths().state_dir / FILE


def _read() -> dict:
    try:
        found = json.loads(_path().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def record(
    family: str, backend: str, model: str, seconds_per_step: float, audio_seconds: float
) -> None:
    """One song's measurement (its DiT's seconds per step, the length of its audio)."""
    if seconds_per_step <= 0 or audio_seconds <= 0:
        return
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=30):
        doc = _read()
        kept = doc.setdefault(family, {}).setdefault(backend, [])
        kept.append(
            {
                "model": model,
                "seconds_per_step": round(seconds_per_step, 4),
                "audio_seconds": round(audio_seconds, 2),
                "at": time.time(),
            }
        )
        del kept[:-KEPT]
        write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


def summary(family: str, backend: str) -> Speed | None:
    """The backend's measured speed here, or None when no song has measured it."""
    rows = [
        r
        for r in _read().get(family, {}).get(backend, [])
        if isinstance(r, dict) and r.get("seconds_per_step") and r.get("audio_seconds")
    ]
    if not rows:
        return None
    per_minute = [float(r["seconds_per_step"]) * 60.0 / float(r["audio_seconds"]) for r in rows]
    return Speed(
        seconds_per_step=statistics.median(per_minute),
        songs=len(rows),
        models=tuple(dict.fromkeys(str(r.get("model", "")) for r in rows)),
        at=max(float(r.get("at") or 0) for r in rows),
    )


def slower_than_cpu(family: str, backend: str) -> tuple[Speed, Speed] | None:
    """(this backend's speed, the CPU's) when a GPU backend measured slower than the CPU."""
    if backend == "cpu":
        return None
    mine, cpu = summary(family, backend), summary(family, "cpu")
    if mine is None or cpu is None or mine.seconds_per_step < cpu.seconds_per_step * SLOWER_BY:
        return None
    return mine, cpu
