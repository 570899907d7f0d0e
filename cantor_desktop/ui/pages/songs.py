"""Songs: every song made, newest first, with waveform, player, reveal, re-use, trash, drag out."""

from __future__ import annotations

import os
import subprocess
import sys

from PySide6.QtCore import QFile, QPoint, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QDrag, QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QHBoxLayout, QLabel, QListView,
                               QMenu, QMessageBox, QPushButton, QSlider, QVBoxLayout, QWidget)

from ..song_records import SongRecord
from ..player import Player
from ..song_files import SongFiles, node_file_name
from ..songs_model import RecordRole, SongDelegate, SongsModel, WaveformStore, song_mime_data
from . import page_header
from ..transfer import human_duration


class SongsView(QListView):
    """A list whose drag carries the song files as URLs with the copy action only.

    The drag starts from this synchronous mouse handler (never from a coroutine): QDrag.exec
    runs its own loop and blocks.
    """

    def __init__(self, parent=None):
        super().__init__(parent)
        self._press: QPoint | None = None
        self.files: SongFiles | None = None  # set by the page: where each song's audio is here
        self.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.setUniformItemSizes(True)
        self.setDragEnabled(True)
        self.setDragDropMode(QAbstractItemView.DragOnly)
        self.setDefaultDropAction(Qt.CopyAction)

    def selected_records(self) -> list[SongRecord]:
        return [i.data(RecordRole) for i in self.selectionModel().selectedRows()]

    def drag_mime_data(self):
        if self.files is not None:  # a remote song drags its fetched copy (fetch if missing)
            found = [self.files.ensure(r) for r in self.selected_records()]
            paths = [p for p in found if p]
        else:
            paths = [r.path for r in self.selected_records() if r.path and os.path.exists(r.path)]
        return song_mime_data(paths) if paths else None

    def mousePressEvent(self, event):  # noqa: N802
        if event.button() == Qt.LeftButton:
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):  # noqa: N802
        if (self._press is not None and event.buttons() & Qt.LeftButton and
                (event.position().toPoint() - self._press).manhattanLength()
                >= QApplication.startDragDistance()):
            self._press = None
            mime = self.drag_mime_data()
            if mime is not None:
                drag = QDrag(self)
                drag.setMimeData(mime)
                drag.exec(Qt.CopyAction)
            return
        super().mouseMoveEvent(event)

    def startDrag(self, actions):  # noqa: N802 — Qt's own drag would offer a move
        mime = self.drag_mime_data()
        if mime is not None:
            drag = QDrag(self)
            drag.setMimeData(mime)
            drag.exec(Qt.CopyAction)


class SongsPage(QWidget):
    use_settings = Signal(object)  # SongRecord

    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.model = SongsModel(self)
        self.store = WaveformStore(self)
        self.files = SongFiles(link, self)
        self.delegate = SongDelegate(self.store, self, files=self.files)
        self._play_when_fetched: str | None = None
        self.playing: SongRecord | None = None
        self._player = Player(self)
        self._player.position_changed.connect(self._position)
        self._player.state_changed.connect(self._player_state)

        layout = QVBoxLayout(self)
        self.count = QLabel()
        layout.addLayout(page_header("Songs", self.count))
        self.empty = QLabel("No songs yet. Make one on the Compose page — the built-in "
                            "Sketch engine works right away.")
        self.empty.setStyleSheet("color: #6b7280; padding: 24px;")
        self.empty.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        layout.addWidget(self.empty, 1)  # takes the list's room while there is no list
        self.view = SongsView()
        self.view.files = self.files
        self.view.setModel(self.model)
        self.view.setItemDelegate(self.delegate)
        self.view.setContextMenuPolicy(Qt.CustomContextMenu)
        layout.addWidget(self.view, 1)

        bar = QHBoxLayout()
        self.play = QPushButton("Play")
        self.seek = QSlider(Qt.Horizontal)
        self.seek.setRange(0, 1000)
        self.time = QLabel("")
        self.reveal = QPushButton("Show in folder")
        self.copy = QPushButton("Copy path")
        self.reuse = QPushButton("Use these settings")
        self.trash = QPushButton("Move to trash")
        for w in (self.play, self.seek, self.time, self.reveal, self.copy, self.reuse, self.trash):
            bar.addWidget(w, 1 if w is self.seek else 0)
        layout.addLayout(bar)
        self.note = QLabel("")
        self.note.setStyleSheet("color: #6b7280;")
        layout.addWidget(self.note)

        self._player.failed.connect(self.note.setText)
        self.store.ready.connect(self._wave_ready)
        self.files.fetched.connect(self._fetched)
        self.files.failed.connect(lambda _id, text: self.note.setText(
            f"Could not fetch the song from the node: {text}"))
        self.view.doubleClicked.connect(lambda _i: self.toggle_play())
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.play.clicked.connect(self.toggle_play)
        self.seek.sliderMoved.connect(self._seek)
        self.reveal.clicked.connect(self.reveal_selected)
        self.copy.clicked.connect(self.copy_path)
        self.reuse.clicked.connect(self._reuse)
        self.trash.clicked.connect(self.trash_selected)
        self.model.modelReset.connect(self._update_count)
        self.model.rowsInserted.connect(self._update_count)
        self.model.rowsRemoved.connect(self._update_count)
        link.songs_loaded.connect(self.model.set_songs)
        link.song_updated.connect(self.model.upsert)
        if link.songs:
            self.model.set_songs(list(link.songs.values()))
        self._update_count()
        self._update_buttons()

    # -- helpers ----------------------------------------------------------------------------
    def _update_count(self, *_):
        n = self.model.rowCount()
        self.count.setText(f"{n} song{'s' if n != 1 else ''}")
        self.empty.setVisible(n == 0)
        self.view.setVisible(n > 0)

    def current(self) -> SongRecord | None:
        recs = self.view.selected_records()
        if recs:
            return recs[0]
        idx = self.view.currentIndex()
        return idx.data(RecordRole) if idx.isValid() else None

    def select(self, song_id: str) -> None:
        row = self.model.row_of(song_id)
        if row >= 0:
            idx = self.model.index(row)
            self.view.setCurrentIndex(idx)
            self.view.scrollTo(idx)

    def _update_buttons(self):
        rec = self.current()
        has_file = self.files.local(rec) is not None
        remote = bool(rec and rec.state == "done" and self.files.is_remote(rec))
        for w in (self.reveal, self.copy):
            w.setEnabled(has_file)
        for w in (self.play, self.trash):
            w.setEnabled(has_file or remote)
        self.reuse.setEnabled(rec is not None)

    def _wave_ready(self, path: str) -> None:
        name = os.path.basename(path)
        for row, rec in enumerate(self.model._rows):
            if rec.path == path or (rec.path and node_file_name(rec) == name):
                idx = self.model.index(row)
                self.view.update(idx)

    def _fetched(self, song_id: str) -> None:
        row = self.model.row_of(song_id)
        if row >= 0:
            self.view.update(self.model.index(row))
        self._update_buttons()
        if self._play_when_fetched == song_id:
            self._play_when_fetched = None
            rec = self.current()
            if rec is not None and rec.id == song_id:
                self.toggle_play()

    def _menu(self, pos):
        rec = self.current()
        if rec is None:
            return
        menu = QMenu(self)
        menu.addAction("Play / Pause", self.toggle_play)
        menu.addAction("Show in folder", self.reveal_selected)
        menu.addAction("Copy path", self.copy_path)
        menu.addAction("Use these settings", self._reuse)
        menu.addSeparator()
        menu.addAction("Move to trash", self.trash_selected)
        menu.exec(self.view.viewport().mapToGlobal(pos))

    # -- actions ----------------------------------------------------------------------------
    def toggle_play(self) -> None:
        rec = self.current()
        if rec is None or not rec.path:
            return
        path = self.files.ensure(rec)
        if path is None:
            if self.files.fetching(rec.id):
                self._play_when_fetched = rec.id
                self.note.setText(f"Downloading {node_file_name(rec)} from the node…")
            return
        player = self._player
        if self.playing is not None and self.playing.id == rec.id and player.path == path:
            player.toggle()
            return
        if not player.load(path, play=True):
            self.note.setText(player.problem)
            return
        self.playing = rec
        self.delegate.playing_id = rec.id
        self.play.setText("Pause")

    def stop_playback(self) -> None:
        """Stop the sound (the page is left or the app quits)."""
        self._player.stop()

    def shutdown(self) -> None:
        self._player.shutdown()
        self.store.shutdown()

    def _player_state(self, state: str) -> None:
        self.play.setText("Pause" if state in ("playing", "loading") else "Play")

    def _position(self, ms: int) -> None:
        total = max(1, self._player.duration_ms)
        frac = min(1.0, ms / total)
        self.delegate.play_position = frac
        if not self.seek.isSliderDown():
            self.seek.setValue(int(frac * 1000))
        self.time.setText(f"{human_duration(ms / 1000)} / {human_duration(total / 1000)}")
        if self.playing is not None:
            row = self.model.row_of(self.playing.id)
            if row >= 0:
                self.view.update(self.model.index(row))

    def _seek(self, value: int) -> None:
        self._player.seek(int(self._player.duration_ms * value / 1000))

    def reveal_selected(self) -> None:
        local = self.files.local(self.current())
        if local is None:
            return
        path = os.path.abspath(local)
        if sys.platform == "darwin":
            subprocess.Popen(["open", "-R", path])
        elif sys.platform == "win32":
            subprocess.Popen(["explorer", "/select,", path])
        else:
            QDesktopServices.openUrl(QUrl.fromLocalFile(os.path.dirname(path)))

    def copy_path(self) -> None:
        local = self.files.local(self.current())
        if local is not None:
            QGuiApplication.clipboard().setText(os.path.abspath(local))
            self.note.setText(f"Copied {local}")

    def _reuse(self) -> None:
        rec = self.current()
        if rec is not None:
            self.use_settings.emit(rec)

    def trash_selected(self, confirm: bool = True) -> list[str]:
        recs = [r for r in self.view.selected_records() if r.path]
        if not recs:
            return []
        if confirm:
            names = "\n".join(node_file_name(r) for r in recs[:5])
            answer = QMessageBox.question(self, "Move to trash",
                                          f"Move {len(recs)} song file(s) to the trash?\n\n{names}")
            if answer != QMessageBox.Yes:
                return []
        moved = []
        for rec in recs:
            if self.files.is_remote(rec):  # the node's file: it deletes it; drop our copy
                moved.append(rec.id)
                self._drop_row(rec)
                self.files.drop_cached(rec)
                self.link.forget_song(rec.id, delete_files=True, on_error=lambda text, r=rec:
                                      self.note.setText(f"The node could not delete "
                                                        f"{node_file_name(r)}: {text}"))
                continue
            ok = _trash(rec.path)
            _trash(os.path.splitext(rec.path)[0] + ".json")
            if ok:
                moved.append(rec.id)
                self._drop_row(rec)
                self.link.forget_song(rec.id, on_error=lambda text, path=rec.path: self.note.setText(
                    f"Moved {os.path.basename(path)} to the trash, but the node still lists "
                    f"it: {text}"))
            else:
                self.note.setText(f"Could not move {rec.path} to the trash")
        return moved

    def _drop_row(self, rec: SongRecord) -> None:
        self.model.remove(rec.id)
        if self.playing is not None and self.playing.id == rec.id:
            self._player.stop()
            self.playing = None


def _trash(path: str) -> bool:
    if not os.path.exists(path):
        return False
    result = QFile.moveToTrash(path)
    ok = result[0] if isinstance(result, tuple) else bool(result)
    return ok
