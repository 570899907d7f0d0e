"""The readiness banner: is the machine ready, and the next safe action — no dead ends."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from ...views.transfer import human_bytes
from ..widgets import heading


def readiness(system: dict, models: list) -> tuple[str, str]:
    """(state, sentence): ready / needs download / needs setup (Qt-free)."""
    ace = [m for m in models if m.get("name") != "sketch" and not m.get("builtin")]
    installed = [m for m in ace if m.get("state") in ("installed", "ready")]
    if installed:
        return "ready", f"Ready: {installed[0]['name']} is installed."
    fam = (system.get("families") or system.get("backends") or {}).get("acestep") or {}
    rows = fam.get("backends") or []
    installed_backend = any(isinstance(b, dict) and b.get("installed") for b in rows)
    if installed_backend or fam.get("pinned"):
        return (
            "needs download",
            "A backend is ready; download an ACE-Step model to make songs with AI.",
        )
    return "needs setup", "ACE-Step is not set up yet. The built-in Sketch engine works right now."


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
        self.state, sentence = readiness(system, models)
        self.sentence.setText(sentence)
        default = next(
            (
                m
                for m in models
                if m.get("name", "").startswith("acestep-v15-turbo") and not m.get("builtin")
            ),
            None,
        )
        size = (default or {}).get("download_bytes") or (default or {}).get("size_bytes")
        gb = f" ({human_bytes(size)})" if size else ""
        if self.state == "needs download":  # the backend is there: the download is next
            self.setup.setText(f"Download an ACE-Step model{gb}")
        else:
            self.setup.setText(f"Set up ACE-Step: find the best backend, then download a model{gb}")
        self.setup.setVisible(self.state != "ready")
        if self.state == "ready":
            self.title.setText("Cantor is ready")
