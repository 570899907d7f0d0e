"""The model an extract, lego or complete edit runs on, shown in its dialog: a base model
when one is installed (chosen without asking), the Sketch for a Sketch song — and when no
base model is installed, a sentence saying so with its size and a button that pulls it
(the Library's own pull, through the node), its progress, and "ready" when it is.

The node's own refusal (422 naming the base model and its size) is shown the same way, with
the same offer, when it comes before the app knew (:meth:`BaseModelNotice.refused`)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from ..song.edits import base_offer, installed_base, model_for, needs_base
from ..units import human_size


class BaseModelNotice(QWidget):
    changed = Signal()  # the model, or whether an edit can be sent, changed

    def __init__(self, link, task: str, source_model: str | None, parent=None):
        super().__init__(parent)
        self.link = link
        self.task = task
        self.source_model = source_model or None
        self.pulling: str | None = None  # the model being pulled from here
        self.problem = ""  # why nothing can be sent yet ("" = it can)
        self.refusal: str | None = None  # the node's own words, kept until it changes
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.pull = QPushButton()
        self.pull.clicked.connect(self.start_pull)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.text, 1)
        row.addWidget(self.pull)
        link.models.loaded.connect(lambda *_: self.update_state())
        link.pulls.changed.connect(self._pull_event)
        self.update_state()

    # -- what is known --------------------------------------------------------------------
    @property
    def model(self) -> str | None:
        """The model the edit asks for (None: the node's default)."""
        return model_for(self.task, self.source_model, self.link.models.listed)

    @property
    def offer(self):
        """The base model to pull (the node's catalogue entry), when one is missing."""
        return base_offer(self.link.models.listed)

    @property
    def ready(self) -> bool:
        return not self.problem

    def _missing(self) -> bool:
        return (
            needs_base(self.task, self.source_model)
            and bool(self.link.models.listed)
            and installed_base(self.link.models.listed) is None
        )

    def update_state(self) -> None:
        offer = self.offer
        if self.pulling is None and (
            self._missing() or (self.refusal is not None and not self.link.models.listed)
        ):
            self._say_missing(offer, said=self.refusal)
        elif self.pulling is None:
            self.problem = ""
            self.refusal = None
            model = self.model
            if model == "sketch":
                self.text.setText("The Sketch makes this from its own arrangement.")
            elif model and needs_base(self.task, self.source_model):
                self.text.setText(f"Made on the base model {model}.")
            else:
                self.text.setText("")
            self.pull.hide()
        self.changed.emit()

    def _say_missing(self, offer, said: str | None = None) -> None:
        what = {"extract": "Stems", "lego": "Adding a layer", "complete": "Completing a song"}.get(
            self.task, "This"
        )
        if offer is not None:
            size = human_size(offer["download_bytes"]) if offer.get("download_bytes") else ""
            name = offer.get("display_name") or offer["name"]
            self.problem = said or (
                f"{what} need{'s' if what != 'Stems' else ''} a base "
                f"model, and none is installed: {name}, a "
                f"{size + ' ' if size else ''}download."
            )
            self.pull.setText(f"Download it{f' ({size})' if size else ''}")
            self.pull.setEnabled(True)
            self.pull.show()
        else:
            self.problem = said or f"{what} need a base model, and none is installed."
            self.pull.hide()
        self.text.setText(self.problem)

    def refused(self, message: str) -> None:
        """The node refused the edit for want of a base model: its words, and the pull
        (the models are read again: the app's list was older than the node's answer)."""
        self.refusal = message
        self._say_missing(self.offer, said=message)
        self.changed.emit()
        self.link.models.refresh_later()

    # -- the pull -------------------------------------------------------------------------
    def start_pull(self) -> None:
        offer = self.offer
        if offer is None:
            return
        self.pulling = offer["name"]
        self.refusal = None
        self.pull.setEnabled(False)
        self.pull.setText("Downloading…")
        self.text.setText(
            f"Downloading {offer.get('display_name') or offer['name']}… (the Library shows it too)"
        )
        self.link.pulls.pull(offer["name"])
        self.changed.emit()

    def _pull_event(self, name: str, event) -> None:
        if name != self.pulling:
            return
        if event.type == "progress" and event.fraction is not None:
            self.text.setText(
                f"Downloading {name}: {event.fraction * 100:.0f}% of {human_size(event.total)}"
            )
        elif event.type == "done":
            self.pulling = None
            self.text.setText(f"{name} is downloaded; a moment…")  # the link reads the
            #                                       models again: update_state follows
        elif event.type in ("failed", "paused"):
            self.pulling = None
            self.problem = f"The download of {name} stopped: {event.message or event.type}"
            self.text.setText(self.problem)
            self.pull.setText("Try again")
            self.pull.setEnabled(True)
            self.changed.emit()
