"""Add a layer… (``lego``: one instrument added to a take, in the waveform's selected region
or over the whole song) and Complete… (``complete``: the take is a part — a vocal, a drum
loop — and the rest of the song is written around it). Each sends one request, a version of
the take; both need a base model (:class:`.base_model_notice.BaseModelNotice`)."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QFormLayout, QLineEdit

from ..song.edits import TRACK_WORDS, edit_request
from ..song.record import Song, Take
from ..song.request import TRACKS
from ..views.messages import DANGER
from .take_edit_dialog import TakeEditDialog
from .widgets import ComboBox

WORDS = {
    "lego": (
        "Add a layer",
        "add the layer",
        "Add one instrument to “{name}”, in its tempo and key.",
        "Instrument",
        "How it should sound, e.g. clean funk guitar, off-beat chops",
        "Add it",
    ),
    "complete": (
        "Complete",
        "complete the song",
        "“{name}” is a part: write the rest of the song around it.",
        "This part is",
        "The song to make around it, e.g. warm indie pop, drums, bass, piano",
        "Complete it",
    ),
}


class PartDialog(TakeEditDialog):
    def __init__(
        self,
        link,
        song: Song,
        take: Take,
        task: str,
        region: tuple[float, float] | None = None,
        parent=None,
    ):
        if task not in WORDS:
            raise ValueError(f"not a part task: {task}")
        title, self.what, intro, track_label, placeholder, button = WORDS[task]
        super().__init__(link, song, take, title, parent)
        self.task = task
        self.sent: Song | None = None
        self.add_text(intro.format(name=self.take_name))
        form = QFormLayout()
        self.track = ComboBox()
        for track in TRACKS:
            self.track.addItem(TRACK_WORDS[track].capitalize(), track)
        self.track.setCurrentIndex(TRACKS.index("guitar" if task == "lego" else "vocals"))
        form.addRow(track_label, self.track)
        self.caption = QLineEdit(song.caption if task == "complete" else "")
        self.caption.setPlaceholderText(placeholder)
        form.addRow("Caption", self.caption)
        self.region = None
        if task == "lego":
            self.region = QCheckBox()
            if region is not None:
                self.region.setText(
                    f"Only from {region[0]:.1f} s to {region[1]:.1f} s (the selection)"
                )
                self.region.setChecked(True)
                self.region_seconds = region
            else:
                self.region.setText(
                    "Over the whole song (select a part of the waveform first to add it only there)"
                )
                self.region.setEnabled(False)
            form.addRow("Where", self.region)
        self.body.addLayout(form)
        self.go = self.finish(task, button)
        self.caption.textChanged.connect(self._update)
        self._update()

    def _update(self, *_) -> None:
        self.go.setEnabled(
            bool(self.caption.text().strip())
            and self.notice.ready
            and not self.tasks.running("part")
        )

    def request(self) -> dict:
        fields = {
            "caption": self.caption.text().strip(),
            "track": self.track.currentData(),
            "model": self.notice.model,
        }
        if self.region is not None and self.region.isChecked():
            start, end = self.region_seconds
            fields["region"] = {"start": start, "end": end}
        return edit_request(
            self.task, {"song": self.song.id, "take": self.take.n}, self.song.request, **fields
        )

    def submit(self) -> None:
        from ..song.request import RequestError, validate

        request = self.request()
        try:
            validate(request)
        except RequestError as exc:
            self.note.say(str(exc), DANGER)
            return
        self.note.say("Sending it to the node…")
        self.tasks.start(
            "part", self.link.songs.submit(request), on_done=self._sent, on_error=self._failed
        )
        self._update()

    def _sent(self, song: Song) -> None:
        self.sent = song
        self.note.say(f"{self.windowTitle()}: queued; the new version appears under the song.")
        self.accept()

    def _failed(self, text: str) -> None:
        self.refused(text, self.what)


def open_for(page, row, task: str) -> PartDialog | None:
    """Add a layer… / Complete… for a row of the Songs page (a finished take); a layer
    takes the waveform's selected region."""
    if row is None or row.take is None:
        return None
    region = page.editor.region if task == "lego" and page.editor.repaintable else None
    dialog = PartDialog(page.link, row.song, row.take, task, region, page)
    dialog.accepted.connect(lambda: page.note.say(dialog.note.text()))
    dialog.open()
    return dialog
