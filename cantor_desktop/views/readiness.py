"""Whether the machine is ready to make songs, and the next safe step, without Qt: what the
readiness banner above the pages says and offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .transfer import human_bytes

READY, NEEDS_DOWNLOAD, NEEDS_SETUP = "ready", "needs download", "needs setup"


def readiness(system: Mapping[str, Any], models: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(state, sentence): ready / needs download / needs setup."""
    ace = [m for m in models if m.get("name") != "sketch" and not m.get("builtin")]
    installed = [m for m in ace if m.get("state") in ("installed", "ready")]
    if installed:
        return READY, f"Ready: {installed[0]['name']} is installed."
    fam = (system.get("families") or system.get("backends") or {}).get("acestep") or {}
    rows = fam.get("backends") or []
    installed_backend = any(isinstance(b, dict) and b.get("installed") for b in rows)
    if installed_backend or fam.get("pinned"):
        return (
            NEEDS_DOWNLOAD,
            "A backend is ready; download an ACE-Step model to make songs with AI.",
        )
    return NEEDS_SETUP, "ACE-Step is not set up yet. The built-in Sketch engine works right now."


@dataclass(frozen=True)
class Banner:
    state: str
    sentence: str
    set_up: str | None  # the set-up button's words (None: nothing to set up)
    title: str | None  # a new title (None: the banner keeps its own)


def banner(system: Mapping[str, Any], models: Sequence[Mapping[str, Any]]) -> Banner:
    """What the banner says and offers: the next step, with the default model's size."""
    state, sentence = readiness(system, models)
    default = next(
        (
            m
            for m in models
            if str(m.get("name", "")).startswith("acestep-v15-turbo") and not m.get("builtin")
        ),
        None,
    )
    size = (default or {}).get("download_bytes") or (default or {}).get("size_bytes")
    gb = f" ({human_bytes(size)})" if size else ""
    if state == READY:
        return Banner(state, sentence, None, "Cantor is ready")
    if state == NEEDS_DOWNLOAD:  # the backend is there: the download is next
        return Banner(state, sentence, f"Download an ACE-Step model{gb}", None)
    set_up = f"Set up ACE-Step: find the best backend, then download a model{gb}"
    return Banner(state, sentence, set_up, None)
