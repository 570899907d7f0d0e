"""The Songs list as a Qt model (one row per take), the waveform store, the row delegate and
the drag helper.

Model/view keeps 10,000 songs cheap: rows are plain records handed to the view a batch at a
time as they scroll into view (``canFetchMore``/``fetchMore``), painting is done by one
delegate, a search filters a prepared lower-case text per song (made in idle moments after
the songs arrive), and a waveform is drawn from a small cached summary of the file (its
peaks, computed off the GUI thread once and kept in memory and on disk; the shape at a
row's size is kept too), never from the audio itself.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QMimeData,
    QModelIndex,
    QPersistentModelIndex,
    QObject,
    QPointF,
    QRect,
    QSize,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from ..song.record import Song, SongState
from . import theme
from ..views.song_records import (
    Row,
    facts,
    family_order,
    made_on,
    parent_of,
    rows_of,
    search_text,
    status_text,
    when,
)
from .tasks import Tasks

AnyIndex = QModelIndex | QPersistentModelIndex
RowRole = Qt.ItemDataRole.UserRole + 1


def song_mime_data(paths: Iterable[str]) -> QMimeData:
    """The data a drag out carries: the song files as local-file URLs (nothing else)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(os.path.abspath(p)) for p in paths])
    return mime


ROW_FLAGS = Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled
TAKE_FLAGS = ROW_FLAGS | Qt.ItemFlag.ItemIsDragEnabled


class SongsModel(QAbstractListModel):
    """Every take of every song, newest song first, takes in order under their song.

    ``set_songs`` replaces all, ``upsert`` changes or adds one song, ``remove`` drops one;
    ``set_filter`` shows only what matches a search (every word, in title, caption, lyrics,
    model, key, tempo) and, when asked, only favourites.

    The songs that pass the filter are kept in order (``_matching``, by id); their rows are
    made and handed to the view :data:`BATCH` at a time, when the view scrolls near the end
    of what it has (``fetchMore``), so opening the page or typing a letter costs the same
    for 100 songs as for 10,000: the rows on screen, not the rows there are."""

    BATCH = 64  # rows handed to the view at a time: a few screens of 64-px rows
    TEXTS_PER_TICK = 400  # search texts made per idle moment after the songs arrive

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._songs: dict[str, Song] = {}
        self._order: list[str] = []  # every song's id, families together
        self._depth: dict[str, int] = {}  # song id → 0 for a song, 1… for its versions
        self._texts: dict[str, str] = {}  # song id → its search text (made when needed)
        self._query = ""
        self._favourites_only = False
        self._matching: list[str] = []  # the songs that pass, in order
        self._next = 0  # the first of _matching not made into rows yet
        self._rows: list[Row] = []  # the rows the view has
        self._first: dict[str, int] | None = None  # song id → its first row (made on need)
        self._band: dict[str, int] = {}
        self._pending: list[str] = []  # songs whose search text is still to be made
        self._found: dict[tuple[str, bool], list[str]] = {}  # recent searches' songs
        self._made: dict[str, list[Row]] = {}  # a song's rows, made once (until it changes)
        self._texts_timer = QTimer(self)
        self._texts_timer.setSingleShot(True)
        self._texts_timer.timeout.connect(self._make_some_texts)

    # -- Qt's model -------------------------------------------------------------------------
    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if role == RowRole:
            return self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole or role == Qt.ItemDataRole.AccessibleTextRole:
            return self._rows[index.row()].label
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return TAKE_FLAGS if self._rows[index.row()].take is not None else ROW_FLAGS

    def canFetchMore(self, parent: AnyIndex = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and self._next < len(self._matching)

    def fetchMore(self, parent: AnyIndex = QModelIndex()) -> None:  # noqa: B008
        if parent.isValid():
            return
        rows = self._make_rows(self.BATCH)
        if rows:
            at = len(self._rows)
            self.beginInsertRows(QModelIndex(), at, at + len(rows) - 1)
            self._rows.extend(rows)
            self._first = None
            self.endInsertRows()

    def _make_rows(self, count: int) -> list[Row]:
        """The rows of the next songs of ``_matching``: at least ``count`` (or all left)."""
        rows: list[Row] = []
        matching, made = self._matching, self._made
        n = self._next
        while n < len(matching) and len(rows) < count:
            song_id = matching[n]
            found = made.get(song_id)
            if found is None:
                found = made[song_id] = self._rows_of(song_id)
            rows.extend(found)
            n += 1
        self._next = n
        return rows

    def _rows_of(self, song_id: str) -> list[Row]:
        return rows_of(self._songs[song_id], self._depth.get(song_id, 0))

    # -- reading -------------------------------------------------------------------------
    def row(self, n: int) -> Row | None:
        return self._rows[n] if 0 <= n < len(self._rows) else None

    def song(self, song_id: str) -> Song | None:
        return self._songs.get(song_id)

    def songs(self) -> list[Song]:
        return list(self._songs.values())

    def song_count(self) -> int:
        return len(self._songs)

    def shown_songs(self) -> int:
        """How many songs the filter lets through (made into rows or not yet)."""
        return len(self._matching)

    def band(self, song_id: str) -> int:
        """0 or 1: the songs shown alternate between two grounds (a song's takes share
        one)."""
        self._index()
        return self._band.get(song_id, 0)

    def row_of(self, song_id: str, take: int | None = None, *, fetch: bool = False) -> int:
        """The row of a song's take (its first row without ``take``); -1 when it has none
        (filtered out, or, unless ``fetch``, not handed to the view yet)."""
        if fetch:
            self._fetch_until(song_id)
        n = self._index().get(song_id)
        if n is None:
            return -1
        if take is None:
            return n
        rows = self._rows
        while n < len(rows) and rows[n].song.id == song_id:
            found = rows[n].take
            if found is not None and found.n == take:
                return n
            n += 1
        return -1

    def _index(self) -> dict[str, int]:
        """Song id → its first row, for the rows the view has (made again after a change),
        and every other song's band."""
        if self._first is None:
            first: dict[str, int] = {}
            band: dict[str, int] = {}
            for n, r in enumerate(self._rows):
                if r.first:
                    band[r.song.id] = len(first) % 2
                    first[r.song.id] = n
            self._first, self._band = first, band
        return self._first

    def _fetch_until(self, song_id: str) -> None:
        """Hand the view the rows up to a song's (one selected from elsewhere)."""
        if song_id in self._index():
            return
        try:
            n = self._matching.index(song_id, self._next)
        except ValueError:
            return
        while self._next <= n:
            self.fetchMore()

    # -- changing ------------------------------------------------------------------------
    def set_songs(self, songs: Iterable[Song]) -> None:
        """All songs, each family together (a song, then its versions newest first)."""
        self._found.clear()
        self._made = {}
        self._songs = {s.id: s for s in songs}
        self._reorder()
        self._texts = {}
        self._pending = list(self._order)
        self._refilter()
        self._texts_timer.start(0)

    def upsert(self, song: Song) -> None:
        self._found.clear()
        self._made.pop(song.id, None)
        known = song.id in self._songs
        self._songs[song.id] = song
        self._texts.pop(song.id, None)
        if not known and parent_of(song) in self._songs:
            self._reorder()  # a new version joins its family
            self._refilter(keep=True)
            return
        if not known:
            self._order.insert(0, song.id)  # the newest song
            self._depth[song.id] = 0
        passes = self._passes(song)
        shown = self._index().get(song.id)
        if shown is not None and passes:
            self._replace_rows(song)
        elif shown is not None or (known and not passes and song.id in self._matching):
            self._take_out(song.id)
        elif passes and (not known or song.id not in self._matching):
            self._put_in(song.id)

    def remove(self, song_id: str) -> None:
        if self._songs.pop(song_id, None) is None:
            return
        self._found.clear()
        self._made.pop(song_id, None)
        self._texts.pop(song_id, None)
        self._order.remove(song_id)
        self._depth.pop(song_id, None)
        if song_id in self._matching:
            self._take_out(song_id)

    def set_filter(self, query: str = "", favourites_only: bool = False) -> None:
        query = " ".join(query.lower().split())
        if (query, favourites_only) == (self._query, self._favourites_only):
            return
        self._query, self._favourites_only = query, favourites_only
        self._refilter()

    # -- inside --------------------------------------------------------------------------
    def _reorder(self) -> None:
        self._made = {}
        ordered = family_order(self._songs)
        self._order = [s.id for s, _d in ordered]
        self._depth = {s.id: d for s, d in ordered if d}

    def _refilter(self, keep: bool = False) -> None:
        """Pass the songs through the filter again and hand the view its first batch
        (``keep``: as many rows as it had)."""
        had = len(self._rows)
        self.beginResetModel()
        self._matching = self._search()
        self._next = 0
        self._rows = self._make_rows(max(self.BATCH, had if keep else 0))
        self._first = None
        self.endResetModel()

    def _search(self) -> list[str]:
        """The ids of the songs that pass, in order. A query that only grew (a letter
        typed) looks only among what the shorter one found; a query met a moment ago (a
        letter taken back) is remembered."""
        query, favourites = self._query, self._favourites_only
        if not query and not favourites:
            return list(self._order)
        found = self._found.get((query, favourites))
        if found is not None:
            return list(found)
        among = self._order
        words = asked = set(query.split())
        best: tuple[int, int] | None = None
        for (earlier, fav), ids in self._found.items():
            # every word of the longer query holds a word of this one: a subset of its songs
            if fav != favourites or not earlier or not query.startswith(earlier):
                continue
            if best is None or (len(ids), -len(earlier)) < best:
                best = (len(ids), -len(earlier))
                among = ids
                # its songs hold each of its words already: only the new or longer ones are
                # looked for (a letter typed checks one word, not every word again)
                words = asked - set(earlier.split())
        songs, texts = self._songs, self._texts
        if favourites:
            among = [i for i in among if songs[i].favourite]
        if query:
            if len(texts) < len(songs):  # texts is a subset of songs: some are still to make
                for i in [i for i in among if i not in texts]:
                    texts[i] = search_text(songs[i])
            # word by word, the longest (the likeliest to narrow) first: each pass is one
            # tight comparison per song still in
            for word in sorted(words, key=len, reverse=True):
                among = [i for i in among if word in texts[i]]
        if len(self._found) > 32:
            self._found.clear()
        self._found[(query, favourites)] = among
        return list(among)

    def _passes(self, song: Song) -> bool:
        if self._favourites_only and not song.favourite:
            return False
        query = self._query
        if not query:
            return True
        text = self._texts.get(song.id)
        if text is None:
            text = self._texts[song.id] = search_text(song)
        if " " not in query:
            return query in text
        return all(word in text for word in query.split())

    def _make_some_texts(self) -> None:
        """Search texts, a few hundred per idle moment once the songs are in: the first
        keystroke then only compares (making all 10,000 at once would cost it ~0.1 s)."""
        texts, pending, songs = self._texts, self._pending, self._songs
        for _ in range(min(self.TEXTS_PER_TICK, len(pending))):
            song_id = pending.pop()
            song = songs.get(song_id)
            if song is not None and song_id not in texts:
                texts[song_id] = search_text(song)
        if pending:
            self._texts_timer.start(0)

    def _span(self, song_id: str) -> tuple[int, int]:
        """(first row, number of rows) of a song the view has."""
        start = self._index()[song_id]
        rows = self._rows
        end = start + 1
        while end < len(rows) and rows[end].song.id == song_id:
            end += 1
        return start, end - start

    def _replace_rows(self, song: Song) -> None:
        start, count = self._span(song.id)
        fresh = self._made[song.id] = self._rows_of(song.id)
        if len(fresh) == count:  # same rows, new content
            self._rows[start : start + count] = fresh
            self.dataChanged.emit(self.index(start, 0), self.index(start + count - 1, 0))
            return
        self.beginRemoveRows(QModelIndex(), start, start + count - 1)
        del self._rows[start : start + count]
        self._first = None
        self.endRemoveRows()
        self.beginInsertRows(QModelIndex(), start, start + len(fresh) - 1)
        self._rows[start:start] = fresh
        self._first = None
        self.endInsertRows()

    def _take_out(self, song_id: str) -> None:
        at = self._matching.index(song_id)
        if at >= self._next:  # not made into rows yet
            del self._matching[at]
            return
        start, count = self._span(song_id)
        self.beginRemoveRows(QModelIndex(), start, start + count - 1)
        del self._rows[start : start + count]
        del self._matching[at]
        self._next -= 1
        self._first = None
        self.endRemoveRows()

    def _put_in(self, song_id: str) -> None:
        """A song that passes now, at its place in the order (the top, for a new one)."""
        place = {sid: n for n, sid in enumerate(self._order)}
        mine = place[song_id]
        at = next(
            (n for n, sid in enumerate(self._matching) if place.get(sid, -1) > mine),
            len(self._matching),
        )
        all_made = self._next == len(self._matching)
        self._matching.insert(at, song_id)
        if at < self._next or all_made:  # among the rows the view has: made now
            start = self._index()[self._matching[at + 1]] if at < self._next else len(self._rows)
            fresh = self._made[song_id] = self._rows_of(song_id)
            self.beginInsertRows(QModelIndex(), start, start + len(fresh) - 1)
            self._rows[start:start] = fresh
            self._next += 1
            self._first = None
            self.endInsertRows()


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

            def computed(peaks: Any) -> None:
                self._computed(path, peaks)

            def failed(_text: str) -> None:
                self._failed.add(path)

            self.tasks.start(
                key, asyncio.to_thread(waveform.peaks, path), on_done=computed, on_error=failed
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
    """Paints one row: a large ▶ button, name and facts (or status), favourite star, and the
    waveform (the played part in the accent). Colours come from :mod:`.theme` at paint
    time, so a switch between light and dark shows at once."""

    ROW_HEIGHT = 64
    PLAY = 36  # the play button's diameter: a large target
    PLAY_W = 46  # the room it takes at the row's left
    STAR_W = 22
    WAVES_KEPT = 256  # waveform shapes kept, by file and size
    LINES_KEPT = 1024  # rows' words kept, by song state and width

    def __init__(self, store: WaveformStore, parent=None, files=None):
        super().__init__(parent)
        self.store = store
        self.files = files  # SongFiles: the local (or fetched) copy of a node's take
        self.playing: tuple[str, int] | None = None  # (song id, take) playing or paused
        self.sounding = False  # playing now (not paused)
        self.play_position = 0.0  # 0..1 of the playing take
        self._shapes: OrderedDict[tuple, tuple[object, QPolygonF]] = OrderedDict()
        self._lines: OrderedDict[tuple, tuple[Song, str, str]] = OrderedDict()

    def _local(self, row: Row) -> str | None:
        """The file on this machine to draw (starting its fetch from the node if needed)."""
        if row.take is None or row.song.state != SongState.DONE:
            return None
        if self.files is not None:
            return self.files.ensure(row.song, row.take)
        return row.take.audio if os.path.exists(row.take.audio) else None

    def sizeHint(self, option, index) -> QSize:
        return QSize(400, self.ROW_HEIGHT)

    # -- hit areas (the page's view asks where a click landed) --------------------------
    def play_rect(self, rect: QRect) -> QRect:
        return QRect(rect.left() + 6, rect.center().y() - self.PLAY // 2, self.PLAY, self.PLAY)

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

    @staticmethod
    def row_colours(selected: bool, band: int, failed: bool) -> tuple[str, str, str]:
        """(ground, title, facts) of a row: what the contrast test measures, too."""
        c = theme.colours()
        ground = c.selection if selected else (c.surface_alt if band else c.surface)
        return ground, c.text, c.danger if failed else c.muted

    def paint(self, painter: QPainter, option, index) -> None:
        row: Row = index.data(RowRole)
        song = row.song
        c = theme.colours()
        model = index.model()
        band = model.band(song.id) if hasattr(model, "band") else 0
        ground, title_colour, facts_colour = self.row_colours(
            bool(option.state & QStyle.StateFlag.State_Selected),
            band,
            song.state == SongState.FAILED,
        )
        painter.save()
        painter.fillRect(option.rect, QColor(ground))
        self._paint_play(painter, option.rect, row)
        indent = self.indent(row)
        r = option.rect.adjusted(self.PLAY_W + 10 + indent, 4, -10, -4)
        text_w = min(380, r.width() // 2)
        if row.first:
            star = self.star_rect(option.rect, indent)
            painter.setPen(QColor(c.favourite if song.favourite else c.muted))
            painter.drawText(
                star,
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                "★" if song.favourite else "☆",
            )
        title = QFont(option.font)
        title.setBold(row.first)
        name_left = r.left() + (self.STAR_W if row.first else 0)
        name_w = text_w - (name_left - r.left())
        local = self._local(row)
        name, meta = self._words(row, local, title, option.font, name_w, text_w)
        painter.setFont(title)
        painter.setPen(QColor(title_colour))
        painter.drawText(
            QRect(name_left, r.top(), name_w, r.height() // 2),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            name,
        )
        painter.setFont(option.font)
        painter.setPen(QColor(facts_colour))
        painter.drawText(
            QRect(r.left(), r.top() + r.height() // 2, text_w, r.height() // 2),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            meta,
        )
        wave = QRect(r.left() + text_w + 16, r.top() + 2, r.width() - text_w - 16, r.height() - 4)
        self._paint_wave(painter, wave, row, local)
        painter.restore()

    def _words(self, row: Row, local, title_font, font, name_w: int, meta_w: int):
        """A row's name and facts line, each cut with an ellipsis to its width: made once
        per song state and width (painting a list asks for them on every frame)."""
        song, take = row.song, row.take
        files = self.files
        fetching = files is not None and take is not None and files.fetching(song, take)
        problem = files.problem(song, take) if files is not None and take is not None else None
        # the link folds a song's events into the same record: what the words show
        key = (
            *(song.id, take.n if take else 0, row.first, name_w, meta_w, local is None),
            *(fetching, problem, title_font.key()),
            *(song.state, song.stage, song.progress, song.position, song.error, song.title),
            *(len(song.takes), made_on(song)),
        )
        found = self._lines.get(key)
        if found is not None and found[0] is song:  # the same record: a change is a new one
            return found[1], found[2]
        label = (
            row.label
            if (take is None or len(song.takes) < 2 or not row.first)
            else f"{row.label}  ·  Take 1"
        )
        bits = facts(song, take)
        if row.first:
            bits.insert(0, when(song))
        if song.state != SongState.DONE:
            bits.insert(0, status_text(song))
        elif take is not None and local is None:
            if fetching:
                bits.insert(0, "downloading…")
            elif problem:
                bits.insert(0, f"download failed: {problem}")
            else:
                bits.insert(0, "file moved or deleted")
        meta = "  ·  ".join(b for b in bits if b)
        name = QFontMetrics(title_font).elidedText(label, Qt.TextElideMode.ElideRight, name_w)
        meta = QFontMetrics(font).elidedText(meta, Qt.TextElideMode.ElideRight, meta_w)
        self._lines[key] = (song, name, meta)
        if len(self._lines) > self.LINES_KEPT:
            self._lines.popitem(last=False)
        return name, meta

    def _paint_play(self, painter: QPainter, rect: QRect, row: Row) -> None:
        if row.take is None:
            return
        c = theme.colours()
        button = self.play_rect(rect)
        current = self.playing == row.key
        playing = current and self.sounding
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(c.accent if current else c.raised))
        painter.drawEllipse(button)
        painter.setBrush(QColor(c.on_accent if current else c.text))
        cx, cy = button.center().x() + 0.5, button.center().y() + 0.5
        if playing:  # pause bars
            painter.drawRect(QRect(int(cx) - 6, int(cy) - 7, 4, 14))
            painter.drawRect(QRect(int(cx) + 2, int(cy) - 7, 4, 14))
        else:  # play triangle
            painter.drawPolygon(
                QPolygonF([QPointF(cx - 5, cy - 8), QPointF(cx - 5, cy + 8), QPointF(cx + 8, cy)])
            )

    def _paint_wave(self, painter: QPainter, rect: QRect, row: Row, local: str | None) -> None:
        if rect.width() < 20:
            return
        c = theme.colours()
        song = row.song
        if local is None:
            if song.state in (SongState.QUEUED, SongState.RUNNING):
                painter.fillRect(
                    rect.adjusted(0, rect.height() // 2 - 3, 0, -rect.height() // 2 + 3),
                    QColor(c.track),
                )
                done = QRect(
                    rect.left(), rect.center().y() - 3, int(rect.width() * song.progress), 6
                )
                painter.fillRect(done, QColor(c.accent))
            return
        peaks = self.store.get(local)
        mid = rect.center().y()
        if peaks is None:
            painter.setPen(QPen(QColor(c.line), 1))
            painter.drawLine(rect.left(), mid, rect.right(), mid)
            return
        poly = self.shape(local, peaks, rect)
        played = self.play_position if row.key == self.playing else -1.0
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(c.wave))
        painter.drawPolygon(poly)
        if played >= 0:
            painter.save()
            painter.setClipRect(
                QRect(rect.left(), rect.top(), int(rect.width() * played), rect.height())
            )
            painter.setBrush(QColor(c.accent))
            painter.drawPolygon(poly)
            painter.restore()

    def shape(self, path: str, peaks, rect: QRect) -> QPolygonF:
        """The waveform's outline for a rectangle: made once per file and size from the
        cached peaks (two points per pixel column at most), then reused for every paint."""
        key = (path, rect.left(), rect.top(), rect.width(), rect.height())
        found = self._shapes.get(key)
        if found is not None and found[0] is peaks:  # the same summary of the same file
            self._shapes.move_to_end(key)
            return found[1]
        poly = outline(peaks, rect)
        self._shapes[key] = (peaks, poly)
        if len(self._shapes) > self.WAVES_KEPT:
            self._shapes.popitem(last=False)
        return poly


def outline(peaks, rect: QRect) -> QPolygonF:
    """A symmetric waveform polygon of ``peaks`` (0..1) filling ``rect``, with at most one
    point per two pixels (each the loudest peak it covers)."""
    import numpy as np

    values = np.asarray(peaks, dtype=np.float32)
    n = len(values)
    if n == 0:
        return QPolygonF()
    columns = max(1, min(n, rect.width() // 2))
    step = max(1, n // columns)
    usable = (n // step) * step
    folded = values[:usable].reshape(-1, step).max(axis=1)
    half = rect.height() / 2
    mid = rect.center().y()
    heights = np.maximum(0.5, folded * half)
    xs = rect.left() + rect.width() * (np.arange(len(folded)) * step) / n
    top = [QPointF(float(x), mid - float(h)) for x, h in zip(xs, heights)]
    bottom = [QPointF(float(x), mid + float(h)) for x, h in zip(xs, heights)]
    return QPolygonF(top + bottom[::-1])
