"""Text contrast as a user sees it: each widget's text colour (the palette role it really
paints with) against the background actually painted behind it (sampled from a grab of the
window). For tests/test_ui_theme.py. (No tests here.)"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cantor_desktop.ui.theme import contrast

MINIMUM = 4.5  # WCAG 2.x AA for body text


@dataclass
class Finding:
    where: str  # the widget: its class, object name and text
    text: str  # the text colour, #rrggbb
    ground: str  # the background painted behind it, #rrggbb
    ratio: float

    def __str__(self) -> str:
        return f"{self.where}: {self.text} on {self.ground} = {self.ratio:.2f}:1"


def _label_of(widget) -> str:
    text = ""
    for getter in ("text", "title", "placeholderText"):
        value = getattr(widget, getter, None)
        if callable(value):
            try:
                text = value() or ""
            except TypeError:
                continue
            if text:
                break
    name = widget.objectName()
    return f"{type(widget).__name__}{'#' + name if name else ''} {text[:50]!r}"


def _text_role(widget):
    """The palette role a widget draws its text with, and the text it shows ("" none)."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import (
        QAbstractButton,
        QComboBox,
        QGroupBox,
        QLabel,
        QLineEdit,
        QPlainTextEdit,
        QTextEdit,
    )

    if isinstance(widget, QLabel):
        if widget.pixmap() is not None and not widget.pixmap().isNull():
            return None, ""
        return widget.foregroundRole(), widget.text()
    if isinstance(widget, QAbstractButton):
        if type(widget).__name__ in ("QCheckBox", "QRadioButton"):
            return QPalette.WindowText, widget.text()
        return QPalette.ButtonText, widget.text()
    if isinstance(widget, QComboBox):
        return QPalette.ButtonText if not widget.isEditable() else QPalette.Text, (
            widget.currentText()
        )
    if isinstance(widget, QLineEdit):
        if widget.text():
            return QPalette.Text, widget.text()
        return QPalette.PlaceholderText, widget.placeholderText()
    if isinstance(widget, (QPlainTextEdit, QTextEdit)):
        text = widget.toPlainText()
        if text:
            return QPalette.Text, text
        return QPalette.PlaceholderText, widget.placeholderText()
    if isinstance(widget, QGroupBox):
        return QPalette.WindowText, widget.title()
    return None, ""


def ground_of(image, rect) -> str:
    """The colour most pixels of ``rect`` in ``image`` have: what the text sits on."""
    counts: Counter[int] = Counter()
    x0, y0 = max(0, rect.left()), max(0, rect.top())
    x1, y1 = min(image.width() - 1, rect.right()), min(image.height() - 1, rect.bottom())
    for y in range(y0, y1 + 1):
        for x in range(x0, x1 + 1):
            counts[image.pixel(x, y) & 0xFFFFFF] += 1
    if not counts:
        return ""
    return f"#{counts.most_common(1)[0][0]:06x}"


def check_window(window, minimum: float = MINIMUM) -> tuple[list[Finding], int]:
    """Every visible, enabled widget with text in ``window``: the findings under
    ``minimum``, and how many were measured."""
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QWidget

    image = window.grab().toImage()
    low, measured = [], 0
    for widget in window.findChildren(QWidget):
        if not widget.isVisible() or not widget.isEnabled() or widget.window() is not window:
            continue
        role, text = _text_role(widget)
        if role is None or not text.strip():
            continue
        shown = widget.visibleRegion().boundingRect()  # not what a scroll area hides
        if shown.width() <= 2 or shown.height() <= 2:
            continue
        rect = QRect(widget.mapTo(window, shown.topLeft()), shown.size())
        colour = widget.palette().color(QPalette.Active, role).name()
        ground = ground_of(image, rect)
        ratio = contrast(colour, ground)
        measured += 1
        if ratio < minimum:
            low.append(Finding(_label_of(widget), colour, ground, ratio))
    return low, measured
