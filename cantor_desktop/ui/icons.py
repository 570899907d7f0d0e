"""Icons drawn with QPainter at run time: the app's note and the tray's node-state badges.

Drawing them keeps the package free of binary assets and lets the tray colour follow the
node's state (stopped, starting, idle, generating, error).
"""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap

STATE_COLOURS = {
    "stopped": "#8a8f98",
    "starting": "#e0a100",
    "idle": "#2e9d5b",
    "generating": "#2f7fd8",
    "error": "#d23b3b",
}


def _note(p: QPainter, size: int, colour: QColor) -> None:
    s = size / 64.0
    p.setPen(Qt.NoPen)
    p.setBrush(QBrush(colour))
    # two note heads joined by a beam: a simple quaver pair
    p.drawEllipse(QRectF(10 * s, 40 * s, 16 * s, 12 * s))
    p.drawEllipse(QRectF(34 * s, 34 * s, 16 * s, 12 * s))
    p.drawRect(QRectF(22 * s, 12 * s, 4 * s, 34 * s))
    p.drawRect(QRectF(46 * s, 6 * s, 4 * s, 34 * s))
    beam = QPainterPath()
    beam.moveTo(QPointF(22 * s, 12 * s))
    beam.lineTo(QPointF(50 * s, 6 * s))
    beam.lineTo(QPointF(50 * s, 14 * s))
    beam.lineTo(QPointF(22 * s, 20 * s))
    beam.closeSubpath()
    p.drawPath(beam)


def note_pixmap(size: int = 64, colour: str = "#3b4252", badge: str | None = None) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.Antialiasing)
    _note(p, size, QColor(colour))
    if badge:
        r = size * 0.36
        p.setPen(QPen(QColor("white"), max(1.0, size / 32)))
        p.setBrush(QColor(STATE_COLOURS.get(badge, badge)))
        p.drawEllipse(QRectF(size - r - 1, size - r - 1, r, r))
    p.end()
    return pm


@lru_cache(maxsize=None)
def app_icon() -> QIcon:
    icon = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256):
        icon.addPixmap(note_pixmap(size, "#2f7fd8"))
    return icon


@lru_cache(maxsize=None)
def state_icon(state: str) -> QIcon:
    """The tray icon: the note, with a dot in the state's colour."""
    icon = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        icon.addPixmap(note_pixmap(size, "#3b4252", state))
    return icon


def dot_pixmap(state: str, size: int = 12) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.Antialiasing)
    p.setPen(Qt.NoPen)
    p.setBrush(QColor(STATE_COLOURS.get(state, "#8a8f98")))
    p.drawEllipse(QRectF(1, 1, size - 2, size - 2))
    p.end()
    return pm
