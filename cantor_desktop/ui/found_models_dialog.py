"""Models on this machine…: the ACE-Step files other tools downloaded (the Hugging Face
cache, acestep.cpp's models folder, folders the musician adds), picked and adopted into the
node's library without a second download (:mod:`cantor_desktop.views.found_models`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..views import found_models as vm
from . import theme
from .message_line import MessageLine

if TYPE_CHECKING:
    from .services.models import ModelsService

COLUMNS = ("File", "Found in", "Size", "State")


class FoundModelsDialog(QDialog):
    """Lists what the node found, lets the musician pick, and adopts the picked files; the
    Library hears the outcome through ``on_adopted(message)``."""

    def __init__(self, models: ModelsService, on_adopted, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.models = models
        self.on_adopted = on_adopted
        self.found: list[dict[str, Any]] = []
        self.folders: list[str] = []
        self.setWindowTitle(self.tr("Models on this machine"))
        self.resize(820, 420)
        layout = QVBoxLayout(self)
        intro = QLabel(
            self.tr(
                "ACE-Step model files other tools already downloaded: the Hugging Face cache "
                "(Lemonade, ComfyUI), acestep.cpp's models folder, and folders you add. "
                "Adopted files are checked and linked, never moved or changed."
            )
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([self.tr(c) for c in COLUMNS])
        self.table.setAccessibleName(self.tr("Model files found"))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemChanged.connect(lambda _item: self._restate())
        layout.addWidget(self.table, 1)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        theme.tone(self.summary, "muted")
        layout.addWidget(self.summary)
        self.copy = QCheckBox(self.tr("Copy files that cannot be linked (on another drive)"))
        self.copy.setToolTip(self.tr("A copy uses the file's size again on Cantor's drive"))
        layout.addWidget(self.copy)
        self.message = MessageLine()
        layout.addWidget(self.message)
        row = QHBoxLayout()
        self.add_folder = QPushButton(self.tr("Add a folder…"))
        self.add_folder.setToolTip(self.tr("Look in another folder for .gguf model files"))
        self.add_folder.clicked.connect(self._choose_folder)
        row.addWidget(self.add_folder)
        row.addStretch(1)
        self.buttons = QDialogButtonBox()
        self.adopt_button = self.buttons.addButton(
            self.tr("Adopt"), QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.adopt_button.setToolTip(self.tr("Check the picked files and add them to the library"))
        self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.adopt_button.clicked.connect(self.adopt)
        self.buttons.rejected.connect(self.reject)
        row.addWidget(self.buttons)
        layout.addLayout(row)
        self._restate()

    # -- finding --------------------------------------------------------------------------
    def look(self) -> None:
        """Ask the node what it finds now."""
        self.message.say(self.tr("Looking…"))
        self.add_folder.setEnabled(False)
        self.models.find_elsewhere(
            self.folders,
            on_done=self.show_found,
            on_error=lambda why: self._failed(self.tr("look for models"), why),
        )

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, self.tr("A folder with .gguf files"))
        if folder:
            self.add_looked_folder(folder)

    def add_looked_folder(self, folder: str) -> None:
        if folder not in self.folders:
            self.folders.append(folder)
        self.look()

    def show_found(self, found: list[dict[str, Any]]) -> None:
        self.found = found
        self.add_folder.setEnabled(True)
        self.message.clear()
        self.table.blockSignals(True)
        self.table.setRowCount(0)
        for r in vm.rows(found):
            n = self.table.rowCount()
            self.table.insertRow(n)
            name = QTableWidgetItem(r.name)
            name.setData(Qt.ItemDataRole.UserRole, r.path)
            name.setToolTip(r.shown)
            if r.pickable:
                name.setFlags(name.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                name.setCheckState(Qt.CheckState.Checked)
            else:
                name.setFlags(name.flags() & ~Qt.ItemFlag.ItemIsUserCheckable)
            state = QTableWidgetItem(r.state)
            state.setToolTip(r.note)
            for column, item in enumerate(
                (name, QTableWidgetItem(r.where), QTableWidgetItem(r.size), state)
            ):
                self.table.setItem(n, column, item)
        self.table.blockSignals(False)
        self._restate()

    def picked(self) -> list[str]:
        out = []
        for n in range(self.table.rowCount()):
            item = self.table.item(n, 0)
            if item is not None and item.checkState() == Qt.CheckState.Checked:
                out.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return out

    def _restate(self) -> None:
        picked = self.picked()
        self.summary.setText(vm.summary(self.found, picked) if self.found or picked else "")
        self.adopt_button.setEnabled(bool(picked))

    # -- adopting -------------------------------------------------------------------------
    def adopt(self) -> None:
        picked = self.picked()
        if not picked:
            return
        self.adopt_button.setEnabled(False)
        self.message.say(self.tr("Checking %n file(s)…", "", len(picked)))
        self.models.adopt(
            picked,
            self.folders,
            self.copy.isChecked(),
            on_done=self._adopted,
            on_error=lambda why: self._failed(self.tr("adopt the files"), why),
        )

    def _adopted(self, outcomes: list[dict[str, Any]]) -> None:
        said = vm.adopted(outcomes)
        self.message.show_message(said)
        self.on_adopted(said)
        if vm.may_copy(outcomes) and not self.copy.isChecked():
            self.copy.setFocus()
        self.look()

    def _failed(self, what: str, why: str) -> None:
        self.add_folder.setEnabled(True)
        self._restate()
        self.message.fail(what, why)
