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
            event.ignore()            # to the scroll area behind it


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
