"""What the Songs page's edit dialogs (Stems…, Add a layer…, Complete…) share: the take they
act on, a base-model notice, a note line, Cancel and the dialog's action; the node's
refusal shown where it helps; work still running cancelled when the dialog closes."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout

from ..song.record import Song, Take
from .base_model_notice import BaseModelNotice
from .message_line import MessageLine
from .tasks import Tasks


class TakeEditDialog(QDialog):
    def __init__(self, link, song: Song, take: Take, title: str, parent=None):
        super().__init__(parent)
        self.link, self.song, self.take = link, song, take
        self.tasks = Tasks()
        self.setWindowTitle(title)
        self.body = QVBoxLayout(self)

    @property
    def take_name(self) -> str:
        """The song's name, and its take when it has several."""
        return self.song.name + (f" (take {self.take.n})" if len(self.song.takes) > 1 else "")

    def add_text(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        self.body.addWidget(label)
        return label

    def finish(self, task: str, action: str) -> QPushButton:
        """The notice for ``task``'s model, the note line and the buttons; the action button."""
        self.notice = BaseModelNotice(self.link, task, self.song.model, self)
        self.notice.changed.connect(self._update)
        self.body.addWidget(self.notice)
        self.note = MessageLine()
        self.body.addWidget(self.note)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        button = self.buttons.addButton(action, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.submit)
        self.buttons.rejected.connect(self.reject)
        self.body.addWidget(self.buttons)
        return button

    def refused(self, text: str, what: str) -> None:
        """The node refused ``what`` (a verb phrase: "make the stems"): a missing base model
        is the notice's to explain."""
        if "base model" in text:
            self.notice.refused(text)
            self.note.fail(what, "it needs a base model (see above)")
        else:
            self.note.fail(what, text)
        self._update()

    def _update(self, *_) -> None:
        raise NotImplementedError

    def submit(self) -> None:
        raise NotImplementedError

    def done(self, result: int) -> None:  # noqa: A003 — QDialog API
        if result != QDialog.DialogCode.Accepted:
            self.tasks.cancel_all()
        super().done(result)
