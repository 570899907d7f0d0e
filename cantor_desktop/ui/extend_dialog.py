"""Extend…: what is added after a take, and what it sings. Empty lyrics continue the music
(the engine's own extend); lines to sing make a continuation that sings them, hearing the
song's last seconds (see ``cantor_desktop/node/continuation.py``)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from ..song.request import CONTEXT_DEFAULT, CONTEXT_RANGE


class ExtendDialog(QDialog):
    """Asks for the new part's lyrics and context; ``chosen`` says them on Extend."""

    chosen = Signal(str, float)  # lyrics ("" for none), seconds of the song heard

    def __init__(self, described: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(self.tr("Extend"))
        body = QVBoxLayout(self)
        intro = QLabel(described)
        intro.setWordWrap(True)
        body.addWidget(intro)
        form = QFormLayout()
        self.lyrics = QPlainTextEdit()
        self.lyrics.setTabChangesFocus(True)
        self.lyrics.setPlaceholderText(
            self.tr("Leave empty to continue the music without new words")
        )
        self.lyrics.setAccessibleName(self.tr("Lyrics for the new part"))
        lyrics_label = QLabel(self.tr("&Lyrics for the new part"))
        lyrics_label.setBuddy(self.lyrics)
        form.addRow(lyrics_label, self.lyrics)
        self.context = QDoubleSpinBox()
        self.context.setRange(*CONTEXT_RANGE)
        self.context.setDecimals(0)
        self.context.setValue(CONTEXT_DEFAULT)
        self.context.setSuffix(self.tr(" s"))
        self.context.setAccessibleName(self.tr("Seconds of the song the new part hears"))
        self.context.setToolTip(
            self.tr("The new part takes its voice and sound from this much of the song's end")
        )
        context_label = QLabel(self.tr("&Hear the song's last"))
        context_label.setBuddy(self.context)
        form.addRow(context_label, self.context)
        body.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.go = buttons.addButton(self.tr("Extend"), QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        body.addWidget(buttons)
        self.lyrics.textChanged.connect(self._update)
        self._update()
        self.lyrics.setFocus()

    def _update(self) -> None:
        self.context.setEnabled(bool(self.lyrics.toPlainText().strip()))

    def accept(self) -> None:
        self.chosen.emit(self.lyrics.toPlainText().strip(), float(self.context.value()))
        super().accept()
