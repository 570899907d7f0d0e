"""Hardware & Backends: the machine, a row per backend with its evidence and actions, and
the node's pool (its members) when it is in one. What each row says and offers and what an
action's log says are the view-model's (:mod:`cantor_desktop.views.hardware`); this is its
widgets."""

from __future__ import annotations

import html

from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ... import config
from ...views.hardware import HardwareViewModel, backend_rows, cell_text, machine_text, row_offer
from ...views.messages import NOT_RUNNING
from ..message_line import MessageLine
from ..pool_panel import PoolPanel

if TYPE_CHECKING:
    from ..node_link import NodeLink

POOL_EVERY_S = 2.0  # the pool's members, live while the page is open


class HardwarePage(QWidget):
    def __init__(self, link: NodeLink, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.view_model = HardwareViewModel()
        layout = QVBoxLayout(self)
        layout.addWidget(
            QLabel(
                "<h2>%s</h2>"
                % html.escape(QCoreApplication.translate("MainWindow", "Hardware & Backends"))
            )
        )
        box = QGroupBox("This machine")
        bl = QVBoxLayout(box)
        self.machine = QLabel(machine_text({}))
        self.machine.setWordWrap(True)
        self.machine.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bl.addWidget(self.machine)
        layout.addWidget(box)
        self.pool = PoolPanel()
        layout.addWidget(self.pool)

        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Backend", "State", "Evidence", ""])
        self.table.setAccessibleName(self.tr("Backends"))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        h = self.table.horizontalHeader()
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        for col, w in ((0, 150), (1, 120), (3, 230)):
            h.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            h.resizeSection(col, w)
        # every backend in sight, whatever else the page shows (the pool's members)
        self.table.setMinimumHeight(
            self.table.horizontalHeader().sizeHint().height() + len(config.BACKENDS) * 40 + 4
        )
        layout.addWidget(self.table, 1)

        row = QHBoxLayout()
        self.find_button = QPushButton("Find the best backend")
        self.find_button.setToolTip(
            "Install each candidate in turn, best first, and keep the first that works"
        )
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.cancel = QPushButton("Cancel")
        self.cancel.hide()
        self.keep_loaded = QCheckBox("Keep the model loaded between songs")
        row.addWidget(self.find_button)
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel)
        row.addStretch(1)
        row.addWidget(self.keep_loaded)
        layout.addLayout(row)
        self.log = QListWidget()
        self.log.setAccessibleName(self.tr("What the backend search did"))
        self.log.setMaximumHeight(140)
        self.log.setMinimumHeight(48)
        self.log.setWordWrap(True)  # long reasons (a manifest URL and its error) wrap
        self.log.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.log)
        self.message = MessageLine(hide_when_empty=True)
        layout.addWidget(self.message)

        self.find_button.clicked.connect(self.find_best)
        self.cancel.clicked.connect(self._cancel)
        self.keep_loaded.toggled.connect(self._keep_loaded)
        link.backends.system_loaded.connect(self.set_system)
        link.backends.action_event.connect(self.on_event)
        link.pool.changed.connect(self.pool.set_pool)
        self.set_system(link.backends.system)
        self.pool.set_pool(link.pool.view)

    def showEvent(self, event) -> None:  # noqa: N802 — the pool is read often while shown
        super().showEvent(event)
        self.link.pool.show("hardware", POOL_EVERY_S)

    def hideEvent(self, event) -> None:  # noqa: N802
        super().hideEvent(event)
        self.link.pool.show("hardware", None)

    @property
    def running_key(self) -> str | None:
        """The action running (None: none)."""
        return self.view_model.running_key

    def set_system(self, system: dict) -> None:
        self.machine.setText(machine_text(system))
        self.keep_loaded.blockSignals(True)
        self.keep_loaded.setChecked(
            bool(system.get("keep_loaded", config.load_or_defaults()[0].get("node.keep_loaded")))
        )
        self.keep_loaded.blockSignals(False)
        rows = backend_rows(system)
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            name, state, shown, tip = cell_text(r)
            self.table.setItem(i, 0, QTableWidgetItem(name))
            self.table.setItem(i, 1, QTableWidgetItem(state))
            evidence = QTableWidgetItem(shown)
            evidence.setToolTip(tip)
            self.table.setItem(i, 2, evidence)
            self.table.setCellWidget(i, 3, self._actions(r))
            self.table.setRowHeight(i, 40)

    def _actions(self, r: dict) -> QWidget:
        label, tip, backend, enabled, updatable = row_offer(r)
        w = QWidget()
        row = QHBoxLayout(w)
        row.setContentsMargins(2, 2, 2, 2)
        use = QPushButton(label)
        use.setToolTip(tip)
        use.setEnabled(enabled)
        use.clicked.connect(lambda: self.run("use", backend))
        row.addWidget(use)
        if updatable:
            update = QPushButton("Update")
            update.clicked.connect(lambda: self.run("update", r["name"]))
            row.addWidget(update)
        return w

    def run(self, action: str, backend: str | None) -> None:
        self.message.clear()
        if not self.link.backends.running:
            self.message.fail(self.view_model.what(action, backend), NOT_RUNNING)
            return
        key = self.link.backends.run_action(action, backend)
        self.log.addItem(self.view_model.start(action, backend, key))
        self.progress.setValue(0)
        self.progress.show()
        self.cancel.show()
        self.find_button.setEnabled(False)

    def find_best(self) -> None:
        """The node tries the backends this machine supports, best first, and keeps the first
        that loads; each candidate's outcome shows here as it happens."""
        self.run("find", None)

    def _cancel(self) -> None:
        if self.view_model.running_key:
            self.link.backends.cancel(self.view_model.running_key)

    def on_event(self, key: str, event: dict) -> None:
        shown = self.view_model.event(event, self.link.models.listed)
        if shown.progress is not None:
            self.progress.setValue(shown.progress)
        for line in shown.lines:
            self.log.addItem(line)
        if shown.scroll:
            self.log.scrollToBottom()
        if shown.ended:
            if shown.failed:
                self.message.fail(self.view_model.running_what, shown.failed)
            self.progress.hide()
            self.cancel.hide()
            self.find_button.setEnabled(True)

    def _keep_loaded(self, on: bool) -> None:
        self.link.settings.change(
            {"node.keep_loaded": on},
            on_error=lambda text: self.message.fail("save Keep the model loaded", text),
        )
