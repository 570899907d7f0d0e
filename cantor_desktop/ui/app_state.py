"""What the app remembers about its own use (not settings): hints already shown, and the
like. A small JSON file in the state folder, written atomically; a damaged file counts as
empty."""

from __future__ import annotations

import json
from typing import Any

from ..files import write_atomic
from ..system.paths import paths


def _file():
    return paths().app_state_file


def load() -> dict[str, Any]:
    try:
        data = json.loads(_file().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remember(key: str, value: Any) -> None:
    data = load()
    data[key] = value
    write_atomic(_file(), json.dumps(data, indent=1).encode("utf-8"))


def once(key: str) -> bool:
    """True the first time it is asked for ``key`` (ever, on this machine), then False."""
    if load().get(key):
        return False
    try:
        remember(key, True)
    except OSError:
        pass
    return True
