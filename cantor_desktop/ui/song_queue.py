"""Compose's queue: the songs in flight, a row each (stage, progress, time left, and Cancel,
Play or Retry).

Until the first song there is only a line that says what will show here: the table, its
header and the progress bars are built when a song first arrives. They are Qt's item-view
machinery, which a window that has made no song yet does not need (~0.3 MiB at start); the
Qt classes are imported where they are first used for the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from .translation import QT_TRANSLATE_NOOP

if TYPE_CHECKING:
    from PySide6.QtWidgets import QProgressBar, QPushButton, QTreeWidget, QTreeWidgetItem

from ..song.record import Song, SongState
from ..views.song_records import status_text
from ..views.transfer import human_duration

EMPTY_TEXT = QT_TRANSLATE_NOOP("SongQueue", "Songs you generate show here while they are made.")
COLUMNS = [
    QT_TRANSLATE_NOOP("SongQueue", "Song"),
    QT_TRANSLATE_NOOP("SongQueue", "Stage"),
    QT_TRANSLATE_NOOP("SongQueue", "Progress"),
    QT_TRANSLATE_NOOP("SongQueue", "Time left"),
    "",
]
FIXED_WIDTHS = ((1, 170), (2, 160), (3, 80), (4, 90))


class SongQueue(QWidget):
    """The queue's rows, keyed by song id. ``action`` carries the song id of a row's button
    (what it does depends on the song's state: see :meth:`action_text`)."""

    action = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.empty = QLabel(self.tr(EMPTY_TEXT))
        self.empty.setEnabled(False)  # the style's quiet text colour
        self._layout.addWidget(self.empty)
        self._layout.addStretch(1)
        self.tree: QTreeWidget | None = None  # made with the first row
        self._rows: dict[str, QTreeWidgetItem] = {}

    def _build_tree(self) -> QTreeWidget:
        from PySide6.QtWidgets import QHeaderView, QTreeWidget

        tree = QTreeWidget()
        tree.setColumnCount(len(COLUMNS))
        tree.setHeaderLabels([self.tr(c) if c else c for c in COLUMNS])
        tree.setRootIsDecorated(False)
        header = tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col, width in FIXED_WIDTHS:
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(col, width)
        self.empty.hide()
        while self._layout.count() > 1:  # the stretch under the empty line
            self._layout.takeAt(1)
        self._layout.addWidget(tree)
        self.tree = tree
        return tree

    def show_song(self, song: Song) -> None:
        """Add or update the song's row; a song already finished when first seen is not
        added (history belongs to Songs; the queue shows what is in flight)."""
        item = self._rows.get(song.id)
        if item is None:
            if song.is_finished:
                return
            item = self._add_row(song)
        bar, button = self._widgets(item)
        item.setText(0, song.name or song.id)
        text = status_text(song)
        item.setText(1, text.split(" — ")[0] if song.state == SongState.RUNNING else text)
        item.setToolTip(1, song.error or "")
        bar.setValue(int(song.progress * 1000))
        bar.setFormat(f"{int(song.progress * 100)}%")
        eta = song.eta if song.state == SongState.RUNNING else None
        item.setText(3, "" if eta is None else "under 1 s" if eta < 1 else human_duration(eta))
        seed = song.takes[0].seed if song.takes else None
        if song.state == SongState.DONE:
            item.setText(1, f"Done · seed {seed}" if seed is not None else "Done")
        label, tip = action_text(song.state)
        button.setText(label)
        button.setToolTip(tip)

    def _widgets(self, item: QTreeWidgetItem) -> tuple[QProgressBar, QPushButton]:
        """A row's progress bar and button."""
        from PySide6.QtWidgets import QProgressBar, QPushButton

        assert self.tree is not None  # a row has been added
        bar, button = self.tree.itemWidget(item, 2), self.tree.itemWidget(item, 4)
        assert isinstance(bar, QProgressBar) and isinstance(button, QPushButton)
        return bar, button

    def _add_row(self, song: Song) -> QTreeWidgetItem:
        from PySide6.QtWidgets import QProgressBar, QPushButton, QTreeWidgetItem

        tree = self.tree or self._build_tree()
        item = QTreeWidgetItem([song.name or song.id])
        tree.insertTopLevelItem(0, item)
        bar = QProgressBar()
        bar.setRange(0, 1000)
        bar.setTextVisible(True)
        button = QPushButton("Cancel")
        button.clicked.connect(lambda _=False, sid=song.id: self.action.emit(sid))
        tree.setItemWidget(item, 2, bar)
        tree.setItemWidget(item, 4, button)
        self._rows[song.id] = item
        return item

    def progress(self, song_id: str) -> float:
        """The row's progress, 0–1 (0 when the song has no row)."""
        item = self._rows.get(song_id)
        return self._widgets(item)[0].value() / 1000 if item is not None else 0.0

    def row_count(self) -> int:
        return len(self._rows)


def action_text(state: SongState) -> tuple[str, str]:
    """A row's button for a song in ``state``: (label, tooltip)."""
    if state == SongState.DONE:
        return "Play", "Open it in Songs and play it"
    if state in (SongState.FAILED, SongState.CANCELLED):
        return "Retry", "Queue it again with the same settings"
    return "Cancel", ""
