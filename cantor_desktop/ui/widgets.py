"""Small widgets the pages share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLabel, QSizePolicy, QSpinBox

if TYPE_CHECKING:
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QWidget

    _Field = QWidget  # the mixin below goes with a QWidget class, first in its bases
else:
    _Field = object


class _WheelOnlyWhenFocused(_Field):
    """A field that ignores the mouse wheel until it has the focus: the wheel scrolls the
    page under the pointer instead of changing a value the user never clicked."""

    def _setup(self) -> None:
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 — Qt's name
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


class ElidedLabel(QLabel):
    """One line of text that fits the room it is given: cut with an ellipsis (…) where it
    is too long, the whole text in its tooltip. It asks for its whole width but makes do
    with a few characters, so a long name never makes the window wider."""

    def __init__(self, text: str = "", parent=None, mode=Qt.TextElideMode.ElideRight):
        super().__init__(parent)
        self._full = ""
        self._tip = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text or ""
        self._fit()
        self.updateGeometry()

    def text(self) -> str:
        return self._full

    def set_tip(self, tip: str) -> None:
        """A tooltip of its own (else: the whole text, where it is cut)."""
        self._tip = tip
        self._fit()

    def shown_text(self) -> str:
        """What is painted now: the text, or its start and an ellipsis."""
        return super().text()

    def minimumSizeHint(self) -> QSize:
        fm = self.fontMetrics()
        return QSize(fm.horizontalAdvance("Mmm…"), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        fm = self.fontMetrics()
        margins = self.contentsMargins()
        width = fm.horizontalAdvance(self._full) + margins.left() + margins.right() + 2
        return QSize(width, super().sizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        shown = self.fontMetrics().elidedText(
            self._full, self._mode, max(0, self.contentsRect().width())
        )
        if shown != super().text():
            QLabel.setText(self, shown)
        self.setToolTip(self._tip or (self._full if shown != self._full else ""))


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


def follow(button, action) -> None:
    """A push button that is a QAction's face: a click triggers the action, and the button
    is enabled, and says in its tooltip what it does (or why it cannot now), as the action
    is. (A QToolButton with a default action would do the same, but looks like a tool
    button.)"""

    def sync() -> None:
        button.setEnabled(action.isEnabled())
        button.setToolTip(action.toolTip())

    button.clicked.connect(action.trigger)
    action.changed.connect(sync)
    sync()
