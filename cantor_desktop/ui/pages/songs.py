"""Songs: every song the node has, newest first, one row per take — waveform, play, A/B,
search, favourites, rename, reveal, re-use, trash, drag out.

Keys (the Song menu's, :mod:`..song_actions`): Space plays or pauses the selected take, B
switches between the two takes heard last at the same point (A/B), the platform's Delete
(and ⌘⌫ on a Mac) moves the selection to the trash, its Find key searches.
"""

from __future__ import annotations

import os
import subprocess
import sys

from PySide6.QtCore import QFile, QPoint, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QDrag, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QMessageBox,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ...song.record import Song, SongState, Take
from .. import shortcuts, theme
from ..drag_exports import DragExports
from ..player import Player
from ..song_actions import Selection, SongActions
from ..song_files import SongFiles, node_file_name
from ...views.song_records import Row
from ..songs_model import RowRole, SongDelegate, SongsModel, WaveformStore, song_mime_data
from ...views.transfer import human_duration
from ..waveform_editor import WaveformEditor
from ..widgets import ElidedLabel, follow
from . import page_header


class SongsView(QListView):
    """A list whose drag carries the takes' files as URLs with the copy action only, and
    whose rows have a play button and a favourite star.

    The drag starts from this synchronous mouse handler (never from a coroutine): QDrag.exec
    runs its own loop and blocks. What the drop target answers (even "move") is never acted
    on: the song's file stays where it is.
    """

    play_clicked = Signal(object)  # Row
    star_clicked = Signal(object)  # Row
    drag_note = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._press: QPoint | None = None
        self.files: SongFiles | None = None  # set by the page: where each take's audio is here
        self.exports = None  # DragExports, set by the page
        self.stem_names = None  # StemNames, set by the page: {title}_{track}
        self.waiting_exports = 0
        self.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.setUniformItemSizes(True)  # 10,000 rows lay out in no time
        self.setDragEnabled(True)
        self.setDragDropMode(QAbstractItemView.DragOnly)
        self.setDefaultDropAction(Qt.CopyAction)
        self.last_drag_result = None

    def selected_rows(self) -> list[Row]:
        rows = [i.data(RowRole) for i in self.selectionModel().selectedRows()]
        return sorted(
            rows, key=lambda r: self.model().row_of(r.song.id, r.take.n if r.take else None)
        )

    def drag_paths(self) -> list[str]:
        """The files of the selected takes: exported with the remembered choices when the
        musician asked for that and they are ready; else the files as made (a remote take:
        its fetched copy)."""
        exported = self.exports is not None and self.exports.wanted()
        paths, waiting = [], 0
        for row in self.selected_rows():
            if row.take is None:
                continue
            if exported:
                found = self.exports.path(row.song, row.take)
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
            self.drag_note.emit(
                "The exported file is still being made: this drag handed out "
                "the song as made; drag again in a moment for the export"
            )
        if mime is not None:
            drag = QDrag(self)
            drag.setMimeData(mime)
            self.last_drag_result = drag.exec(Qt.CopyAction)  # the answer is never acted on

    def _hit(self, pos: QPoint) -> tuple[str, Row] | None:
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        row: Row = index.data(RowRole)
        rect = self.visualRect(index)
        delegate = self.itemDelegate()
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


class SongsPage(QWidget):
    use_settings = Signal(object)  # Song
    cover_requested = Signal(dict, str)  # source, its name: Compose makes a cover
    reference_requested = Signal(dict, str)  # source, its name: Compose borrows its sound

    def __init__(self, link, parent=None, actions: SongActions | None = None):
        super().__init__(parent)
        self.link = link
        self.actions = actions if actions is not None else SongActions(self)
        self.model = SongsModel(self)
        self.store = WaveformStore(self)
        self.files = SongFiles(link, self)
        self.delegate = SongDelegate(self.store, self, files=self.files)
        self._play_when_fetched: tuple[str, int] | None = None
        self.playing: Row | None = None
        self.heard: list[tuple[tuple[str, int], int]] = []  # A/B: the last two (take, ms)
        self._player = Player(self)
        self._player.position_changed.connect(self._position)
        self._player.state_changed.connect(self._player_state)
        act = self.actions

        layout = QVBoxLayout(self)
        self.count = QLabel()
        self.search = QLineEdit()
        self.search.setPlaceholderText(
            shortcuts.tip("Search titles, captions, lyrics, keys…", act["find"].shortcuts())
        )
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(220)
        self.favourites = QPushButton("★ Favourites")
        self.favourites.setCheckable(True)
        self.favourites.setToolTip("Show only the songs marked with a star")
        header = page_header("Songs", self.count)
        header.addWidget(self.favourites)
        header.addWidget(self.search)
        layout.addLayout(header)
        self.empty = QLabel(
            "No songs yet. Make one on the Compose page — the built-in "
            "Sketch engine works right away."
        )
        self.empty.setMargin(24)
        self.empty.setWordWrap(True)
        theme.tone(self.empty, "muted")
        self.empty.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        layout.addWidget(self.empty, 1)  # takes the list's room while there is no list
        self.view = SongsView()
        self.view.files = self.files
        self.drag_exports = DragExports(self.files, self)
        self.view.exports = self.drag_exports
        from ..stem_set import StemNames

        self.view.stem_names = StemNames()
        self.view.setModel(self.model)
        self.view.setItemDelegate(self.delegate)
        self.view.setContextMenuPolicy(Qt.CustomContextMenu)
        layout.addWidget(self.view, 1)

        # editing the selected take: a region to repaint, an end to extend, a cover
        self.editor = WaveformEditor()
        self.edit_words = ElidedLabel()
        theme.tone(self.edit_words, "muted")
        self.repaint = QPushButton("Repaint…")
        self.extend = QPushButton("Extend")
        self.cover = QPushButton("Cover…")
        self.as_reference = QPushButton("Use as reference")
        self.layer = QPushButton("Add a layer…")
        self.stems = QPushButton("Stems…")
        edit_bar = QHBoxLayout()
        edit_bar.addWidget(self.edit_words, 1)
        for w, name in (
            (self.repaint, "repaint"),
            (self.extend, "extend"),
            (self.cover, "cover"),
            (self.as_reference, "reference"),
            (self.layer, "layer"),
            (self.stems, "stems"),
        ):
            follow(w, act[name])
            edit_bar.addWidget(w)
        layout.addWidget(self.editor)
        layout.addLayout(edit_bar)
        self.editor.selection_changed.connect(self._edit_buttons)

        bar = QHBoxLayout()
        self.play = QPushButton("Play")
        self.play.setMinimumSize(88, 36)  # the big target of the page
        theme.accent_button(self.play)
        self.seek = QSlider(Qt.Horizontal)
        self.seek.setRange(0, 1000)
        self.time = QLabel("")
        self.time.setMinimumWidth(90)
        self.reveal = QPushButton("Show in folder")
        self.copy = QPushButton("Copy path")
        self.reuse = QPushButton("Use these settings")
        self.rename = QPushButton("Rename…")
        self.export = QPushButton("Export…")
        self.trash = QPushButton("Move to trash")
        for w, name in (
            (self.play, "play"),
            (self.reveal, "reveal"),
            (self.copy, "copy_path"),
            (self.reuse, "reuse"),
            (self.rename, "rename"),
            (self.export, "export"),
            (self.trash, "trash"),
        ):
            follow(w, act[name])
        for w in (
            self.play,
            self.seek,
            self.time,
            self.reveal,
            self.copy,
            self.reuse,
            self.rename,
            self.export,
            self.trash,
        ):
            bar.addWidget(w, 1 if w is self.seek else 0)
        layout.addLayout(bar)
        self.note = QLabel("")
        theme.tone(self.note, "muted")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.note)

        # what each command does (the buttons above, the Song menu and the list's own menu
        # trigger the same actions)
        for name, slot in (
            ("play", self.toggle_play),
            ("ab", self.switch_ab),
            ("repaint", self.repaint_selection),
            ("extend", self.extend_selection),
            ("cover", self._cover_clicked),
            ("reference", self._reference_clicked),
            ("layer", lambda: self.open_part("lego")),
            ("complete", lambda: self.open_part("complete")),
            ("stems", self.open_stems),
            ("render_again", self.render_again),
            ("export", self.export_selected),
            ("reveal", self.reveal_selected),
            ("copy_path", self.copy_path),
            ("reuse", self._reuse),
            ("rename", self.rename_selected),
            ("favourite", self._favourite_current),
            ("trash", self.trash_selected),
            ("find", self.focus_search),
        ):
            act[name].triggered.connect(lambda _checked=False, f=slot: f())
        for name in ("play", "ab", "trash"):  # keys of the list: where the list has the focus
            act[name].setShortcutContext(Qt.WidgetWithChildrenShortcut)
            self.view.addAction(act[name])

        self._player.failed.connect(self.note.setText)
        self.store.ready.connect(self._wave_ready)
        self.files.fetched.connect(self._fetched)
        self.files.failed.connect(
            lambda _id, text: self.note.setText(f"Could not fetch the song from the node: {text}")
        )
        self.view.doubleClicked.connect(lambda _i: self.toggle_play())
        self.view.play_clicked.connect(self.play_row)
        self.view.star_clicked.connect(self.toggle_favourite)
        self.view.drag_note.connect(self.note.setText)
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.view.selectionModel().currentChanged.connect(lambda *_: self._update_buttons())
        self.search.textChanged.connect(self._filter)
        self.favourites.toggled.connect(self._filter)
        self.seek.sliderMoved.connect(self._seek)
        self.model.modelReset.connect(self._update_count)
        link.songs.loaded.connect(self.model.set_songs)
        link.songs.updated.connect(self._song_changed)
        link.songs.removed.connect(self._song_removed)
        if link.songs.by_id:
            self.model.set_songs(list(link.songs.by_id.values()))
        self._update_count()
        self._update_buttons()

    # -- helpers ----------------------------------------------------------------------------
    def _update_count(self, *_):
        shown = self.model.shown_songs()
        total = self.model.song_count()
        if shown == total:
            self.count.setText(f"{total} song{'s' if total != 1 else ''}")
        else:
            self.count.setText(f"{shown} of {total} songs")
        self.empty.setVisible(total == 0)
        self.view.setVisible(total > 0)

    def _filter(self, *_) -> None:
        """Search as you type: the selection stays on the takes that still show."""
        keep = [r.key for r in self.view.selected_rows()]
        current = self.view.currentIndex().data(RowRole)
        self.model.set_filter(self.search.text(), self.favourites.isChecked())
        if keep or current is not None:
            self._reselect(keep, current.key if current is not None else None)
        self._update_count()
        self._update_buttons()

    def _reselect(self, keys: list[tuple[str, int]], current: tuple[str, int] | None) -> None:
        from PySide6.QtCore import QItemSelection
        from PySide6.QtCore import QItemSelectionModel as Sel

        chosen = QItemSelection()
        for song_id, take in keys:
            n = self.model.row_of(song_id, take or None)
            if n >= 0:
                chosen.select(self.model.index(n, 0), self.model.index(n, 0))
        selection = self.view.selectionModel()
        if not chosen.isEmpty():
            selection.select(chosen, Sel.ClearAndSelect)
        if current is not None:
            n = self.model.row_of(current[0], current[1] or None)
            if n >= 0:
                selection.setCurrentIndex(self.model.index(n, 0), Sel.NoUpdate)

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def current_row(self) -> Row | None:
        rows = self.view.selected_rows()
        if rows:
            return rows[0]
        idx = self.view.currentIndex()
        return idx.data(RowRole) if idx.isValid() else None

    def current(self) -> Song | None:
        row = self.current_row()
        return row.song if row is not None else None

    def select(self, song_id: str, take: int | None = None) -> None:
        row = self.model.row_of(song_id, take, fetch=True)
        if row >= 0:
            idx = self.model.index(row, 0)
            self.view.setCurrentIndex(idx)
            self.view.scrollTo(idx)

    def _update_buttons(self):
        row = self.current_row()
        if (
            row is not None
            and row.take is not None
            and row.song.state == SongState.DONE
            and self.drag_exports.wanted()
        ):
            self.drag_exports.prepare(row.song, row.take)
        playable = row is not None and row.take is not None and row.song.state == SongState.DONE
        self._editor_take(row if playable else None)
        self._sync_actions(row)

    def selection_facts(self, row: Row | None = None) -> Selection:
        """What the actions need to know about the selection now."""
        row = row if row is not None else self.current_row()
        song = row.song if row is not None else None
        playable = row is not None and row.take is not None and song.state == SongState.DONE
        editing = playable and row.key == getattr(self, "_edit_key", None)
        return Selection(
            row=row,
            rows=len(self.view.selectionModel().selectedRows()),
            has_file=playable and self.files.local(song, row.take) is not None,
            remote=playable and self.files.is_remote(song, row.take),
            region=editing and self.editor.repaintable,
            short_region=editing and self.editor.region is not None,
            extension=editing and self.editor.extendable,
            finished_selected=any(r.song.is_finished for r in self.view.selected_rows())
            or (song is not None and song.is_finished),
        )

    def _sync_actions(self, row: Row | None = None) -> None:
        reasons = self.actions.update(self.selection_facts(row))
        self.favourites_action_text(row)
        return reasons

    def favourites_action_text(self, row: Row | None) -> None:
        fav = row is not None and row.song.favourite
        self.actions["favourite"].setText("Unmark favourite" if fav else "Mark favourite")

    def _favourite_current(self) -> None:
        row = self.current_row()
        if row is not None:
            self.toggle_favourite(row)

    def _song_changed(self, song: Song) -> None:
        known = self.model.song(song.id) is not None
        self.model.upsert(song)
        if not known:
            self._update_count()
        self._update_buttons()

    def _song_removed(self, song_id: str) -> None:
        if self.playing is not None and self.playing.song.id == song_id:
            self._player.stop()
            self.playing = None
        self.model.remove(song_id)
        self._update_count()

    def _wave_ready(self, path: str) -> None:
        self.view.viewport().update()
        row = self.current_row()
        if (
            row is not None
            and row.take is not None
            and self.files.local(row.song, row.take) == path
        ):
            self.editor.set_peaks(self.store.get(path))

    # -- editing ----------------------------------------------------------------------------
    def _editor_take(self, row: Row | None) -> None:
        key = row.key if row is not None else None
        if key == getattr(self, "_edit_key", None):
            return
        self._edit_key = key
        if row is None:
            self.editor.set_take(None, 0)
        else:
            local = self.files.local(row.song, row.take)
            self.editor.set_take(self.store.get(local) if local else None, row.take.duration)
        self._edit_buttons()

    def _edit_buttons(self) -> None:
        row = self.current_row()
        ready = row is not None and row.take is not None and row.song.state == SongState.DONE
        self.edit_words.setText(self.editor.describe() if ready else "")
        self._sync_actions(row)

    def _edit_base(self, row: Row) -> dict:
        """The edit's request: the song's own caption, lyrics, model and format."""
        keep = ("caption", "lyrics", "model", "format", "language", "key", "bpm", "time_signature")
        base = {k: row.song.request[k] for k in keep if row.song.request.get(k) is not None}
        base["source"] = {"song": row.song.id, "take": row.take.n}
        return base

    def edit_request(self, task: str, **fields) -> dict | None:
        row = self.current_row()
        if row is None or row.take is None:
            return None
        return {**self._edit_base(row), "task": task, **fields}

    def repaint_selection(self, caption: str | None = None, lyrics: str | None = None) -> None:
        """Repaint the selected region (asked for a caption and lyrics for it, prefilled)."""
        row = self.current_row()
        if row is None or not self.editor.repaintable:
            return
        start, end = self.editor.region
        if caption is None:
            caption, ok = QInputDialog.getText(
                self,
                "Repaint",
                f"Caption for {start:.1f}–{end:.1f} s (the rest is kept):",
                QLineEdit.Normal,
                row.song.caption,
            )
            if not ok:
                return
        request = self.edit_request(
            "repaint", region={"start": start, "end": end}, caption=caption or row.song.caption
        )
        if lyrics is not None:
            request["lyrics"] = lyrics
        self._submit_edit(request, f"Repainting {start:.1f}–{end:.1f} s")

    def extend_selection(self) -> None:
        if not self.editor.extendable:
            return
        ext = {k: v for k, v in (("before", self.editor.before), ("after", self.editor.after)) if v}
        self._submit_edit(self.edit_request("extend", extend=ext), self.editor.describe())

    def _submit_edit(self, request: dict | None, what: str) -> None:
        if request is None:
            return
        self.note.setText(f"{what}… the new version will appear under the song")

        def failed(text: str) -> None:
            self.note.setText(f"{what} was refused: {text}")

        self.link.songs.queue("edit", request, on_error=failed)
        self.editor.clear()

    def _source_of_current(self) -> tuple[dict, str] | None:
        row = self.current_row()
        if row is None or row.take is None:
            return None
        name = row.song.name + (f" (take {row.take.n})" if len(row.song.takes) > 1 else "")
        return {"song": row.song.id, "take": row.take.n}, name

    def render_again(self) -> None:
        """Render the take again from its own audio codes (the language model's part kept):
        another performance of the same song, with a new seed."""
        row = self.current_row()
        if row is None or row.take is None:
            return
        base = self._edit_base(row)
        base.pop("source")
        base.update(codes_from={"song": row.song.id, "take": row.take.n}, seed=-1)
        self._submit_edit(base, "Rendering the same song again")

    def _cover_clicked(self) -> None:
        found = self._source_of_current()
        if found:
            self.cover_requested.emit(*found)

    def _reference_clicked(self) -> None:
        found = self._source_of_current()
        if found:
            self.reference_requested.emit(*found)

    # stems, layers, completions: their dialogs load when asked
    def open_stems(self):
        from ..stems_dialog import open_for

        return open_for(self, self.current_row())

    def open_part(self, task: str):
        from ..part_dialog import open_for

        return open_for(self, self.current_row(), task)

    def select_stems(self) -> int:
        """Select every take of the current song's stems (or of a stem's siblings), so one
        drag hands them all out, named {title}_{track}."""
        from PySide6.QtCore import QItemSelectionModel as Sel

        from ..stem_set import stems_of

        song = self.current()
        stems = stems_of(self.model.songs(), song) if song is not None else []
        rows = [self.model.row_of(s.id, t.n, fetch=True) for s in stems for t in s.takes]
        rows = [r for r in rows if r >= 0]
        if not rows:
            return 0
        selection = self.view.selectionModel()
        selection.clear()
        for r in rows:
            selection.select(self.model.index(r, 0), Sel.Select | Sel.Rows)
        selection.setCurrentIndex(self.model.index(rows[0], 0), Sel.NoUpdate)
        self.note.setText(f"{len(stems)} stems selected: drag them into your DAW together")
        return len(stems)

    def _fetched(self, song_id: str) -> None:
        self.view.viewport().update()
        self._update_buttons()
        if self._play_when_fetched and self._play_when_fetched[0] == song_id:
            key, self._play_when_fetched = self._play_when_fetched, None
            row = self.model.row(self.model.row_of(*key, fetch=True))
            if row is not None:
                self.play_row(row)

    def context_menu(self) -> QMenu | None:
        """The list's own menu for the selection: the same actions as the Song menu (their
        shortcuts shown in the platform's own text)."""
        row = self.current_row()
        if row is None:
            return None
        act = self.actions
        menu = QMenu(self)
        names = ["play", "reveal", "copy_path", None] if row.take is not None else []
        names += ["favourite", "rename"]
        if row.take is not None:
            names += ["export", None, "cover", "reference", "render_again", "stems", "layer"]
            names += ["complete"]
        for name in names:
            menu.addSeparator() if name is None else menu.addAction(act[name])
        from ..stem_set import stems_of

        if stems_of(self.model.songs(), row.song):
            menu.addAction("Select stems (to drag them out together)", self.select_stems)
        menu.addAction(act["reuse"])
        menu.addSeparator()
        menu.addAction(act["trash"])
        return menu

    def _menu(self, pos):
        menu = self.context_menu()
        if menu is not None:
            menu.exec(self.view.viewport().mapToGlobal(pos))

    # -- playing ----------------------------------------------------------------------------
    def toggle_play(self) -> None:
        row = self.current_row()
        if row is not None:
            self.play_row(row)

    def play_row(self, row: Row, at_ms: int = 0) -> None:
        """Play a take (or pause/resume it when it is the one playing)."""
        song, take = row.song, row.take
        if take is None or song.state != SongState.DONE:
            return
        path = self.files.ensure(song, take)
        if path is None:
            if self.files.fetching(song, take):
                self._play_when_fetched = row.key
                self.note.setText(f"Downloading {node_file_name(song, take)} from the node…")
            return
        player = self._player
        if self.playing is not None and self.playing.key == row.key and player.path == path:
            player.toggle()
            return
        if self.playing is not None:
            self._remember(self.playing.key, player.position_ms())
        if not player.load(path, play=True, at_ms=at_ms):
            self.note.setText(player.problem)
            return
        self.playing = row
        self._remember(row.key, at_ms)
        self.delegate.playing = row.key
        self.view.viewport().update()

    def _remember(self, key: tuple[str, int], ms: int) -> None:
        self.heard = [item for item in self.heard if item[0] != key][-1:] + [(key, ms)]

    def switch_ab(self) -> None:
        """B: jump to the other of the two takes heard last, at the same point."""
        if self.playing is None or len(self.heard) < 2:
            self.note.setText(
                "A/B: play two takes (or versions) first, then press B to switch between them"
            )
            return
        other = next((key for key, _ms in self.heard if key != self.playing.key), None)
        row = self.model.row(self.model.row_of(*other, fetch=True)) if other else None
        if row is None:
            return
        self.play_row(row, at_ms=self._player.position_ms())
        self.select(*other)

    def stop_playback(self) -> None:
        """Stop the sound (the page is left or the app quits)."""
        self._player.stop()

    def shutdown(self) -> None:
        self._player.shutdown()
        self.store.shutdown()
        self.drag_exports.shutdown()

    def _player_state(self, state: str) -> None:
        sounding = state in ("playing", "loading")
        self.play.setText("Pause" if sounding else "Play")
        self.delegate.sounding = sounding
        self.view.viewport().update()

    def _position(self, ms: int) -> None:
        total = max(1, self._player.duration_ms)
        frac = min(1.0, ms / total)
        self.delegate.play_position = frac
        if not self.seek.isSliderDown():
            self.seek.setValue(int(frac * 1000))
        self.time.setText(f"{human_duration(ms / 1000)} / {human_duration(total / 1000)}")
        if self.playing is not None:
            row = self.model.row_of(*self.playing.key)
            if row >= 0:
                self.view.update(self.model.index(row, 0))

    def _seek(self, value: int) -> None:
        self._player.seek(int(self._player.duration_ms * value / 1000))

    # -- the rest ---------------------------------------------------------------------------
    def toggle_favourite(self, row: Row) -> None:
        song = row.song
        self.link.songs.change(
            song.id,
            favourite=not song.favourite,
            on_error=lambda text: self.note.setText(f"Could not mark {song.name!r}: {text}"),
        )

    def export_selected(self):
        """Export… for the selected takes (the dialog and the export module load now, not
        with the page)."""
        from ..export_dialog import open_for

        return open_for(self)

    def rename_selected(self) -> None:
        song = self.current()
        if song is None:
            return
        title, ok = QInputDialog.getText(
            self,
            "Rename song",
            "Title (empty: the caption):",
            QLineEdit.Normal,
            song.title or song.caption,
        )
        if ok:
            self.link.songs.change(
                song.id,
                title=title.strip(),
                on_error=lambda text: self.note.setText(f"Could not rename the song: {text}"),
            )

    def _local_selected(self) -> str | None:
        row = self.current_row()
        if row is None or row.take is None:
            return None
        return self.files.local(row.song, row.take)

    def reveal_selected(self) -> bool:
        """Show the take's file in the file manager; say so when none answers."""
        local = self._local_selected()
        if local is None:
            return False
        path = os.path.abspath(local)
        try:
            if sys.platform == "darwin":
                subprocess.Popen(["open", "-R", path])
                ok = True
            elif sys.platform == "win32":
                subprocess.Popen(["explorer", "/select,", path])
                ok = True
            else:
                ok = QDesktopServices.openUrl(QUrl.fromLocalFile(os.path.dirname(path)))
        except OSError:
            ok = False
        if not ok:
            self.note.setText(
                f"No file manager answered. The file is {path} "
                f"(Copy path puts it on the clipboard)."
            )
        return ok

    def copy_path(self) -> None:
        local = self._local_selected()
        if local is not None:
            QGuiApplication.clipboard().setText(os.path.abspath(local))
            self.note.setText(f"Copied {local}")

    def _reuse(self) -> None:
        song = self.current()
        if song is not None:
            self.use_settings.emit(song)

    def trash_selected(self, confirm: bool = True) -> list[str]:
        """Move every file of the selected songs (all their takes and sidecars) to the
        trash; the node forgets them. Returns the ids of the songs removed."""
        songs: dict[str, Song] = {}
        for row in self.view.selected_rows() or (
            [self.current_row()] if self.current_row() else []
        ):
            if row.song.is_finished:
                songs[row.song.id] = row.song
        if not songs:
            return []
        files = [(song, take) for song in songs.values() for take in song.takes]
        if confirm:
            names = [node_file_name(s, t) for s, t in files]
            shown = "\n".join(names[:8]) + (
                f"\n… and {len(names) - 8} more" if len(names) > 8 else ""
            )
            answer = QMessageBox.question(
                self,
                "Move to trash",
                f"Move {len(songs)} song(s) — {len(files)} audio file(s) and their sidecars — "
                f"to the trash?\n\n{shown}"
                if files
                else f"Forget {len(songs)} song(s) that made no file?",
            )
            if answer != QMessageBox.Yes:
                return []
        moved = []
        for song in songs.values():
            if song.takes and self.files.is_remote(song, song.takes[0]):
                # the node's files: the node deletes them; drop our copies
                moved.append(song.id)
                self._drop(song)
                self.files.drop_cached(song)
                self.link.songs.forget(
                    song.id,
                    delete_files=True,
                    on_error=lambda text, s=song: self.note.setText(
                        f"The node could not delete {s.name!r}: {text}"
                    ),
                )
                continue
            problems = [p for take in song.takes for p in _trash_take(take)]
            if problems:
                self.note.setText(f"Could not move to the trash: {', '.join(problems)}")
                continue
            moved.append(song.id)
            self._drop(song)
            self.link.songs.forget(
                song.id,
                on_error=lambda text, s=song: self.note.setText(
                    f"Moved {s.name!r} to the trash, but the node still lists it: {text}"
                ),
            )
        return moved

    def _drop(self, song: Song) -> None:
        if self.playing is not None and self.playing.song.id == song.id:
            self._player.stop()
            self.playing = None
            self.delegate.playing = None
        self.model.remove(song.id)
        self._update_count()


def _trash_take(take: Take) -> list[str]:
    """Move a take's audio and sidecar to the trash; the paths that could not be moved."""
    problems = []
    sidecar = take.sidecar or os.path.splitext(take.audio)[0] + ".json"
    for path in (take.audio, sidecar):
        if os.path.exists(path) and not _trash(path):
            problems.append(path)
    return problems


def _trash(path: str) -> bool:
    result = QFile.moveToTrash(path)
    return result[0] if isinstance(result, tuple) else bool(result)
