"""Small widgets the pages share."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QSpinBox


class _WheelOnlyWhenFocused:
    """A field that ignores the mouse wheel until it has the focus: the wheel scrolls the
    page under the pointer instead of changing a value the user never clicked."""

    def _setup(self) -> None:
        self.setFocusPolicy(Qt.StrongFocus)

    def wheelEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if self.hasFocus():
            super().wheelEvent(event)
        else:
            event.ignore()  # to the scroll area behind it


class ComboBox(_WheelOnlyWhenFocused, QComboBox):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._setup()


class SpinBox(_WheelOnlyWhenFocused, QSpinBox):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._setup()


class DoubleSpinBox(_WheelOnlyWhenFocused, QDoubleSpinBox):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._setup()


def set_text_colour(label, colour: str) -> None:
    """Colour a label's text through its palette. A style sheet would do the same, but the
    first one in a window loads Qt's style-sheet engine for it (~0.4 MiB)."""
    from PySide6.QtGui import QColor, QPalette

    palette = label.palette()
    palette.setColor(QPalette.WindowText, QColor(colour))
    label.setPalette(palette)


def heading(text: str, scale: float = 1.0):
    """A bold label, ``scale`` times the normal size: what ``<b>`` or ``<h2>`` would show,
    without making the label a rich-text document."""
    from PySide6.QtWidgets import QLabel

    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    if scale != 1.0 and font.pointSizeF() > 0:
        font.setPointSizeF(font.pointSizeF() * scale)
    elif scale != 1.0:  # a font set in pixels
        font.setPixelSize(round(font.pixelSize() * scale))
    label.setFont(font)
    return label
