"""Styles as the app words them, without Qt: the picker's entries, what applying one says,
and what a style this node lacks a part of needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .messages import NEWS, WARNING, Message

NO_STYLE = "No style"


def entries(styles: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(text shown, style name) for the picker, "No style" first; a style missing a part
    here says so in its entry."""
    out = [(NO_STYLE, "")]
    for s in styles:
        name = str(s.get("name", ""))
        out.append((f"{name} (needs a part)" if s.get("missing") else name, name))
    return out


def applied(style: Mapping[str, Any]) -> Message:
    """What the Compose page says once a style filled the form."""
    name = style.get("name", "")
    needs = [str(n.get("text")) for n in style.get("missing") or [] if isinstance(n, Mapping)]
    if needs:
        return Message(
            f"Style {name} applied, but this node lacks {'; '.join(needs)}: pull or add it "
            f"in the Library, or choose another in the form",
            WARNING,
        )
    parts = (
        "caption, settings and reference sound"
        if style.get("reference")
        else ("caption and settings")
    )
    return Message(f"Style {name} applied: its {parts} are in the form, yours to change", NEWS)


def saved(style: Mapping[str, Any]) -> Message:
    return Message(f"Saved style {style.get('name', '')}: choose it under Style in Compose")
