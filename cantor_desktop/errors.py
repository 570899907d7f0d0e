"""The one root of Cantor's own errors: each carries a message written for the person using
Cantor (what went wrong, and what to do), which the app and the CLI show as it is."""

from __future__ import annotations

from typing import Any


class CantorError(Exception):
    """An error whose message is meant for the user as it stands."""

    @property
    def user_message(self) -> str:
        return str(self).strip() or type(self).__name__


def short_repr(value: Any, limit: int = 60) -> str:
    """repr() cut to a readable length: an error about a 1 MB value must not be 1 MB long,
    and a message about a file quotes only the start of what the file said. Strings and
    bytes are cut before they are repr'd (a 64 MB string costs no 64 MB repr)."""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def short_text(text: str, limit: int = 80) -> str:
    """``text`` as it is, cut to ``limit`` characters (marked with …) when longer."""
    return text if len(text) <= limit else text[:limit] + "…"
