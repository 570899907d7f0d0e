"""The one way a page (or a dialog) shows what happened and what went wrong: a line of
plain text under its work. News reads in the line's own tone; an error in the danger tone,
worded as every page words it (:func:`cantor_desktop.views.messages.failure`)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from ..views.messages import DANGER, Message, failure
from . import theme
from .announce import announce


class MessageLine(QLabel):
    def __init__(
        self,
        tone: str | None = None,
        *,
        hide_when_empty: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.news_tone = tone  # the tone of news on this page (None: the palette's text)
        self.hide_when_empty = hide_when_empty
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)  # the node's words are text, never markup
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        theme.tone(self, tone)
        self.setVisible(not hide_when_empty)

    def say(self, text: str, tone: str | None = None) -> None:
        """News (or, with ``tone``, a warning or an error already worded)."""
        theme.tone(self, tone or self.news_tone)
        if text and text != self.text():
            announce(self, text, urgent=tone == DANGER)  # heard, not only seen
        self.setText(text)
        if self.hide_when_empty:
            self.setVisible(bool(text))

    def show_message(self, message: Message) -> None:
        self.say(message.text, message.tone)

    def fail(self, what: str, why: str) -> None:
        """``what`` could not be done (a verb phrase: "save the token"), and why."""
        self.say(failure(what, why), DANGER)

    def clear(self) -> None:
        self.say("")
