"""Stems…: choose the tracks (or all) of a take to pull out, one ``extract`` song per track,
each a version of the take titled ``{title}_{track}`` (so it lists, exports and drags under
that name). Needs a base model; without one the dialog says so with its size and offers the
pull (:class:`.base_model_notice.BaseModelNotice`)."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QGridLayout

from ..song.edits import TRACK_WORDS, edit_request, stem_title
from ..song.record import Song, Take
from ..song.request import TRACKS
from .take_edit_dialog import TakeEditDialog


class StemsDialog(TakeEditDialog):
    def __init__(self, link, song: Song, take: Take, parent=None):
        super().__init__(link, song, take, "Stems", parent)
        self.queued: list[Song] = []
        self.add_text(
            f"Pull tracks out of “{self.take_name}” as stems. Each is a new version "
            f"under the song, named "
            f"{stem_title(song.title, song.caption, '<track>')}."
        )
        layout = self.body
        self.all = QCheckBox("All twelve")
        self.all.setTristate(False)
        layout.addWidget(self.all)
        grid = QGridLayout()
        self.boxes: dict[str, QCheckBox] = {}
        for i, track in enumerate(TRACKS):
            box = QCheckBox(TRACK_WORDS[track].capitalize())
            box.toggled.connect(self._boxes_changed)
            self.boxes[track] = box
            grid.addWidget(box, i // 3, i % 3)
        layout.addLayout(grid)
        self.all.clicked.connect(self._all_clicked)
        self.make = self.finish("extract", "Make stems")
        from ..views.song_records import instrumental

        first = ("drums", "bass") if instrumental(song) else ("vocals", "drums", "bass")
        self.choose(first)  # a musician's usual first stems
        self._update()

    # -- choices ----------------------------------------------------------------------------
    def tracks(self) -> list[str]:
        return [t for t in TRACKS if self.boxes[t].isChecked()]

    def choose(self, tracks) -> None:
        for track, box in self.boxes.items():
            box.setChecked(track in tracks)

    def _all_clicked(self, checked: bool) -> None:
        self.choose(TRACKS if checked else ())

    def _boxes_changed(self, *_) -> None:
        self.all.setChecked(len(self.tracks()) == len(TRACKS))
        self._update()

    def _update(self) -> None:
        n = len(self.tracks())
        self.make.setText(f"Make {n} stem{'s' if n != 1 else ''}" if n else "Make stems")
        self.make.setEnabled(bool(n) and self.notice.ready and not self.tasks.running("stems"))

    def requests(self) -> list[dict]:
        """One extract request per chosen track, on the notice's model."""
        source = {"song": self.song.id, "take": self.take.n}
        return [
            edit_request(
                "extract",
                source,
                self.song.request,
                caption=self.song.caption or self.song.name,
                track=track,
                model=self.notice.model,
            )
            for track in self.tracks()
        ]

    # -- sending ----------------------------------------------------------------------------
    def submit(self) -> None:
        requests = self.requests()
        if not requests or not self.notice.ready:
            return
        self.note.say(f"Sending {len(requests)} stem(s) to the node…")
        self.tasks.start("stems", self._send(requests), on_done=self._sent, on_error=self._failed)
        self._update()

    async def _send(self, requests: list[dict]) -> list[Song]:
        """Queue every stem (the node runs them back to back on one encoding of the take)
        and title each; a refusal stops the rest and leaves what was queued queued."""
        for request in requests:
            song = await self.link.songs.submit(request)
            self.queued.append(song)
            self.link.songs.change(
                song.id, title=stem_title(self.song.title, self.song.caption, request["track"])
            )
        return self.queued

    def _sent(self, songs: list[Song]) -> None:
        self.note.say(f"{len(songs)} stem(s) queued; they appear under the song.")
        self.accept()

    def _failed(self, text: str) -> None:
        done = f" ({len(self.queued)} queued before that)" if self.queued else ""
        self.refused(text, f"make the stems{done}")


def open_for(page, row) -> StemsDialog | None:
    """Stems… for a row of the Songs page (a finished take)."""
    if row is None or row.take is None:
        return None
    dialog = StemsDialog(page.link, row.song, row.take, page)
    dialog.accepted.connect(lambda: page.note.say(dialog.note.text()))
    dialog.open()
    return dialog
