"""The Library's "Models on this machine" dialog, without Qt: the ACE-Step files other tools
downloaded (as the node's ``POST /v1/models/find`` lists them), which can be adopted, what
adopting them spares, and what the node did with each (``POST /v1/models/adopt``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..units import human_size
from .messages import DANGER, NEWS, Message

STATE_WORDS = {
    "new": "Can be adopted",
    "in library": "Already in the library",
    "wrong size": "Not the catalogue's file",
    "cannot be checked": "Cannot be checked yet",
}


@dataclass(frozen=True)
class FoundRow:
    """One file found: what the dialog's row shows, and whether it can be picked."""

    path: str  # what to send back to adopt it
    name: str
    where: str  # the tool's folder, e.g. "Hugging Face cache"
    shown: str  # the path as the other tool shows it (the tooltip)
    size: str
    state: str  # the state in words
    note: str
    pickable: bool


def rows(found: Sequence[Mapping[str, Any]]) -> list[FoundRow]:
    """The rows, the files that can be adopted first."""
    made = [
        FoundRow(
            path=str(f.get("shown") or f.get("path")),
            name=str(f.get("name", "")),
            where=str(f.get("where", "")),
            shown=str(f.get("shown", "")),
            size=human_size(int(f.get("size") or 0)),
            state=STATE_WORDS.get(str(f.get("state")), str(f.get("state"))),
            note=str(f.get("note") or ""),
            pickable=f.get("state") == "new",
        )
        for f in found
    ]
    return sorted(made, key=lambda r: (not r.pickable, r.name, r.where))


def summary(found: Sequence[Mapping[str, Any]], picked: Sequence[str]) -> str:
    """The line under the list: how much picking these spares downloading."""
    if not found:
        return (
            "No ACE-Step model files were found in the Hugging Face cache or acestep.cpp's "
            "models folder. Add a folder to look in."
        )
    chosen = [f for f in found if str(f.get("shown") or f.get("path")) in set(picked)]
    if not chosen:
        return f"{len(found)} file(s) found; none picked."
    spared = human_size(sum(int(f.get("size") or 0) for f in chosen))
    return (
        f"{len(chosen)} file(s) picked: {spared} you need not download. Each is checked "
        f"against the catalogue's sha256 and linked into the library (no second copy)."
    )


def adopted(outcomes: Sequence[Mapping[str, Any]]) -> Message:
    """What the node did, for the Library's message line."""
    taken = [o for o in outcomes if o.get("how") in ("linked", "copied")]
    refused = [o for o in outcomes if o.get("how") == "refused"]
    saved = human_size(sum(int(o.get("saved") or 0) for o in outcomes))
    text = f"Adopted {len(taken)} of {len(outcomes)} file(s), {saved} of disk space saved"
    if refused:
        text += ". Refused: " + "; ".join(f"{o.get('name')}: {o.get('note')}" for o in refused)
    return Message(text + ".", DANGER if refused else NEWS)


def may_copy(outcomes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Files refused only because no link could be made (another drive): offered as a copy."""
    return [
        str(o.get("source"))
        for o in outcomes
        if o.get("how") == "refused" and "cannot be linked" in str(o.get("note"))
    ]
