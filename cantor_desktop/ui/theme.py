"""Cantor's look: every colour the app paints, for a light and a dark scheme, in one place.

The scheme follows the system (Qt's ``QStyleHints.colorScheme``, live: a switch in the
system's settings re-colours the open window at once); ``CANTOR_APPEARANCE=light|dark``
pins one. The dark scheme is made for long sessions, the way a DAW is: calm dark surfaces,
one accent colour (a warm orange) for what is selected, playing or in progress, the
waveform as the brightest thing in a row. The light scheme keeps the same accent and roles.

Nothing outside this module names a colour. Widgets take theirs from the application
palette (set by :func:`install`), from a *tone* (:func:`tone`: a label's text as muted,
danger, warning, success or accent ink, kept through a scheme change), from a *panel*
(:func:`paint_panel`: a coloured box with its own text colour), or, where they paint
themselves, from :func:`colours` at paint time. Every text colour here reads at 4.5:1 or
more on every background it is used on (``tests/test_ui_theme.py`` measures the pages).

Numbers line up: the application font asks for tabular (monospaced) digits.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import NamedTuple

from PySide6.QtCore import QObject, Signal


class Colours(NamedTuple):
    """One scheme's colours, by what they are for."""

    scheme: str
    window: str  # the window's own ground: sidebar, page, status bar
    surface: str  # lists, tables, fields, the waveform's ground
    surface_alt: str  # every other song in a list
    raised: str  # buttons and headers
    line: str  # frames, separators, the waveform's centre line when there is none yet
    text: str  # text on any of the grounds above
    muted: str  # second-rank text: a song's facts, hints, notes
    disabled: str  # text of what cannot be used now
    accent: str  # THE accent: selection, the play button, progress, the played part
    on_accent: str  # text and glyphs on the accent
    accent_ink: str  # the accent where it is read as text (links, the state dot)
    selection: str  # a selected row's ground (the accent, faint)
    wave: str  # a waveform
    track: str  # an empty progress track
    danger: str  # a failure, a field that is not valid
    warning: str  # a caution
    success: str  # ready, done
    favourite: str  # the star of a favourite song
    panel: str  # an information panel's ground (the readiness banner, advice)
    panel_edge: str
    panel_text: str
    alarm: str  # an error panel's ground (a malformed node.toml)
    alarm_edge: str
    alarm_text: str
    extend_before: str  # the hatching of an extension, before and after a take
    extend_after: str


LIGHT = Colours(
    scheme="light",
    window="#eceef1",
    surface="#fbfbfc",
    surface_alt="#f3f4f6",
    raised="#e1e4e9",
    line="#c3c8d0",
    text="#1c2026",
    muted="#545c68",
    disabled="#9aa0a9",
    accent="#d9740a",
    on_accent="#17191d",
    accent_ink="#9c4f00",
    selection="#f4e0cc",
    wave="#8793a5",
    track="#dde1e7",
    danger="#b3261e",
    warning="#8a5300",
    success="#166a3b",
    favourite="#c77700",
    panel="#fff4e6",
    panel_edge="#f0c999",
    panel_text="#1c2026",
    alarm="#fdecea",
    alarm_edge="#f2b8b5",
    alarm_text="#7d1712",
    extend_before="#2f8f5b",
    extend_after="#2f8f5b",
)

DARK = Colours(
    scheme="dark",
    window="#1e2126",
    surface="#16181c",
    surface_alt="#1b1e23",
    raised="#2b3038",
    line="#3a404a",
    text="#e4e7eb",
    muted="#a9b0ba",
    disabled="#6b727c",
    accent="#f29a38",
    on_accent="#17191d",
    accent_ink="#f29a38",
    selection="#423222",
    wave="#8e9bb0",
    track="#2f343c",
    danger="#ff7b72",
    warning="#e8b454",
    success="#5cc98a",
    favourite="#f2b63d",
    panel="#262c35",
    panel_edge="#3b4553",
    panel_text="#e4e7eb",
    alarm="#3a1f1f",
    alarm_edge="#6e3333",
    alarm_text="#ffd9d6",
    extend_before="#5cc98a",
    extend_after="#5cc98a",
)

SCHEMES = {"light": LIGHT, "dark": DARK}

TONES = ("text", "muted", "danger", "warning", "success", "accent_ink")
"""What :func:`tone` can make a label's text."""

NODE_STATE_TONES = {
    "stopped": "muted",
    "starting": "warning",
    "idle": "success",
    "generating": "accent_ink",
    "error": "danger",
}
"""The status bar's dot: the node's state as a tone of the scheme."""

TRAY_STATE_COLOURS = {
    "stopped": "#8a8f98",
    "starting": "#e0a100",
    "idle": "#2e9d5b",
    "generating": "#f29a38",
    "error": "#d23b3b",
}
"""The tray icon's badge by node state: the tray's ground is the system's, not ours, so these
are mid-tones that show on a light and on a dark panel alike."""

TRAY_NOTE = {"light": "#3b4252", "dark": "#e4e7eb"}
"""The tray icon's note, for a light or a dark system panel."""

TEMPLATE_INK = "#000000"
"""macOS template images are black on transparent: the system tints them."""

TEMPLATE_GAP = "#ffffff"  # the pen of a badge's edge on a coloured tray icon


class _Notifier(QObject):
    changed = Signal(str)  # the scheme now in use


_current: Colours | None = None
_notifier: _Notifier | None = None
_installed = False
_following = False  # the system's colour-scheme hint is asked for and listened to
_system_is_dark: bool | None = None  # the platform palette before ours, when Qt cannot say
_high_contrast = False  # Windows' High Contrast is on: the system's colours, none of ours
_system_palette = None  # the platform's QPalette, kept for High Contrast


def colours() -> Colours:
    """The colours in use now (the light scheme until :func:`install` has chosen)."""
    global _current
    if _current is None:
        _current = SCHEMES[wanted_scheme()]
    return _current


def notifier() -> _Notifier:
    """Its ``changed`` signal fires after a scheme change has been applied."""
    global _notifier
    if _notifier is None:
        _notifier = _Notifier()
    return _notifier


def pinned_scheme() -> str | None:
    value = os.environ.get("CANTOR_APPEARANCE", "").strip().lower()
    return value if value in SCHEMES else None


def system_scheme(hint=None) -> str:
    """The system's scheme: Qt's colour-scheme hint once :func:`follow_system` has asked
    for it, else (before that, or a desktop that does not say) the lightness of the
    platform's own palette, which follows the system's appearance on macOS, Windows and
    the desktops that tell Qt."""
    if hint is None and _following:
        from PySide6.QtGui import QGuiApplication

        app = QGuiApplication.instance()
        hint = app.styleHints().colorScheme() if isinstance(app, QGuiApplication) else None
    if hint is not None:
        from PySide6.QtCore import Qt

        if hint == Qt.ColorScheme.Dark:
            return "dark"
        if hint == Qt.ColorScheme.Light:
            return "light"
    return "dark" if _system_is_dark else "light"


def wanted_scheme(hint=None) -> str:
    return pinned_scheme() or system_scheme(hint)


def palette(c: Colours):
    """The QPalette of a scheme: every role Qt's styles paint with."""
    from PySide6.QtGui import QColor, QPalette

    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: c.window,
        QPalette.ColorRole.WindowText: c.text,
        QPalette.ColorRole.Base: c.surface,
        QPalette.ColorRole.AlternateBase: c.surface_alt,
        QPalette.ColorRole.Text: c.text,
        QPalette.ColorRole.Button: c.raised,
        QPalette.ColorRole.ButtonText: c.text,
        QPalette.ColorRole.BrightText: c.on_accent,
        QPalette.ColorRole.Highlight: c.accent,
        QPalette.ColorRole.HighlightedText: c.on_accent,
        QPalette.ColorRole.Link: c.accent_ink,
        QPalette.ColorRole.LinkVisited: c.accent_ink,
        QPalette.ColorRole.ToolTipBase: c.panel,
        QPalette.ColorRole.ToolTipText: c.panel_text,
        QPalette.ColorRole.PlaceholderText: c.muted,
        QPalette.ColorRole.Accent: c.accent,
        QPalette.ColorRole.Mid: c.line,
    }
    for role, value in roles.items():
        p.setColor(role, QColor(value))
    raised = QColor(c.raised)
    dark = c.scheme == "dark"
    p.setColor(QPalette.ColorRole.Light, raised.lighter(130 if dark else 112))
    p.setColor(QPalette.ColorRole.Midlight, raised.lighter(115 if dark else 106))
    p.setColor(QPalette.ColorRole.Dark, raised.darker(150 if dark else 135))
    p.setColor(QPalette.ColorRole.Shadow, QColor(c.surface).darker(200))
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.PlaceholderText,
    ):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(c.disabled))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Highlight, QColor(c.line))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Button, QColor(c.window))
    return p


def install(app, scheme: str | None = None) -> Colours:
    """Give the application Cantor's style, palette and font, in the scheme the system's
    palette shows (or ``scheme``). Made for the first paint: Qt's colour-scheme hint (whose
    first use builds PySide's ``Qt`` namespace, a tenth of the start-up) is asked for by
    :func:`follow_system`, after it. Again later: switch to that scheme."""
    global _installed, _system_is_dark, _high_contrast, _system_palette
    if not _installed:
        _installed = True
        _system_is_dark = app.palette().window().color().lightness() < 128
        _system_palette = app.palette()
        _high_contrast = asks_for_high_contrast(app)
        if sys.platform == "win32" and not _high_contrast:
            # the native Windows styles draw their own colours over a palette: Fusion, as
            # on Linux (Qt's default there), draws ours; macOS keeps its own controls,
            # which follow the system's appearance themselves
            from PySide6.QtWidgets import QStyleFactory

            style = QStyleFactory.create("Fusion")
            if style is not None:
                app.setStyle(style)
        font = app.font()
        from PySide6.QtGui import QFont

        font.setFeature(QFont.Tag("tnum"), 1)  # digits of one width: times and BPM line up
        app.setFont(font)
    apply(app, scheme or wanted_scheme())
    return colours()


def asks_for_high_contrast(app, platform: str = sys.platform) -> bool:
    """Windows' High Contrast (Qt's accessibility hint): the user's own colours are then
    the only ones, so Cantor keeps the native style and the system palette and tints
    nothing. Asked on Windows only (the hint costs start-up time elsewhere, where desktops
    do not set it)."""
    if platform != "win32":
        return False
    from PySide6.QtCore import Qt

    # each object held by a name: chained on first use, PySide6 6.11.3 deletes the
    # hints' wrapper before the call (docs/upstream.md)
    hints = app.styleHints()
    accessibility = hints.accessibility()
    return accessibility.contrastPreference() == Qt.ContrastPreference.HighContrast


def high_contrast() -> bool:
    return _high_contrast


def follow_system(app) -> None:
    """From now on the scheme is the system's own (``QStyleHints.colorScheme``), live: a
    switch in the system's settings re-colours the open window at once."""
    global _following
    if _following:
        return
    _following = True
    app.styleHints().colorSchemeChanged.connect(_system_changed)
    if pinned_scheme() is None and system_scheme() != colours().scheme:
        apply(app, system_scheme())


def _system_changed(hint) -> None:
    from PySide6.QtGui import QGuiApplication

    if pinned_scheme() is None:
        apply(QGuiApplication.instance(), system_scheme(hint))


def every_widget() -> list:
    """``QApplication.allWidgets()`` with Python's cyclic garbage collector held off while
    PySide turns Qt's list of pointers into Python objects.

    A collection in the middle of that conversion (one wrapper made is one allocation
    more) can delete a widget held only by a reference cycle while its pointer, or its
    children's, is still on Qt's list: the next element converted is freed memory, a
    segfault or a wrong object (CI, 2026-12-02; ``docs/upstream.md`` has the report and a
    reproducer for PySide). Once converted, the list holds every wrapper, so nothing on it
    can be collected while it is walked."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        from PySide6.QtWidgets import QApplication

        return QApplication.allWidgets()
    finally:
        if enabled:
            gc.enable()


def apply(app, scheme: str) -> None:
    """Switch to a scheme: the application palette, every toned label and panel, and a
    repaint of whatever paints itself."""
    global _current
    _current = SCHEMES[scheme]
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    if _high_contrast:
        if _system_palette is not None:
            app.setPalette(_system_palette)
        notifier().changed.emit(scheme)
        return
    app.setPalette(palette(_current))

    # Fusion draws a check box's (and a radio button's) edge a shade darker than the
    # window: on a dark window, no edge at all. Their class palette's window (never
    # painted, the edge's only use of it) is made light enough for an edge that shows.
    boxes = palette(_current)
    if scheme == "dark":
        boxes.setColor(QPalette.ColorRole.Window, QColor(_current.disabled).lighter(130))
    for cls in ("QCheckBox", "QRadioButton"):
        # PySide6 6.11.3's stubs type the class name as bytes; it takes only a str
        # (docs/upstream.md)
        QApplication.setPalette(boxes, cls)  # type: ignore[arg-type]

    for widget in every_widget():
        kind = widget.property("cantorTone")
        if kind:
            _paint_tone(widget, str(kind))
        kind = widget.property("cantorPanel")
        if kind:
            _paint_panel(widget, str(kind))
    notifier().changed.emit(scheme)


# -- tones and panels ------------------------------------------------------------------------


def colour(name: str):
    """A colour of the current scheme by its name in :class:`Colours`, as a QColor."""
    from PySide6.QtGui import QColor

    return QColor(getattr(colours(), name))


def tone(widget, kind: str | None) -> None:
    """Give a label (or a check box, a button) the text colour of ``kind`` (see
    :data:`TONES`; None: the palette's own), kept through scheme changes. Set through the
    widget's palette: a style sheet would load Qt's style-sheet engine (~0.4 MiB)."""
    if kind is not None and kind not in TONES:
        raise ValueError(f"unknown tone {kind!r}; known: {', '.join(TONES)}")
    if (widget.property("cantorTone") or None) == kind:
        return
    widget.setProperty("cantorTone", kind or "")
    _paint_tone(widget, kind)


def _paint_tone(widget, kind: str | None) -> None:
    from PySide6.QtGui import QPalette

    if not kind or _high_contrast:
        widget.setPalette(QPalette())  # nothing of its own: the parent's colours again
        return
    p = widget.palette()
    value = colour(kind)
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        p.setColor(QPalette.ColorGroup.Active, role, value)
        p.setColor(QPalette.ColorGroup.Inactive, role, value)
    widget.setPalette(p)


TONE_ROLE = 0x0100 + 77  # Qt.UserRole + 77: the tone an item view's cell was given


def item_tone(item, kind: str | None) -> None:
    """An item view's cell (a QTableWidgetItem) in a tone; :func:`retone_items` repaints
    the cells of a table after a scheme change."""
    from PySide6.QtCore import Qt

    item.setData(TONE_ROLE, kind)
    item.setData(
        Qt.ItemDataRole.ForegroundRole, colour(kind) if kind and not _high_contrast else None
    )


def retone_items(table) -> None:
    from PySide6.QtCore import Qt

    for row in range(table.rowCount()):
        for col in range(table.columnCount()):
            item = table.item(row, col)
            kind = item.data(TONE_ROLE) if item is not None else None
            if kind:
                item.setData(Qt.ItemDataRole.ForegroundRole, colour(kind))


PANELS = {
    "info": ("panel", "panel_edge", "panel_text"),
    "alarm": ("alarm", "alarm_edge", "alarm_text"),
}


def paint_panel(frame, kind: str = "info") -> None:
    """A QFrame as a coloured box with a thin edge whose labels read on it: its ground,
    edge and text colours all come from the scheme (kept through scheme changes)."""
    if kind not in PANELS:
        raise ValueError(f"unknown panel {kind!r}; known: {', '.join(PANELS)}")
    from PySide6.QtWidgets import QFrame, QLabel

    frame.setProperty("cantorPanel", kind)
    # a label's own text paints with its foreground role: it keeps WindowText, no edge
    frame.setFrameShape(QFrame.Shape.NoFrame if isinstance(frame, QLabel) else QFrame.Shape.Box)
    frame.setAutoFillBackground(True)
    _paint_panel(frame, kind)


def navigation(view) -> None:
    """A list used to move between pages (the sidebar): its current row on the faint
    selection ground with the ordinary text, not a block of accent."""
    view.setProperty("cantorPanel", "navigation")
    _paint_panel(view, "navigation")


def accent_button(button) -> None:
    """The page's main button (Generate, Play) in the accent: ground and text from the
    scheme, kept through scheme changes."""
    button.setProperty("cantorPanel", "accent")
    _paint_panel(button, "accent")


def _paint_panel(frame, kind: str) -> None:
    from PySide6.QtGui import QPalette

    if _high_contrast:  # the system's colours: a panel is its frame, a button a button
        frame.setPalette(QPalette())
        return
    p = frame.palette()
    if kind == "navigation":
        for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
            p.setColor(group, QPalette.ColorRole.Highlight, colour("selection"))
            p.setColor(group, QPalette.ColorRole.HighlightedText, colour("text"))
        frame.setPalette(p)
        return
    if kind == "accent":
        for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
            p.setColor(group, QPalette.ColorRole.Button, colour("accent"))
            p.setColor(group, QPalette.ColorRole.ButtonText, colour("on_accent"))
        frame.setPalette(p)
        return
    ground, edge, text = (colour(name) for name in PANELS[kind])
    p.setColor(QPalette.ColorRole.Window, ground)
    p.setColor(QPalette.ColorRole.WindowText, text)  # the labels inside inherit it
    p.setColor(QPalette.ColorRole.Text, text)
    p.setColor(QPalette.ColorRole.Mid, edge)
    if frame.frameShape() != frame.Shape.NoFrame:
        frame.setForegroundRole(
            QPalette.ColorRole.Mid
        )  # the frame's edge; its labels keep WindowText
    frame.setPalette(p)


def invalid_outline() -> str:
    """The style sheet that outlines a field whose value is not valid (danger, 1 px)."""
    return f"border: 1px solid {colours().danger}; border-radius: 3px;"


# -- measuring -----------------------------------------------------------------------------


def luminance(hex_or_qcolor) -> float:
    """WCAG relative luminance of an sRGB colour."""
    from PySide6.QtGui import QColor

    c = QColor(hex_or_qcolor)

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast(a, b) -> float:
    """WCAG contrast ratio of two colours (1 … 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
