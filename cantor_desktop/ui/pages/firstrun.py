"""The readiness banner: is the machine ready, and the next safe action — no dead ends
(what it says is :mod:`cantor_desktop.views.readiness`'s)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from ...views.readiness import banner
from ..widgets import heading


class ReadinessBanner(QFrame):
    try_sketch = Signal()
    set_up = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("readiness")
        self._colour()
        row = QHBoxLayout(self)
        text = QVBoxLayout()
        self.title = heading("Welcome to Cantor")
        self.sentence = QLabel("Checking this machine…")
        self.sentence.setWordWrap(True)
        text.addWidget(self.title)
        text.addWidget(self.sentence)
        row.addLayout(text, 1)
        self.sketch = QPushButton("Try the built-in Sketch engine now")
        self.setup = QPushButton("Set up ACE-Step")
        self.dismiss = QPushButton("✕")
        self.dismiss.setFlat(True)
        self.dismiss.setFixedWidth(28)
        self.dismiss.setAccessibleName("Dismiss")  # not the bare symbol, to a screen reader
        self.dismiss.setToolTip("Hide this message")
        row.addWidget(self.sketch)
        row.addWidget(self.setup)
        row.addWidget(self.dismiss)
        self.sketch.clicked.connect(self.try_sketch)
        self.setup.clicked.connect(self.set_up)
        self.dismiss.clicked.connect(self.hide)
        self.state = "unknown"

    def _colour(self) -> None:
        """A panel of the scheme's own, its text in the panel's text colour (from the
        palette: a style sheet would load Qt's style-sheet engine at start, ~0.4 MiB)."""
        from .. import theme

        theme.paint_panel(self, "info")

    def update_from(self, system: dict, models: list) -> None:
        shown = banner(system, models)
        self.state = shown.state
        self.sentence.setText(shown.sentence)
        if shown.set_up is not None:
            self.setup.setText(shown.set_up)
        self.setup.setVisible(shown.set_up is not None)
        if shown.title is not None:
            self.title.setText(shown.title)
