"""Songs: every song the node has, newest first, one row per take — waveform, play, A/B,
search, favourites, rename, reveal, re-use, trash, drag out.

Keys (the Song menu's, :mod:`..song_actions`): Space plays or pauses the selected take, B
switches between the two takes heard last at the same point (A/B), the platform's Delete
(and ⌘⌫ on a Mac) moves the selection to the trash, its Find key searches.
"""

from __future__ import annotations

import os

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QPoint, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ...song.record import Song
from ...views.messages import DANGER
from ...views.song_records import Row
from ...views.songs import AB_HOW, Edit, SongsViewModel, count_text, playable
from ...views.transfer import human_duration
from .. import shortcuts, theme
from ..drag_exports import DragExports
from ..message_line import MessageLine
from ..player import Player
from ...views.song_actions import Selection
from ..song_actions import SongActions
from ..song_files import SongFiles, node_file_name, reveal_in_file_manager, trash_take
from ..songs_list import SongsList
from ..songs_model import RowRole, SongDelegate, SongsModel, WaveformStore
from ..waveform_editor import WaveformEditor
from ..widgets import ElidedLabel, follow
from . import page_header

if TYPE_CHECKING:
    from ..export_dialog import ExportDialog
    from ..extend_dialog import ExtendDialog
    from ..node_link import NodeLink
    from ..part_dialog import PartDialog
    from ..stems_dialog import StemsDialog


class SongsPage(QWidget):
    use_settings = Signal(object)  # Song
    cover_requested = Signal(dict, str)  # source, its name: Compose makes a cover
    reference_requested = Signal(dict, str)  # source, its name: Compose borrows its sound

    def __init__(
        self,
        link: NodeLink,
        parent: QWidget | None = None,
        song_actions: SongActions | None = None,
    ) -> None:
        super().__init__(parent)
        self.link = link
        self.view_model = SongsViewModel()
        self.song_actions = song_actions if song_actions is not None else SongActions(self)
        self.model = SongsModel(self)
        self.store = WaveformStore(self)
        self.files = SongFiles(link, self)
        self.delegate = SongDelegate(self.store, self, files=self.files)
        self._edit_key: tuple[str, int] | None = None  # the take the waveform editor shows
        self._player = Player(self)
        self._player.position_changed.connect(self._position)
        self._player.state_changed.connect(self._player_state)
        layout = QVBoxLayout(self)
        layout.addLayout(self._header())
        self.empty = QLabel(
            "No songs yet. Make one on the Compose page — the built-in "
            "Sketch engine works right away."
        )
        self.empty.setMargin(24)
        self.empty.setWordWrap(True)
        theme.tone(self.empty, "muted")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.empty, 1)  # takes the list's room while there is no list
        layout.addWidget(self._list(), 1)
        self.setFocusProxy(self.view)  # the page opened from the keyboard: its songs
        layout.addWidget(self._editor())
        layout.addLayout(self._edit_bar())
        layout.addLayout(self._play_bar())
        self.note = MessageLine("muted")
        layout.addWidget(self.note)
        self._connect_actions()
        self._player.failed.connect(lambda text: self.note.say(text, DANGER))
        self.store.ready.connect(self._wave_ready)
        self.files.fetched.connect(self._fetched)
        self.files.failed.connect(
            lambda _id, text: self.note.fail("fetch the song from the node", text)
        )
        self.view.doubleClicked.connect(lambda _i: self.toggle_play())
        self.view.play_clicked.connect(self.play_row)
        self.view.star_clicked.connect(self.toggle_favourite)
        self.view.drag_note.connect(self.note.say)
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

    # -- building -------------------------------------------------------------------------
    def _header(self) -> QHBoxLayout:
        """The title, the count, Favourites and the search."""
        self.count = QLabel()
        self.search = QLineEdit()
        find = self.song_actions["find"].shortcuts()
        self.search.setPlaceholderText(
            shortcuts.tip("Search titles, captions, lyrics, keys…", find)
        )
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName(self.tr("Search songs"))
        self.search.setMinimumWidth(220)
        self.favourites = QPushButton(self.tr("★ Favourites"))
        self.favourites.setCheckable(True)
        self.favourites.setToolTip("Show only the songs marked with a star")
        header = page_header(QCoreApplication.translate("MainWindow", "Songs"), self.count)
        header.addWidget(self.favourites)
        header.addWidget(self.search)
        return header

    def _list(self) -> SongsList:
        """The list: a row per take, dragged out as files."""
        self.view = SongsList()
        self.view.setAccessibleName(self.tr("Songs and takes"))
        self.view.files = self.files
        self.drag_exports = DragExports(self.files, self)
        self.view.exports = self.drag_exports
        from ..stem_set import StemNames

        self.view.stem_names = StemNames()
        self.view.setModel(self.model)
        self.view.setItemDelegate(self.delegate)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        return self.view

    def _editor(self) -> WaveformEditor:
        """The selected take's waveform: a region to repaint, an end to extend."""
        self.editor = WaveformEditor()
        self.editor.selection_changed.connect(self._edit_buttons)
        self.editor.playhead_moved.connect(self._editor_playhead)
        return self.editor

    def _playing_here(self) -> bool:
        """The take the waveform shows is the one playing (or paused)."""
        playing, row = self.view_model.playing, self.current_row()
        return playing is not None and row is not None and playing.key == row.key

    def _editor_playhead(self, seconds: float) -> None:
        """The waveform's cursor moved by a key: the play head follows, as in a DAW."""
        if self._playing_here():
            self._player.seek(int(seconds * 1000))

    def _edit_bar(self) -> QHBoxLayout:
        """What the selection says, and the edits."""
        self.edit_words = ElidedLabel()
        theme.tone(self.edit_words, "muted")
        self.repaint_button = QPushButton(self.tr("Repaint…"))
        self.extend = QPushButton(self.tr("Extend"))
        self.cover = QPushButton(self.tr("Cover…"))
        self.as_reference = QPushButton(self.tr("Use as reference"))
        self.layer = QPushButton(self.tr("Add a layer…"))
        self.stems = QPushButton(self.tr("Stems…"))
        edit_bar = QHBoxLayout()
        edit_bar.addWidget(self.edit_words, 1)
        self.loop = QPushButton(self.tr("Loop"))
        self.loop.setCheckable(True)
        self.loop.setToolTip(
            "Play the part selected on the waveform over and over (switch A/B while it loops)"
        )
        self.loop.toggled.connect(self._loop_changed)
        self.match_levels = QCheckBox(self.tr("Match levels"))
        self.match_levels.setChecked(True)
        self.match_levels.setToolTip(
            "Play every take at the same loudness, so comparing two takes compares the music, "
            "not the level (the files are not changed)"
        )
        self.match_levels.toggled.connect(self._match_levels_changed)
        self._player.match_levels = True
        edit_bar.addWidget(self.loop)
        edit_bar.addWidget(self.match_levels)
        for w, name in (
            (self.repaint_button, "repaint"),
            (self.extend, "extend"),
            (self.cover, "cover"),
            (self.as_reference, "reference"),
            (self.layer, "layer"),
            (self.stems, "stems"),
        ):
            follow(w, self.song_actions[name])
            edit_bar.addWidget(w)
        return edit_bar

    def _play_bar(self) -> QHBoxLayout:
        """Play and the seek bar, and what can be done with the take's file."""
        bar = QHBoxLayout()
        self.play = QPushButton(self.tr("Play"))
        self.play.setMinimumSize(88, 36)  # the big target of the page
        theme.accent_button(self.play)
        self.seek = QSlider(Qt.Orientation.Horizontal)
        self.seek.setRange(0, 1000)
        self.seek.setAccessibleName(self.tr("Play position"))
        self.seek.setMinimumWidth(160)  # never squeezed away by long button labels
        self.time = QLabel("")
        self.time.setMinimumWidth(90)
        self.reveal = QPushButton(self.tr("Show in folder"))
        self.copy = QPushButton(self.tr("Copy path"))
        self.reuse = QPushButton(self.tr("Use these settings"))
        self.rename = QPushButton(self.tr("Rename…"))
        self.export = QPushButton(self.tr("Export…"))
        self.trash = QPushButton(self.tr("Move to trash"))
        for w, name in (
            (self.play, "play"),
            (self.reveal, "reveal"),
            (self.copy, "copy_path"),
            (self.reuse, "reuse"),
            (self.rename, "rename"),
            (self.export, "export"),
            (self.trash, "trash"),
        ):
            follow(w, self.song_actions[name])
        for widget in (
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
            bar.addWidget(widget, 1 if widget is self.seek else 0)
        return bar

    def _connect_actions(self) -> None:
        """What each command does (the buttons, the Song menu and the list's own menu
        trigger the same actions)."""
        act = self.song_actions
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
            ("another_take", self.another_take),
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
            act[name].setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.view.addAction(act[name])

    # -- helpers ----------------------------------------------------------------------------
    def _update_count(self, *_: object) -> None:
        total = self.model.song_count()
        self.count.setText(count_text(self.model.shown_songs(), total))
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
            selection.select(chosen, Sel.SelectionFlag.ClearAndSelect)
        if current is not None:
            n = self.model.row_of(current[0], current[1] or None)
            if n >= 0:
                selection.setCurrentIndex(self.model.index(n, 0), Sel.SelectionFlag.NoUpdate)

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

    def _update_buttons(self) -> None:
        row = self.current_row()
        if row is not None and row.take is not None and playable(row):
            if self.drag_exports.wanted():
                self.drag_exports.prepare(row.song, row.take)
        self._editor_take(row if playable(row) else None)
        self._sync_actions(row)

    def selection_facts(self, row: Row | None = None) -> Selection:
        """What the actions need to know about the selection now."""
        row = row if row is not None else self.current_row()
        on_take = row is not None and row.take is not None and playable(row)
        editing = on_take and row is not None and row.key == self._edit_key
        selected = self.view.selected_rows()
        return Selection(
            row=row,
            rows=len(self.view.selectionModel().selectedRows()),
            has_file=on_take
            and row is not None
            and self.files.local(row.song, row.take) is not None,
            remote=on_take and row is not None and self.files.is_remote(row.song, row.take),
            region=editing and self.editor.repaintable,
            short_region=editing and self.editor.region is not None,
            extension=editing and self.editor.extendable,
            finished_selected=any(r.song.is_finished for r in selected)
            or (row is not None and row.song.is_finished),
        )

    def _sync_actions(self, row: Row | None = None) -> None:
        self.song_actions.update(self.selection_facts(row))
        self.favourites_action_text(row)

    def favourites_action_text(self, row: Row | None) -> None:
        fav = row is not None and row.song.favourite
        self.song_actions["favourite"].setText("Unmark favourite" if fav else "Mark favourite")

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
        self._stop_if_playing(song_id)
        self.model.remove(song_id)
        self._update_count()

    def _stop_if_playing(self, song_id: str) -> None:
        if self.view_model.stopped(song_id):
            self._player.stop()
            self.delegate.playing = None

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
        if key == self._edit_key:
            return
        self._edit_key = key
        if row is None or row.take is None:
            self.editor.set_take(None, 0)
        else:
            local = self.files.local(row.song, row.take)
            self.editor.set_take(self.store.get(local) if local else None, row.take.duration)
        self._edit_buttons()

    def _loop_changed(self, *_: object) -> None:
        """The loop follows the waveform's selection while Loop is on (and says so: a
        pressed button looks much like a raised one in some styles)."""
        self.loop.setText(self.tr("Loop: on") if self.loop.isChecked() else self.tr("Loop"))
        region = self.editor.region if self.loop.isChecked() else None
        if region is None:
            self._player.set_loop(None)
        else:
            self._player.set_loop(int(region[0] * 1000), int(region[1] * 1000))

    def _match_levels_changed(self, on: bool) -> None:
        """Heard at once: the take playing is decoded again at its new level, where it was."""
        self._player.match_levels = on
        row = self.view_model.playing
        if row is not None and self._player.state == "playing":
            at = self._player.position_ms()
            self.view_model.playing = None
            self.play_row(row, at_ms=at)

    def _edit_buttons(self) -> None:
        self._loop_changed()
        row = self.current_row()
        self.edit_words.setText(self.editor.describe() if playable(row) else "")
        self._sync_actions(row)

    def edit_request(self, task: str, **fields: object) -> dict | None:
        return self.view_model.edit_request(self.current_row(), task, **fields)

    def repaint_selection(self, caption: str | None = None, lyrics: str | None = None) -> None:
        """Repaint the selected region (asked for a caption and lyrics for it, prefilled)."""
        row = self.current_row()
        region = self.editor.region
        if row is None or row.take is None or region is None or not self.editor.repaintable:
            return
        if caption is None:
            start, end = region
            caption, ok = QInputDialog.getText(
                self,
                "Repaint",
                f"Caption for {start:.1f}–{end:.1f} s (the rest is kept):",
                QLineEdit.EchoMode.Normal,
                row.song.caption,
            )
            if not ok:
                return
        self._submit_edit(self.view_model.repaint(row, region, caption, lyrics))

    def extend_selection(self) -> ExtendDialog | None:
        """Extend the take by what the waveform shows past its ends; music added only after
        it first asks what it sings (Extend…), music added before it goes at once."""
        row = self.current_row()
        if row is None or row.take is None or not self.editor.extendable:
            return None
        if not self.editor.after or self.editor.before:  # only what is added after sings
            self._extend(row, "", None)
            return None
        from ..extend_dialog import ExtendDialog

        dialog = ExtendDialog(self.editor.describe(), self)
        dialog.chosen.connect(lambda lyrics, context: self._extend(row, lyrics, context))
        dialog.open()
        return dialog

    def _extend(self, row: Row, lyrics: str, context: float | None) -> None:
        editor = self.editor
        self._submit_edit(
            self.view_model.extend(
                row, editor.before, editor.after, editor.describe(), lyrics, context
            )
        )

    def render_again(self) -> None:
        """Render the take again from its own audio codes (the language model's part kept):
        another performance of the same song, with a new seed."""
        row = self.current_row()
        if row is not None and row.take is not None:
            self._submit_edit(self.view_model.render_again(row))

    def another_take(self) -> None:
        """The selected song again with its own settings and a new seed."""
        row = self.current_row()
        if row is not None and row.take is not None:
            self._submit_edit(self.view_model.another_take(row))

    def _submit_edit(self, edit: Edit) -> None:
        self.note.say(self.view_model.editing(edit.doing))
        self.link.songs.queue(
            "edit", edit.request, on_error=lambda text: self.note.fail(edit.what, text)
        )
        self.editor.clear()

    def _cover_clicked(self) -> None:
        found = self.view_model.source_of(self.current_row())
        if found:
            self.cover_requested.emit(*found)

    def _reference_clicked(self) -> None:
        found = self.view_model.source_of(self.current_row())
        if found:
            self.reference_requested.emit(*found)

    # stems, layers, completions: their dialogs load when asked
    def open_stems(self) -> StemsDialog | None:
        from ..stems_dialog import open_for

        return open_for(self, self.current_row())

    def open_part(self, task: str) -> PartDialog | None:
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
            selection.select(
                self.model.index(r, 0), Sel.SelectionFlag.Select | Sel.SelectionFlag.Rows
            )
        selection.setCurrentIndex(self.model.index(rows[0], 0), Sel.SelectionFlag.NoUpdate)
        self.note.say(self.view_model.stems_selected(len(stems)))
        return len(stems)

    def _fetched(self, song_id: str) -> None:
        self.view.viewport().update()
        self._update_buttons()
        waiting = self.view_model.play_when_fetched
        if waiting is not None and waiting[0] == song_id:
            self.view_model.play_when_fetched = None
            row = self.model.row(self.model.row_of(*waiting, fetch=True))
            if row is not None:
                self.play_row(row)

    def context_menu(self) -> QMenu | None:
        """The list's own menu for the selection: the same actions as the Song menu (their
        shortcuts shown in the platform's own text)."""
        row = self.current_row()
        if row is None:
            return None
        act = self.song_actions
        menu = QMenu(self)
        names: list[str | None] = ["play", "reveal", "copy_path", None] if row.take else []
        names += ["favourite", "rename"]
        if row.take is not None:
            names += ["export", None, "another_take", "cover", "reference", "render_again"]
            names += ["stems", "layer"]
            names += ["complete"]
        for name in names:
            if name is None:
                menu.addSeparator()
            else:
                menu.addAction(act[name])
        from ..stem_set import stems_of

        if stems_of(self.model.songs(), row.song):
            menu.addAction("Select stems (to drag them out together)", self.select_stems)
        menu.addAction(act["reuse"])
        menu.addSeparator()
        menu.addAction(act["trash"])
        return menu

    def _menu(self, pos: QPoint) -> None:
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
        if take is None or not playable(row):
            return
        path = self.files.ensure(song, take)
        vm, player = self.view_model, self._player
        if path is None:
            if self.files.fetching(song, take):
                vm.play_when_fetched = row.key
                self.note.say(f"Downloading {node_file_name(song, take)} from the node…")
            return
        if vm.playing is not None and vm.playing.key == row.key and player.path == path:
            player.toggle()
            return
        if vm.playing is not None:
            vm.remember(vm.playing.key, player.position_ms())
        if not player.load(path, play=True, at_ms=at_ms):
            self.note.say(player.problem, DANGER)
            return
        vm.playing = row
        vm.remember(row.key, at_ms)
        self.delegate.playing = row.key
        self.view.viewport().update()

    def switch_ab(self) -> None:
        """B: jump to the other of the two takes heard last, at the same point."""
        other = self.view_model.other_heard()
        if other is None:
            self.note.say(AB_HOW)
            return
        row = self.model.row(self.model.row_of(*other, fetch=True))
        if row is None:
            return
        region = self.editor.region  # a loop goes on over the other take
        self.play_row(row, at_ms=self._player.position_ms())
        self.select(*other)
        if region is not None and self.editor.region is None:
            self.editor.select(*region)

    def stop_playback(self) -> None:
        """Stop the sound (the page is left or the app quits)."""
        self._player.stop()

    def shutdown(self) -> None:
        self._player.shutdown()
        self.store.shutdown()
        self.drag_exports.shutdown()

    def _player_state(self, state: str) -> None:
        sounding = state in ("playing", "loading")
        self.play.setText(self.tr("Pause") if sounding else self.tr("Play"))
        self.delegate.sounding = sounding
        self.view.viewport().update()

    def _position(self, ms: int) -> None:
        total = max(1, self._player.duration_ms)
        frac = min(1.0, ms / total)
        self.delegate.play_position = frac
        if not self.seek.isSliderDown():
            self.seek.setValue(int(frac * 1000))
        self.time.setText(f"{human_duration(ms / 1000)} / {human_duration(total / 1000)}")
        if self._playing_here():
            self.editor.set_playhead(ms / 1000)
        playing = self.view_model.playing
        if playing is not None:
            row = self.model.row_of(*playing.key)
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
            on_error=lambda text: self.note.fail(f"mark {song.name!r}", text),
        )

    def export_selected(self) -> ExportDialog | None:
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
            QLineEdit.EchoMode.Normal,
            song.title or song.caption,
        )
        if ok:
            self.link.songs.change(
                song.id,
                title=title.strip(),
                on_error=lambda text: self.note.fail("rename the song", text),
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
        ok = reveal_in_file_manager(path)
        if not ok:
            self.note.say(self.view_model.no_file_manager(path), DANGER)
        return ok

    def copy_path(self) -> None:
        local = self._local_selected()
        if local is not None:
            QGuiApplication.clipboard().setText(os.path.abspath(local))
            self.note.say(f"Copied {local}")

    def _reuse(self) -> None:
        song = self.current()
        if song is not None:
            self.use_settings.emit(song)

    def trash_selected(self, confirm: bool = True) -> list[str]:
        """Move every file of the selected songs (all their takes and sidecars) to the
        trash; the node forgets them. Returns the ids of the songs removed."""
        current = self.current_row()
        rows = self.view.selected_rows() or ([current] if current is not None else [])
        songs = self.view_model.to_trash(rows)
        if not songs:
            return []
        if confirm:
            names = [node_file_name(s, t) for s in songs.values() for t in s.takes]
            answer = QMessageBox.question(
                self, "Move to trash", self.view_model.trash_question(list(songs.values()), names)
            )
            if answer != QMessageBox.StandardButton.Yes:
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
                    on_error=self._failed(f"delete {song.name!r} on the node"),
                )
                continue
            problems = [p for take in song.takes for p in trash_take(take)]
            if problems:
                self.note.fail("move to the trash", ", ".join(problems))
                continue
            moved.append(song.id)
            self._drop(song)
            self.link.songs.forget(
                song.id,
                on_error=self._failed(f"make the node forget {song.name!r} (it is in the trash)"),
            )
        return moved

    def _failed(self, what: str) -> Callable[[str], None]:
        """What says on the message line that ``what`` could not be done, and why."""
        return lambda why: self.note.fail(what, why)

    def _drop(self, song: Song) -> None:
        self._stop_if_playing(song.id)
        self.model.remove(song.id)
        self._update_count()
