"""The Songs page's list: one row per take, a play button and a favourite star on each, and a
drag that hands the selected takes' files to another application."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QDrag
from PySide6.QtWidgets import QAbstractItemView, QApplication, QListView, QWidget

from ..views.song_records import Row
from ..views.songs import SongsViewModel
from .song_files import SongFiles
from .songs_model import RowRole, SongDelegate, SongsModel, song_mime_data

if TYPE_CHECKING:
    from .drag_exports import DragExports
    from .stem_set import StemNames


class SongsList(QListView):
    """A list whose drag carries the takes' files as URLs with the copy action only, and
    whose rows have a play button and a favourite star.

    The drag starts from this synchronous mouse handler (never from a coroutine): QDrag.exec
    runs its own loop and blocks. What the drop target answers (even "move") is never acted
    on: the song's file stays where it is.
    """

    play_clicked = Signal(object)  # Row
    star_clicked = Signal(object)  # Row
    drag_note = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._press: QPoint | None = None
        self.files: SongFiles | None = None  # set by the page: where each take's audio is here
        self.exports: DragExports | None = None  # set by the page
        self.stem_names: StemNames | None = None  # set by the page: {title}_{track}
        self.waiting_exports = 0
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setUniformItemSizes(True)  # 10,000 rows lay out in no time
        self.setDragEnabled(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        self.setDefaultDropAction(Qt.DropAction.CopyAction)
        self.last_drag_result: Qt.DropAction | None = None

    def songs(self) -> SongsModel:
        model = self.model()
        assert isinstance(model, SongsModel)
        return model

    def delegate(self) -> SongDelegate:
        delegate = self.itemDelegate()
        assert isinstance(delegate, SongDelegate)
        return delegate

    def selected_rows(self) -> list[Row]:
        rows = [i.data(RowRole) for i in self.selectionModel().selectedRows()]
        model = self.songs()
        return sorted(rows, key=lambda r: model.row_of(r.song.id, r.take.n if r.take else None))

    def drag_paths(self) -> list[str]:
        """The files of the selected takes: exported with the remembered choices when the
        musician asked for that and they are ready; else the files as made (a remote take:
        its fetched copy)."""
        exports = self.exports if self.exports is not None and self.exports.wanted() else None
        paths, waiting = [], 0
        for row in self.selected_rows():
            if row.take is None:
                continue
            if exports is not None:
                found = exports.path(row.song, row.take)
                if found:
                    paths.append(found)
                    continue
                waiting += 1
            if self.files is not None:  # a remote take drags its fetched copy
                found = self.files.ensure(row.song, row.take)
            else:
                found = row.take.audio if os.path.exists(row.take.audio) else None
            if found and self.stem_names is not None:
                found = self.stem_names.named(row.song, row.take, found)
            if found:
                paths.append(found)
        self.waiting_exports = waiting
        return paths

    def drag_mime_data(self):
        paths = self.drag_paths()
        return song_mime_data(paths) if paths else None

    def _drag(self) -> None:
        mime = self.drag_mime_data()
        if self.waiting_exports:
            self.drag_note.emit(SongsViewModel.EXPORT_WAITING)
        if mime is not None:
            drag = QDrag(self)
            drag.setMimeData(mime)
            self.last_drag_result = drag.exec(
                Qt.DropAction.CopyAction
            )  # the answer is never acted on

    def _hit(self, pos: QPoint) -> tuple[str, Row] | None:
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        row: Row = index.data(RowRole)
        rect = self.visualRect(index)
        delegate = self.delegate()
        if row.take is not None and delegate.play_rect(rect).contains(pos):
            return "play", row
        if row.first and delegate.star_rect(rect, delegate.indent(row)).contains(pos):
            return "star", row
        return None

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton:
            hit = self._hit(event.position().toPoint())
            if hit is not None:
                what, row = hit
                self.setCurrentIndex(self.indexAt(event.position().toPoint()))
                (self.play_clicked if what == "play" else self.star_clicked).emit(row)
                return
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        if (
            self._press is not None
            and event.buttons() & Qt.LeftButton
            and (event.position().toPoint() - self._press).manhattanLength()
            >= QApplication.startDragDistance()
        ):
            self._press = None
            self._drag()
            return
        super().mouseMoveEvent(event)

    def startDrag(self, actions):
        self._drag()
