"""A combo box's list of choices, some of them greyed out, held in Python.

QComboBox's own model is a QStandardItemModel; greying a row out means taking its
QStandardItem, and the Python wrapper of that item outlives the C++ item that
``clear()`` deletes (a QStandardItem is no QObject, so the binding is never told: a
wrapper held across a refill still calls itself valid and reads freed memory). This
model hands out no item objects: a row is three plain values, and greyed out is a flag
the view asks the model for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

AnyIndex = QModelIndex | QPersistentModelIndex


class Choice(NamedTuple):
    label: str
    data: str
    usable: bool = True


class ChoiceList(QAbstractListModel):
    """Rows of (label, data, usable): Qt.DisplayRole is the label, Qt.UserRole the data
    (what ``QComboBox.currentData()`` and ``findData()`` read), and a row that is not
    usable is shown but cannot be picked."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: tuple[Choice, ...] = ()

    def rows(self) -> tuple[Choice, ...]:
        return self._rows

    def set_rows(self, rows: Sequence[Choice]) -> None:
        self.beginResetModel()
        self._rows = tuple(rows)
        self.endResetModel()

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return row.label
        if role == Qt.ItemDataRole.UserRole:
            return row.data
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return Qt.ItemFlag.NoItemFlags
        if self._rows[index.row()].usable:
            return Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled
        return Qt.ItemFlag.NoItemFlags
