"""The Songs list as a Qt model (one row per take), the waveform store, the row delegate and
the drag helper.

Model/view keeps 10,000 songs cheap: rows are plain records, painting is done by one
delegate, a search filters a prepared lower-case text per song, and waveform peaks are
computed off the GUI thread once and cached (memory + disk), their results handed back on
the GUI thread by the app's one way of running background work (:class:`.tasks.Tasks`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Iterable

from PySide6.QtCore import (
    QMimeData,
    QObject,
    QPointF,
    QRect,
    QRegularExpression,
    QSize,
    QSortFilterProxyModel,
    Qt,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QPainter,
    QPen,
    QPolygonF,
    QStandardItem,
    QStandardItemModel,
)
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from ..song import Song, SongState
from .song_records import (
    Row,
    facts,
    family_order,
    parent_of,
    rows_of,
    search_text,
    status_text,
    when,
)
from .tasks import Tasks

RowRole = Qt.UserRole + 1
SearchRole = Qt.UserRole + 2


def song_mime_data(paths: Iterable[str]) -> QMimeData:
    """The data a drag out carries: the song files as local-file URLs (nothing else)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(os.path.abspath(p)) for p in paths])
    return mime


# a QStandardItem's own flags less editing and dropping onto it, set in one call (10,000 rows)
ITEM_FLAGS = Qt.ItemIsSelectable | Qt.ItemIsEnabled | Qt.ItemIsDragEnabled


class SongsModel(QSortFilterProxyModel):
    """Every take of every song, newest song first, takes in order under their song.

    ``set_songs`` replaces all, ``upsert`` changes or adds one song, ``remove`` drops one;
    ``set_filter`` shows only what matches a search (every word, in title, caption, lyrics,
    model, key, tempo) and, when asked, only favourites.

    The rows live in a QStandardItemModel and the filter is Qt's own proxy: laying out and
    filtering 10,000 rows runs in C++, where a Python model would be asked for its row count
    twice per row on every keystroke."""

    FAVOURITE = "\x07favourite"

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.rows = QStandardItemModel(self)
        self.setSourceModel(self.rows)
        self.setFilterRole(SearchRole)
        self._songs: dict[str, Song] = {}
        self._items: dict[str, list[QStandardItem]] = {}  # song id → its items, in order
        self._texts: dict[str, str] = {}  # song id → its search text
        self._query = ""
        self._favourites_only = False

    # -- reading -------------------------------------------------------------------------
    def row(self, n: int) -> Row | None:
        if not 0 <= n < self.rowCount():
            return None
        return self.index(n, 0).data(RowRole)

    def song(self, song_id: str) -> Song | None:
        return self._songs.get(song_id)

    def songs(self) -> list[Song]:
        return list(self._songs.values())

    def shown_songs(self) -> int:
        """How many songs the filter lets through (a song's rows share its search text)."""
        words = self._words()
        if not words:
            return len(self._songs)
        texts = self._texts.values()
        if len(words) == 1:
            word = words[0]
            return sum(1 for text in texts if word in text)
        return sum(1 for text in texts if all(w in text for w in words))

    def _words(self) -> list[str]:
        return self._query.split() + ([self.FAVOURITE] if self._favourites_only else [])

    def row_of(self, song_id: str, take: int | None = None) -> int:
        """The shown row of a song's take (its first row without ``take``); -1 when not."""
        for item in self._items.get(song_id, ()):
            row: Row = item.data(RowRole)
            if take is None or (row.take is not None and row.take.n == take):
                found = self.mapFromSource(item.index())
                return found.row() if found.isValid() else -1
        return -1

    def flags(self, index):
        base = super().flags(index)
        row = index.data(RowRole) if index.isValid() else None
        if row is not None and row.take is not None:
            base |= Qt.ItemIsDragEnabled
        return base

    # -- changing ------------------------------------------------------------------------
    def set_songs(self, songs: Iterable[Song]) -> None:
        """All songs, each family together (a song, then its versions newest first)."""
        self._songs = {s.id: s for s in songs}
        self._texts = {}
        ordered = family_order(self._songs)
        self._items = {s.id: self._make_items(s, depth) for s, depth in ordered}
        self.beginResetModel()
        self.rows.blockSignals(True)
        self.rows.clear()
        root = self.rows.invisibleRootItem()
        for song, _depth in ordered:
            for item in self._items[song.id]:
                root.appendRow(item)
        self.rows.blockSignals(False)
        self.endResetModel()

    def upsert(self, song: Song) -> None:
        old = self._items.get(song.id)
        self._songs[song.id] = song
        if old is None and parent_of(song) in self._songs:
            self.set_songs(list(self._songs.values()))  # a new version joins its family
            return
        depth = old[0].data(RowRole).depth if old else 0
        fresh = rows_of(song, depth)
        if old is not None and len(old) == len(fresh):  # same rows, new content
            text = self._texts[song.id] = self._search_text(song)
            for item, row in zip(old, fresh):
                item.setData(row, RowRole)
                item.setData(text, SearchRole)
                item.setData(row.label, Qt.DisplayRole)
            return
        at = old[0].row() if old else 0  # a new song: the newest
        if old:
            self.rows.removeRows(at, len(old))
        items = self._make_items(song, depth)
        for offset, item in enumerate(items):
            self.rows.insertRow(at + offset, item)
        self._items[song.id] = items

    def remove(self, song_id: str) -> None:
        items = self._items.pop(song_id, None)
        self._songs.pop(song_id, None)
        self._texts.pop(song_id, None)
        if items:
            self.rows.removeRows(items[0].row(), len(items))

    def set_filter(self, query: str = "", favourites_only: bool = False) -> None:
        query = " ".join(query.lower().split())
        if (query, favourites_only) == (self._query, self._favourites_only):
            return
        self._query, self._favourites_only = query, favourites_only
        words = self._words()
        if not words:
            self.setFilterFixedString("")
        elif len(words) == 1:
            self.setFilterFixedString(words[0])
        else:  # every word, anywhere, in any order
            pattern = "^" + "".join(f"(?=.*{QRegularExpression.escape(w)})" for w in words)
            self.setFilterRegularExpression(
                QRegularExpression(pattern, QRegularExpression.DotMatchesEverythingOption)
            )

    # -- inside --------------------------------------------------------------------------
    def _search_text(self, song: Song) -> str:
        return search_text(song) + (f" {self.FAVOURITE}" if song.favourite else "")

    def _make_items(self, song: Song, depth: int = 0) -> list[QStandardItem]:
        text = self._texts[song.id] = self._search_text(song)
        items = []
        for row in rows_of(song, depth):
            item = QStandardItem(row.label)
            item.setData(row, RowRole)
            item.setData(text, SearchRole)
            item.setFlags(ITEM_FLAGS)
            items.append(item)
        return items


class WaveformStore(QObject):
    """Peaks per file: from memory, else computed off the GUI thread (then ``ready``)."""

    ready = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._peaks: dict[str, object] = {}
        self._failed: set[str] = set()
        self.tasks = Tasks()
        self._closed = False

    def get(self, path: str):
        """The peaks if known; otherwise start computing them and return None."""
        found = self._peaks.get(path)
        if found is not None or path in self._failed or self._closed:
            return found
        key = f"peaks:{path}"
        if not self.tasks.running(key):
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no loop (a bare widget): drawn as a line
                return None
            from . import waveform

            self.tasks.start(
                key,
                asyncio.to_thread(waveform.peaks, path),
                on_done=lambda peaks, p=path: self._computed(p, peaks),
                on_error=lambda _text, p=path: self._failed.add(p),
            )
        return None

    def _computed(self, path: str, peaks) -> None:  # on the GUI thread
        self._peaks[path] = peaks
        if not self._closed:
            self.ready.emit(path)

    def known(self, path: str) -> bool:
        return path in self._peaks

    def shutdown(self) -> None:
        """Stop computing (a file being read finishes in its worker and is dropped)."""
        self._closed = True
        self.tasks.cancel_all()


class SongDelegate(QStyledItemDelegate):
    """Paints one row: ▶ button, name and facts (or status), favourite star, waveform."""

    ROW_HEIGHT = 64
    PLAY_W = 34
    STAR_W = 22

    def __init__(self, store: WaveformStore, parent=None, files=None):
        super().__init__(parent)
        self.store = store
        self.files = files  # SongFiles: the local (or fetched) copy of a node's take
        self.playing: tuple[str, int] | None = None  # (song id, take) playing or paused
        self.sounding = False  # playing now (not paused)
        self.play_position = 0.0  # 0..1 of the playing take

    def _local(self, row: Row) -> str | None:
        """The file on this machine to draw (starting its fetch from the node if needed)."""
        if row.take is None or row.song.state != SongState.DONE:
            return None
        if self.files is not None:
            return self.files.ensure(row.song, row.take)
        return row.take.audio if os.path.exists(row.take.audio) else None

    def sizeHint(self, option, index) -> QSize:  # noqa: N802
        return QSize(400, self.ROW_HEIGHT)

    # -- hit areas (the page's view asks where a click landed) --------------------------
    def play_rect(self, rect: QRect) -> QRect:
        return QRect(rect.left() + 6, rect.center().y() - 13, 26, 26)

    def star_rect(self, rect: QRect, indent: int) -> QRect:
        """Level with the title line (the row's upper half, inside its 4-px margin)."""
        return QRect(
            rect.left() + self.PLAY_W + 10 + indent,
            rect.top() + 4,
            self.STAR_W,
            (rect.height() - 8) // 2,
        )

    @staticmethod
    def indent(row: Row) -> int:
        """Versions sit under their song, takes under their version."""
        return 28 * row.depth + (0 if row.first else 18)

    def paint(self, painter: QPainter, option, index) -> None:
        row: Row = index.data(RowRole)
        song = row.song
        painter.save()
        if option.state & QStyle.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight().color().lighter(170))
        elif self._band(index):
            painter.fillRect(option.rect, QColor(0, 0, 0, 8))
        self._paint_play(painter, option.rect, row)
        indent = self.indent(row)
        r = option.rect.adjusted(self.PLAY_W + 10 + indent, 4, -10, -4)
        text_w = min(380, r.width() // 2)
        if row.first:
            star = self.star_rect(option.rect, indent)
            painter.setPen(QColor("#e0a800") if song.favourite else QColor("#c4c8cf"))
            painter.drawText(star, Qt.AlignLeft | Qt.AlignVCenter, "★" if song.favourite else "☆")
        title = QFont(option.font)
        title.setBold(row.first)
        painter.setFont(title)
        painter.setPen(option.palette.text().color())
        fm = painter.fontMetrics()
        name_left = r.left() + (self.STAR_W if row.first else 0)
        label = (
            row.label
            if (row.take is None or len(song.takes) < 2 or not row.first)
            else f"{row.label}  ·  Take 1"
        )
        painter.drawText(
            QRect(name_left, r.top(), text_w - (name_left - r.left()), r.height() // 2),
            Qt.AlignLeft | Qt.AlignVCenter,
            fm.elidedText(label, Qt.ElideRight, text_w - (name_left - r.left())),
        )
        painter.setFont(option.font)
        bits = facts(song, row.take)
        if row.first:
            bits.insert(0, when(song))
        if song.state != SongState.DONE:
            bits.insert(0, status_text(song))
        elif row.take is not None and self._local(row) is None:
            if self.files is not None and self.files.fetching(song, row.take):
                bits.insert(0, "downloading…")
            elif self.files is not None and self.files.problem(song, row.take):
                bits.insert(0, f"download failed: {self.files.problem(song, row.take)}")
            else:
                bits.insert(0, "file moved or deleted")
        meta = "  ·  ".join(b for b in bits if b)
        painter.setPen(QColor("#6b7280") if song.state != SongState.FAILED else QColor("#c0392b"))
        fm = painter.fontMetrics()
        painter.drawText(
            QRect(r.left(), r.top() + r.height() // 2, text_w, r.height() // 2),
            Qt.AlignLeft | Qt.AlignVCenter,
            fm.elidedText(meta, Qt.ElideRight, text_w),
        )
        wave = QRect(r.left() + text_w + 16, r.top() + 2, r.width() - text_w - 16, r.height() - 4)
        self._paint_wave(painter, wave, row)
        painter.restore()

    @staticmethod
    def _band(index) -> bool:
        """Alternate the background per song, not per row: a song's takes share a band."""
        model = index.model()
        row: Row = index.data(RowRole)
        return model.row_of(row.song.id) % 2 == 1 if hasattr(model, "row_of") else False

    def _paint_play(self, painter: QPainter, rect: QRect, row: Row) -> None:
        if row.take is None:
            return
        button = self.play_rect(rect)
        playing = self.playing == row.key and self.sounding
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor("#2f7fd8") if self.playing == row.key else QColor("#d9e4f5"))
        painter.drawEllipse(button)
        painter.setBrush(QColor("white") if self.playing == row.key else QColor("#2f7fd8"))
        c = button.center()
        if playing:  # pause bars
            painter.drawRect(QRect(c.x() - 5, c.y() - 6, 4, 12))
            painter.drawRect(QRect(c.x() + 2, c.y() - 6, 4, 12))
        else:  # play triangle
            painter.drawPolygon(
                QPolygonF(
                    [
                        QPointF(c.x() - 4, c.y() - 7),
                        QPointF(c.x() - 4, c.y() + 7),
                        QPointF(c.x() + 7, c.y()),
                    ]
                )
            )

    def _paint_wave(self, painter: QPainter, rect: QRect, row: Row) -> None:
        if rect.width() < 20:
            return
        song = row.song
        local = self._local(row)
        if local is None:
            if song.state in (SongState.QUEUED, SongState.RUNNING):
                painter.fillRect(
                    rect.adjusted(0, rect.height() // 2 - 3, 0, -rect.height() // 2 + 3),
                    QColor("#e5e7eb"),
                )
                done = QRect(
                    rect.left(), rect.center().y() - 3, int(rect.width() * song.progress), 6
                )
                painter.fillRect(done, QColor("#2f7fd8"))
            return
        peaks = self.store.get(local)
        mid = rect.center().y()
        if peaks is None:
            painter.setPen(QPen(QColor("#d1d5db"), 1))
            painter.drawLine(rect.left(), mid, rect.right(), mid)
            return
        n = len(peaks)
        half = rect.height() / 2
        played = self.play_position if row.key == self.playing else -1.0
        top = []
        bottom = []
        step = max(1, n // max(1, rect.width() // 2))
        for i in range(0, n, step):
            x = rect.left() + rect.width() * i / n
            h = max(0.5, float(peaks[i : i + step].max()) * half)
            top.append((x, mid - h))
            bottom.append((x, mid + h))
        poly = QPolygonF(
            [QPointF(x, y) for x, y in top] + [QPointF(x, y) for x, y in reversed(bottom)]
        )
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor("#93b4e0"))
        painter.drawPolygon(poly)
        if played >= 0:
            painter.save()
            painter.setClipRect(
                QRect(rect.left(), rect.top(), int(rect.width() * played), rect.height())
            )
            painter.setBrush(QColor("#2f7fd8"))
            painter.drawPolygon(poly)
            painter.restore()
