"""Songs as a Qt list model, the waveform store, the row delegate and the drag helper.

Model/view keeps 10,000 songs cheap: rows are plain records, painting is done by one
delegate, and waveform peaks are computed in a worker thread once and cached (memory + disk).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from PySide6.QtCore import (QAbstractListModel, QMimeData, QModelIndex, QObject, QRect,
                            QSize, Qt, QUrl, Signal)
from PySide6.QtGui import QColor, QFont, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from .song_records import SongRecord
from .transfer import human_duration

RecordRole = Qt.UserRole + 1


def song_mime_data(paths: Iterable[str]) -> QMimeData:
    """The data a drag out carries: the song files as local-file URLs (nothing else)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(os.path.abspath(p)) for p in paths])
    return mime


class SongsModel(QAbstractListModel):
    """Songs newest first. ``set_songs`` replaces all; ``upsert`` changes or adds one."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._rows: list[SongRecord] = []
        self._index: dict[str, int] = {}

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt API)
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        rec = self._rows[index.row()]
        if role == RecordRole:
            return rec
        if role == Qt.DisplayRole:
            return rec.caption
        if role == Qt.ToolTipRole:
            return rec.path or rec.status_text()
        return None

    def flags(self, index):
        base = super().flags(index)
        rec = self.record(index.row()) if index.isValid() else None
        if rec is not None and rec.path:
            base |= Qt.ItemIsDragEnabled
        return base

    def record(self, row: int) -> SongRecord | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, song_id: str) -> int:
        return self._index.get(song_id, -1)

    def records(self) -> list[SongRecord]:
        return list(self._rows)

    def set_songs(self, records: Iterable[SongRecord]) -> None:
        self.beginResetModel()
        self._rows = sorted(records, key=lambda r: r.created, reverse=True)
        self._index = {r.id: i for i, r in enumerate(self._rows)}
        self.endResetModel()

    def upsert(self, rec: SongRecord) -> None:
        row = self._index.get(rec.id)
        if row is not None:
            self._rows[row] = rec
            idx = self.index(row)
            self.dataChanged.emit(idx, idx)
            return
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._rows.insert(0, rec)
        self._index = {r.id: i for i, r in enumerate(self._rows)}
        self.endInsertRows()

    def remove(self, song_id: str) -> None:
        row = self._index.get(song_id)
        if row is None:
            return
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._rows[row]
        self._index = {r.id: i for i, r in enumerate(self._rows)}
        self.endRemoveRows()


class WaveformStore(QObject):
    """Peaks per file: from memory, else computed in a worker thread (then ``ready``)."""

    ready = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._peaks: dict[str, object] = {}
        self._pending: set[str] = set()
        self._failed: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="waveform")
        self._closed = False

    def get(self, path: str):
        """The peaks if known; otherwise start computing them and return None."""
        found = self._peaks.get(path)
        if found is not None or path in self._failed:
            return found
        if path not in self._pending and not self._closed:
            from . import waveform
            self._pending.add(path)
            future = self._pool.submit(waveform.peaks, path)
            future.add_done_callback(lambda f, p=path: self._finished(p, f))
        return None

    def _finished(self, path: str, future) -> None:  # runs in the worker thread
        try:
            self._peaks[path] = future.result()
        except Exception:
            self._failed.add(path)
        self._pending.discard(path)
        if not self._closed:
            self.ready.emit(path)  # queued to the GUI thread by Qt

    def known(self, path: str) -> bool:
        return path in self._peaks

    def shutdown(self, wait: bool = True) -> None:
        """Drop queued files and join the worker (at most the one file it is reading)."""
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)


class SongDelegate(QStyledItemDelegate):
    ROW_HEIGHT = 64

    def __init__(self, store: WaveformStore, parent=None, files=None):
        super().__init__(parent)
        self.store = store
        self.files = files  # SongFiles: the local (or fetched) copy of a node's song
        self.playing_id: str | None = None
        self.play_position = 0.0  # 0..1 of the playing song
        self._seen: dict[str, tuple[bool, float]] = {}

    def _exists(self, path: str) -> bool:
        """Checked when a row is painted (visible rows only), remembered for a few seconds."""
        import time
        now = time.monotonic()
        known = self._seen.get(path)
        if known is None or now - known[1] > 5.0:
            known = (os.path.exists(path), now)
            self._seen[path] = known
        return known[0]

    def _local(self, rec: SongRecord) -> str | None:
        """The file on this machine to draw (starting its fetch from the node if needed)."""
        if self.files is not None:
            return self.files.ensure(rec)
        return rec.path if rec.state == "done" and rec.path and self._exists(rec.path) else None

    def sizeHint(self, option, index) -> QSize:  # noqa: N802
        return QSize(400, self.ROW_HEIGHT)

    def paint(self, painter: QPainter, option, index) -> None:
        rec: SongRecord = index.data(RecordRole)
        painter.save()
        if option.state & QStyle.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight().color().lighter(170))
        elif index.row() % 2:
            painter.fillRect(option.rect, QColor(0, 0, 0, 8))
        r = option.rect.adjusted(10, 6, -10, -6)
        text_w = min(360, r.width() // 2)
        title = QFont(option.font)
        title.setBold(True)
        painter.setFont(title)
        painter.setPen(option.palette.text().color())
        fm = painter.fontMetrics()
        painter.drawText(QRect(r.left(), r.top(), text_w, r.height() // 2),
                         Qt.AlignLeft | Qt.AlignVCenter,
                         fm.elidedText(rec.caption or "(no caption)", Qt.ElideRight, text_w))
        painter.setFont(option.font)
        bits = [rec.when(), human_duration(rec.duration) if rec.duration else "",
                rec.model, f"seed {rec.seed}" if rec.seed is not None else ""]
        if not rec.finished or rec.state != "done":
            bits.insert(0, rec.status_text())
        elif rec.path and self._local(rec) is None:
            if self.files is not None and self.files.fetching(rec.id):
                bits.insert(0, "downloading…")
            elif self.files is not None and self.files.problem(rec.id):
                bits.insert(0, f"download failed: {self.files.problem(rec.id)}")
            else:
                bits.insert(0, "file moved or deleted")
        meta = "  ·  ".join(b for b in bits if b)
        painter.setPen(QColor("#6b7280") if rec.state != "failed" else QColor("#c0392b"))
        fm = painter.fontMetrics()
        painter.drawText(QRect(r.left(), r.top() + r.height() // 2, text_w, r.height() // 2),
                         Qt.AlignLeft | Qt.AlignVCenter, fm.elidedText(meta, Qt.ElideRight, text_w))
        wave = QRect(r.left() + text_w + 16, r.top() + 2, r.width() - text_w - 16, r.height() - 4)
        self._paint_wave(painter, wave, rec)
        painter.restore()

    def _paint_wave(self, painter: QPainter, rect: QRect, rec: SongRecord) -> None:
        if rect.width() < 20:
            return
        local = self._local(rec) if rec.state == "done" and rec.path else None
        if local is None:
            if rec.state in ("queued", "running"):
                painter.fillRect(rect.adjusted(0, rect.height() // 2 - 3, 0, -rect.height() // 2 + 3),
                                 QColor("#e5e7eb"))
                done = QRect(rect.left(), rect.center().y() - 3, int(rect.width() * rec.progress), 6)
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
        played = self.play_position if rec.id == self.playing_id else -1.0
        top = []
        bottom = []
        step = max(1, n // max(1, rect.width() // 2))
        for i in range(0, n, step):
            x = rect.left() + rect.width() * i / n
            h = max(0.5, float(peaks[i:i + step].max()) * half)
            top.append((x, mid - h))
            bottom.append((x, mid + h))
        from PySide6.QtCore import QPointF
        poly = QPolygonF([QPointF(x, y) for x, y in top] +
                         [QPointF(x, y) for x, y in reversed(bottom)])
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor("#93b4e0"))
        painter.drawPolygon(poly)
        if played >= 0:
            painter.save()
            painter.setClipRect(QRect(rect.left(), rect.top(), int(rect.width() * played), rect.height()))
            painter.setBrush(QColor("#2f7fd8"))
            painter.drawPolygon(poly)
            painter.restore()
