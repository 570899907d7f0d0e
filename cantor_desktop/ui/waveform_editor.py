"""A take's waveform to edit on: drag across it to select a region (to repaint), drag past
either end to extend the song there. The keyboard does the same the way a DAW does: a
cursor (the play head while the take plays) moved by the arrow keys, I and O set the in and
out points at it, Shift with an arrow selects from where the selection began, past either
end to extend. The selection is in seconds of the take, snapped to a tenth of a second;
nothing is sent anywhere from here (the page builds the request)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from . import theme

MIN_REGION = 1.0  # seconds (the node's own rule for a repainted region)
MAX_SONG = 600.0  # seconds: a song and its extension together
SNAP = 0.1
MARGIN = 60  # px of room beyond each end to drag an extension into
STEP = 1.0  # seconds an arrow key moves the cursor (with Ctrl: FINE_STEP)
FINE_STEP = SNAP


class WaveformEditor(QWidget):
    selection_changed = Signal()
    playhead_moved = Signal(float)
    """The keyboard moved the cursor to these seconds (the page moves the play head)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(96)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.peaks = None
        self._shape = None  # (peaks, size, QPolygonF): the waveform's outline at its size
        self.duration = 0.0
        self.region: tuple[float, float] | None = None
        self.before = 0.0
        self.after = 0.0
        self._press: float | None = None
        self.playhead = 0.0  # seconds: the play head, or where the keys put it
        self._anchor: float | None = None  # where a Shift+arrow selection began
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAccessibleName(self.tr("Waveform"))
        self.setToolTip(
            self.tr(
                "Drag across the waveform to select a part to repaint; drag past either end "
                "to extend the song there. Keys: arrows move the cursor (Ctrl: a tenth of a "
                "second), I and O set the in and out points, Shift+arrows select, Esc clears"
            )
        )
        self.selection_changed.connect(self._tell_assistive_technology)

    # -- what is shown -----------------------------------------------------------------------
    def set_take(self, peaks, duration: float | None) -> None:
        self.peaks, self.duration = peaks, float(duration or 0.0)
        self.playhead = 0.0
        self.clear()

    def set_playhead(self, seconds: float) -> None:
        """Where the play head is (the page calls it while this take plays)."""
        seconds = min(max(0.0, seconds), self.duration)
        if abs(seconds - self.playhead) >= 1e-3:
            self.playhead = seconds
            self.update()

    def set_peaks(self, peaks) -> None:
        self.peaks = peaks
        self.update()

    def clear(self) -> None:
        self.region, self.before, self.after = None, 0.0, 0.0
        self._anchor = None
        self.update()
        self.selection_changed.emit()

    # -- geometry ---------------------------------------------------------------------------
    def _wave_rect(self) -> QRect:
        return self.rect().adjusted(MARGIN, 8, -MARGIN, -18)

    def _room(self) -> float:
        return max(0.0, MAX_SONG - self.duration)

    def seconds_at(self, x: float) -> float:
        """Seconds of the take under ``x``: below 0 or past the end means an extension (the
        margins stand for the room a song has left to grow, up to 10 minutes in all)."""
        r = self._wave_rect()
        if self.duration <= 0 or r.width() <= 0:
            return 0.0
        if x < r.left():
            return -self._room() * min(1.0, (r.left() - x) / MARGIN)
        if x > r.right():
            return self.duration + self._room() * min(1.0, (x - r.right()) / MARGIN)
        return (x - r.left()) / r.width() * self.duration

    def x_of(self, seconds: float) -> float:
        r = self._wave_rect()
        if seconds < 0:
            return r.left() - MARGIN * (-seconds / max(self._room(), 1e-9))
        if seconds > self.duration:
            return r.right() + MARGIN * ((seconds - self.duration) / max(self._room(), 1e-9))
        return r.left() + seconds / max(self.duration, 1e-9) * r.width()

    @staticmethod
    def _snap(seconds: float) -> float:
        return round(round(seconds / SNAP) * SNAP, 3)

    # -- mouse ------------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.duration > 0:
            self._press = self.seconds_at(event.position().x())
            self._drag_to(self._press)

    def mouseMoveEvent(self, event) -> None:
        if self._press is not None:
            self._drag_to(self.seconds_at(event.position().x()))

    def mouseReleaseEvent(self, event) -> None:
        if self._press is not None:
            self._drag_to(self.seconds_at(event.position().x()))
            self._press = None

    def _drag_to(self, seconds: float) -> None:
        if self._press is None:
            return
        self._span(self._press, seconds)

    def _span(self, one: float, other: float) -> None:
        """Select from ``one`` to ``other`` (either order): a region inside the take, else
        an extension past the end(s) it reaches beyond."""
        a, b = sorted((one, other))
        self.before = self._snap(-a) if a < 0 else 0.0
        self.after = self._snap(b - self.duration) if b > self.duration else 0.0
        if self.before or self.after:
            self.region = None  # an extension, not a region to repaint
        else:
            a, b = self._snap(max(0.0, a)), self._snap(min(self.duration, b))
            self.region = (a, b) if b > a else None
        self.update()
        self.selection_changed.emit()

    def select(self, start: float, end: float) -> None:
        """Select a region by its times (also for tests and keyboard use)."""
        start, end = sorted((max(0.0, start), min(self.duration, end)))
        self.region = (self._snap(start), self._snap(end))
        self.before = self.after = 0.0
        self.update()
        self.selection_changed.emit()

    def extend_by(self, before: float = 0.0, after: float = 0.0) -> None:
        room = self._room()
        self.before = self._snap(min(max(before, 0.0), room))
        self.after = self._snap(min(max(after, 0.0), room - self.before))
        self.region = None
        self.update()
        self.selection_changed.emit()

    # -- keyboard ---------------------------------------------------------------------------
    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self.update()

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.update()

    def keyPressEvent(self, event) -> None:
        if self.duration <= 0:
            super().keyPressEvent(event)
            return
        key, mods = event.key(), event.modifiers()
        shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
        step = FINE_STEP if mods & Qt.KeyboardModifier.ControlModifier else STEP
        moves = {
            Qt.Key.Key_Left: self.playhead - step,
            Qt.Key.Key_Right: self.playhead + step,
            Qt.Key.Key_Home: 0.0,
            Qt.Key.Key_End: self.duration,
        }
        if key in moves:
            self._key_move(moves[key], shift)
        elif key == Qt.Key.Key_I and not shift:
            self._set_point(start=True)
        elif key == Qt.Key.Key_O and not shift:
            self._set_point(start=False)
        elif key == Qt.Key.Key_Escape and (self.region or self.before or self.after):
            self.clear()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def _key_move(self, to: float, select: bool) -> None:
        """The cursor to ``to`` seconds; with Shift the selection spans from its anchor to it
        (beyond either end: an extension, up to the room a song has left)."""
        room = self._room()
        if not select:
            self._anchor = None
            self.playhead = self._snap(min(max(0.0, to), self.duration))
            self.update()
        else:
            anchor = self._anchor
            if anchor is None:
                anchor = self._other_end() if self._has_selection() else self.playhead
            self._anchor = anchor
            self.playhead = self._snap(min(max(-room, to), self.duration + room))
            self._span(anchor, self.playhead)
        if 0.0 <= self.playhead <= self.duration:
            self.playhead_moved.emit(self.playhead)

    def _has_selection(self) -> bool:
        return self.region is not None or bool(self.before or self.after)

    def _other_end(self) -> float:
        """The end of the selection the cursor is not at (the anchor a Shift+arrow keeps)."""
        if self.region is not None:
            a, b = self.region
        else:
            a, b = -self.before, self.duration + self.after
        return a if abs(self.playhead - b) <= abs(self.playhead - a) else b

    def _set_point(self, *, start: bool) -> None:
        """I and O: the in or the out point at the cursor, the other end kept (or the take's
        start or end when nothing is selected)."""
        a, b = self.region if self.region is not None else (0.0, self.duration)
        a, b = (self.playhead, b) if start else (a, self.playhead)
        self._anchor = None
        if b - a < SNAP:  # an in point past the out point: the region starts again there
            a, b = (self.playhead, self.duration) if start else (0.0, self.playhead)
        self.select(a, b)

    def _tell_assistive_technology(self) -> None:
        """What is selected, as the widget's description: a screen reader reads it when it
        changes (Qt sends the change to AT-SPI, UI Automation and VoiceOver)."""
        self.setAccessibleDescription(self.describe())

    @property
    def repaintable(self) -> bool:
        return self.region is not None and self.region[1] - self.region[0] >= MIN_REGION

    @property
    def extendable(self) -> bool:
        return self.before + self.after >= MIN_REGION

    def describe(self) -> str:
        if self.region is not None:
            a, b = self.region
            short = "" if self.repaintable else f" (at least {MIN_REGION:g} s to repaint)"
            return f"Selected {a:.1f}–{b:.1f} s ({b - a:.1f} s){short}"
        if self.before or self.after:
            bits = [
                f"{self.before:.1f} s before" if self.before else "",
                f"{self.after:.1f} s after" if self.after else "",
            ]
            return "Extend by " + " and ".join(b for b in bits if b)
        return self.tr(
            "Drag across the waveform (or press I and O) to select a part to repaint, or past "
            "an end to extend"
        )

    # -- painting ---------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        c = theme.colours()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = self._wave_rect()
        p.fillRect(self.rect(), QColor(c.surface))
        mid = r.center().y()
        if self.before:
            p.fillRect(
                QRectF(
                    self.x_of(-self.before), r.top(), r.left() - self.x_of(-self.before), r.height()
                ),
                QBrush(QColor(c.extend_before), Qt.BrushStyle.BDiagPattern),
            )
        if self.after:
            p.fillRect(
                QRectF(
                    r.right(),
                    r.top(),
                    self.x_of(self.duration + self.after) - r.right(),
                    r.height(),
                ),
                QBrush(QColor(c.extend_after), Qt.BrushStyle.BDiagPattern),
            )
        if self.peaks is not None and len(self.peaks):
            size = (r.left(), r.top(), r.width(), r.height())
            shape = self._shape
            if shape is None or shape[0] is not self.peaks or shape[1] != size:
                from .songs_model import outline  # made once per take and size

                shape = self._shape = (self.peaks, size, outline(self.peaks, r))
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(c.wave))
            p.drawPolygon(shape[2])
        else:
            p.setPen(QPen(QColor(c.line), 1))
            p.drawLine(r.left(), mid, r.right(), mid)
        if self.region is not None:
            a, b = self.region
            sel = QRectF(self.x_of(a), r.top(), max(1.0, self.x_of(b) - self.x_of(a)), r.height())
            ground = QColor(c.accent)
            ground.setAlpha(70)
            p.fillRect(sel, ground)
            p.setPen(QPen(QColor(c.accent), 2))
            p.drawLine(sel.topLeft(), sel.bottomLeft())
            p.drawLine(sel.topRight(), sel.bottomRight())
        if self.duration and (self.hasFocus() or self.playhead > 0):
            x = self.x_of(self.playhead)
            p.setPen(QPen(QColor(c.text), 2 if self.hasFocus() else 1))
            p.drawLine(QPointF(x, r.top() - 4), QPointF(x, r.bottom() + 4))
        if self.hasFocus():  # where the keys go, seen
            p.setPen(QPen(QColor(c.accent), 1, Qt.PenStyle.DashLine))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(self.rect().adjusted(1, 1, -2, -2))
        p.setPen(QColor(c.muted))
        p.drawText(
            QRect(r.left(), r.bottom() + 2, r.width(), 16), Qt.AlignmentFlag.AlignLeft, "0:00"
        )
        if self.duration:
            total = int(round(self.duration))
            p.drawText(
                QRect(r.left(), r.bottom() + 2, r.width(), 16),
                Qt.AlignmentFlag.AlignRight,
                f"{total // 60}:{total % 60:02d}",
            )
        p.end()
