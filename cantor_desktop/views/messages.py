"""What a page says on its message line, and the one way every page words an error: what
could not be done, then why ("Could not remove the model: the node is not running")."""

from __future__ import annotations

from dataclasses import dataclass

NOT_RUNNING = "The node is not running; start it from the tray or the status bar"
"""Why nothing can be asked of the node now, and what to do."""
NEWS, WARNING, DANGER = None, "warning", "danger"
"""The tones of a message: the line's own, a warning, an error (ui.theme's tones)."""


def failure(what: str, why: str) -> str:
    """An error as every page words it: ``what`` could not be done (a verb phrase: "save the
    token"), and why (the node's words, or the app's)."""
    why = why.strip()
    return f"Could not {what}: {why}" if why else f"Could not {what}."


@dataclass(frozen=True)
class Message:
    """A line for a page's message line: its text and its tone."""

    text: str
    tone: str | None = NEWS

    @classmethod
    def failed(cls, what: str, why: str) -> Message:
        return cls(failure(what, why), DANGER)


NOTHING = Message("")
