"""The app's icons: the launcher's for the window, the tray's drawn at run time.

The window and taskbar show the launcher's icon (resources/icons, made from cantor.svg by
packaging/make_icons.py), read by Qt from its PNG files at the sizes a platform asks for.
The tray's icons are drawn with QPainter, so their colour (or, on macOS, a badge's shape)
follows the node's state (stopped, starting, idle, generating, error). The drawing classes
are imported where they are used: a window without a tray draws nothing at start.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QIcon

from .theme import LIGHT, TEMPLATE_GAP, TEMPLATE_INK, TRAY_NOTE
from .theme import TRAY_STATE_COLOURS as STATE_COLOURS

APP_ICON_SIZES = (16, 24, 32, 48, 64, 128, 256)


def launcher_icons() -> Path:
    """The launcher icon's folder: bundled beside the frozen app's files, or the checkout's
    resources/icons."""
    bundle = getattr(sys, "_MEIPASS", None)
    top = Path(bundle) if bundle else Path(__file__).resolve().parents[2]
    return top / "resources" / "icons"


def _note(p, size: int, colour) -> None:
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QBrush, QPainterPath

    s = size / 64.0
    p.setPen(Qt.PenStyle.NoPen)
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


def note_pixmap(size: int = 64, colour: str = TRAY_NOTE["light"], badge: str | None = None):
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QPainter, QPen, QPixmap

    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    _note(p, size, QColor(colour))
    if badge:
        r = size * 0.36
        p.setPen(QPen(QColor(TEMPLATE_GAP), max(1.0, size / 32)))
        p.setBrush(QColor(STATE_COLOURS.get(badge, badge)))
        p.drawEllipse(QRectF(size - r - 1, size - r - 1, r, r))
    p.end()
    return pm


@cache
def app_icon() -> QIcon:
    """The launcher's icon, from its PNG files: Qt reads a size's file the first time that
    size is shown, so none is read where no window icon is drawn (macOS shows the bundle's,
    offscreen nothing) and Windows reads its two. Where the files are not there (Cantor
    installed as a Python package), the note is drawn instead."""
    icon = QIcon()
    folder = launcher_icons()
    for size in APP_ICON_SIZES:
        path = folder / f"cantor-{size}.png"
        if path.is_file():
            icon.addFile(str(path), QSize(size, size))
    if icon.isNull():
        for size in APP_ICON_SIZES:
            icon.addPixmap(note_pixmap(size, LIGHT.accent))
    return icon


def state_icon(state: str) -> QIcon:
    """The tray icon: the note (dark on a light tray, light on a dark one), with a dot in
    the state's colour. The tray is the taskbar's where the OS says how that is drawn
    (Windows), else the system's scheme."""
    from ..system.taskbar import taskbar_scheme
    from .theme import system_scheme

    return _state_icon(state, taskbar_scheme() or system_scheme())


@cache
def _state_icon(state: str, scheme: str) -> QIcon:
    icon = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        icon.addPixmap(note_pixmap(size, TRAY_NOTE[scheme], state))
    return icon


TEMPLATE_BADGES = {
    "stopped": "ring",
    "starting": "half",
    "idle": "",
    "generating": "dot",
    "error": "cross",
}
"""A template image has one colour, so its state shows as a shape: a ring when stopped, a
half-filled ring while starting, nothing when idle, a dot while generating, a cross on error."""


def template_pixmap(size: int, state: str):
    """The tray icon for macOS's menu bar: black on transparent (the system tints it for a
    light or dark bar and for a highlighted item), the state as a badge shape."""
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QPainter, QPen, QPixmap

    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    black = QColor(TEMPLATE_INK)
    _note(p, size, black)
    badge = TEMPLATE_BADGES.get(state, "ring")
    if badge:
        r = size * 0.40
        box = QRectF(size - r - 0.5, size - r - 0.5, r, r)
        p.setCompositionMode(
            QPainter.CompositionMode.CompositionMode_Clear
        )  # a gap around the badge
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(black)
        grow = max(1.0, size / 16)
        p.drawEllipse(box.adjusted(-grow, -grow, grow, grow))
        p.setCompositionMode(QPainter.CompositionMode.CompositionMode_SourceOver)
        line = max(1.0, size / 14)
        if badge == "dot":
            p.drawEllipse(box)
        elif badge in ("ring", "half"):
            p.setPen(QPen(black, line))
            p.setBrush(Qt.BrushStyle.NoBrush)
            inner = box.adjusted(line / 2, line / 2, -line / 2, -line / 2)
            p.drawEllipse(inner)
            if badge == "half":
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(black)
                p.drawPie(inner, 90 * 16, 180 * 16)
        elif badge == "cross":
            p.setPen(QPen(black, line * 1.3, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            m = r * 0.22
            p.drawLine(
                QPointF(box.left() + m, box.top() + m), QPointF(box.right() - m, box.bottom() - m)
            )
            p.drawLine(
                QPointF(box.right() - m, box.top() + m), QPointF(box.left() + m, box.bottom() - m)
            )
    p.end()
    return pm


@cache
def template_icon(state: str) -> QIcon:
    """:func:`template_pixmap` at the menu bar's sizes (22 pt, and 44 px for Retina),
    marked as a mask: on macOS that makes it a template image."""
    icon = QIcon()
    for size in (16, 18, 22, 32, 36, 44):
        icon.addPixmap(template_pixmap(size, state))
    icon.setIsMask(True)
    return icon


def tray_icon(state: str, *, template: bool | None = None) -> QIcon:
    """The tray's icon for a node state: a template image on macOS, colours elsewhere."""
    if template is None:
        template = sys.platform == "darwin"
    return template_icon(state) if template else state_icon(state)
