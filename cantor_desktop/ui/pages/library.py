"""Library: the node's models with what each is for, the one suited to the node's machine,
pulls with live progress (retry, pause, discard), removal, import and the Hugging Face token;
the node's LoRA adapters (what each was made for, add, remove).

Everything acts on the node (its files, its keyring), whether it runs here or elsewhere; the
page says the outcome of every action, failures included. What each row shows and offers,
and every sentence, is the view-model's
(:class:`~cantor_desktop.views.library.LibraryViewModel`); this is its widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QFont, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...models.events import PullEvent
from ...views.library import ACTION_TIPS, LibraryViewModel
from ...views.messages import Message
from .. import theme
from ..found_models_dialog import FoundModelsDialog
from ..message_line import MessageLine
from . import page_header

if TYPE_CHECKING:
    from ..node_link import NodeLink

COLUMNS = ["Model", "Size", "State", "Progress", "Speed", "Time left", ""]
# Fixed column widths (Size … actions); the Model column takes the rest. Below WIDE_AT px of
# table the narrow set hides Speed and Time left (the progress bar's tooltip has them) so the
# action column stays in view and the model name keeps room.
WIDE = ((1, 114), (2, 118), (3, 140), (4, 72), (5, 62), (6, 174))
NARROW = ((1, 84), (2, 96), (3, 120), (4, 0), (5, 0), (6, 174))
WIDE_AT = 880
ADAPTER_COLUMNS = ["Adapter", "Size", "Made for", ""]
ADAPTER_ROWS_SHOWN = 4  # the adapter table's height, in rows (it scrolls past that)


def _table(columns: list[str], name: str) -> QTableWidget:
    """A read-only table whose long texts end in "…" (the whole text is the tooltip),
    called ``name`` to a screen reader."""
    table = QTableWidget(0, len(columns))
    table.setAccessibleName(name)
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().hide()
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideRight)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return table


def _buttons(
    labels: list[str], tips: dict[str, str], act: Callable[[str], None], word: str = ""
) -> QWidget:
    """A table cell of buttons (after a ``word`` if given); a click calls ``act(label)``."""
    cell = QWidget()
    box = QHBoxLayout(cell)
    box.setContentsMargins(2, 2, 2, 2)
    if word:
        box.addWidget(QLabel(word))
    for label in labels:
        button = QPushButton(label)
        button.setToolTip(tips.get(label, ""))
        button.clicked.connect(lambda _c=False, chosen=label: act(chosen))
        box.addWidget(button)
    return cell


class LibraryPage(QWidget):
    def __init__(self, link: NodeLink, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.view_model = LibraryViewModel()
        self._token_read = False  # the node's Hugging Face token state, read once connected
        layout = QVBoxLayout(self)
        self.disk = QLabel()
        self.disk.setTextFormat(Qt.TextFormat.PlainText)
        self.disk.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addLayout(
            page_header(QCoreApplication.translate("MainWindow", "Library"), self.disk)
        )
        layout.addWidget(self._advice_banner())
        layout.addWidget(self._models_table(), 1)
        under = QHBoxLayout()
        self.details = QLabel()
        self.details.setWordWrap(True)
        theme.tone(self.details, "muted")
        under.addWidget(self.details, 1)
        self.every_quant = QCheckBox("Show every quantisation")
        self.every_quant.setToolTip(
            "Off: one size (Q8_0) of each model, plus the recommended "
            "one and whatever is on the node already"
        )
        self.every_quant.toggled.connect(lambda _on: self._filter_rows())
        under.addWidget(self.every_quant, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(under)
        self._adapter_section(layout)
        self.message = MessageLine()
        layout.addWidget(self.message)
        layout.addLayout(self._tools())

        link.models.loaded.connect(self.set_models)
        link.backends.system_loaded.connect(lambda _s: self._update_advice())
        link.pulls.changed.connect(self.on_pull_event)
        link.connection.state_changed.connect(self._node_state)
        link.adapters.changed.connect(self.set_adapters)
        self.set_models(link.models.listed)
        self.set_adapters(link.adapters.adapters)
        self._node_state(str(link.connection.state))
        theme.notifier().changed.connect(self._scheme_changed)

    # -- building -------------------------------------------------------------------------
    def _advice_banner(self) -> QFrame:
        """The model recommended for the node's machine, and its Download."""
        self.advice = QFrame()
        self.advice.setObjectName("advice")
        theme.paint_panel(self.advice, "info")
        row = QHBoxLayout(self.advice)
        row.setContentsMargins(10, 6, 10, 6)
        self.advice_text = QLabel()
        self.advice_text.setWordWrap(True)
        row.addWidget(self.advice_text, 1)
        self.advice_button = QPushButton("Download")
        self.advice_button.clicked.connect(self._pull_recommended)
        row.addWidget(self.advice_button)
        self.advice.hide()
        return self.advice

    def _models_table(self) -> QTableWidget:
        self.table = _table(COLUMNS, self.tr("Models"))
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        h = self.table.horizontalHeader()
        h.setMinimumSectionSize(0)
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col, _w in WIDE:
            h.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
        self.narrow: bool | None = None
        self._fit_columns(self.table.width())
        self.table.installEventFilter(self)
        self.table.itemSelectionChanged.connect(self._show_details)
        return self.table

    def _tools(self) -> QHBoxLayout:
        """Import, and the Hugging Face token the node keeps for gated models."""
        tools = QHBoxLayout()
        self.import_button = QPushButton("Import GGUF files…")
        self.import_button.clicked.connect(self.import_gguf)
        tools.addWidget(self.import_button)
        self.find_button = QPushButton("Models on this machine…")
        self.find_button.setToolTip(
            "Adopt models other tools already downloaded (Hugging Face cache, acestep.cpp): "
            "checked and linked, no second download"
        )
        self.find_button.clicked.connect(self.find_elsewhere)
        tools.addWidget(self.find_button)
        tools.addStretch(1)
        token_label = QLabel(self.tr("Hugging Face &token"))
        tools.addWidget(token_label)
        self.hf_token = QLineEdit()
        token_label.setBuddy(self.hf_token)
        self.hf_token.setEchoMode(QLineEdit.EchoMode.Password)
        self.hf_token.setPlaceholderText("for gated models only")
        self.hf_token.setToolTip("Kept in the keyring of the node's machine; never shown again")
        self.hf_token.setMinimumWidth(240)
        self.hf_state = QLabel("")
        theme.tone(self.hf_state, "muted")
        self.hf_save = QPushButton("Save token")
        self.hf_save.clicked.connect(self._save_hf_token)
        self.hf_remove = QPushButton("Remove")
        self.hf_remove.clicked.connect(self._remove_hf_token)
        self.hf_remove.setEnabled(False)
        for w in (self.hf_token, self.hf_state, self.hf_save, self.hf_remove):
            tools.addWidget(w)
        return tools

    def _scheme_changed(self, _scheme: str) -> None:
        for table in (self.table, self.adapter_table):
            theme.retone_items(table)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 — Qt's name
        if watched is self.table and isinstance(event, QResizeEvent):
            self._fit_columns(event.size().width())
        return super().eventFilter(watched, event)

    def _fit_columns(self, width: int) -> None:
        narrow = width < WIDE_AT
        if narrow == self.narrow:
            return
        self.narrow = narrow
        h = self.table.horizontalHeader()
        for col, w in NARROW if narrow else WIDE:
            h.setSectionHidden(col, w == 0)
            if w:
                h.resizeSection(col, w)

    def _say(self, message: Message) -> None:
        self.message.show_message(message)

    # -- the models -----------------------------------------------------------------------
    @property
    def rows(self) -> dict[str, int]:
        """Each model's row in the table."""
        return self.view_model.rows

    def set_models(self, models: list) -> None:
        """Show the node's library; rows whose model did not change are left alone."""
        vm = self.view_model
        new_rows, redraw = vm.take_models(models, self.link.backends.system)
        if new_rows:
            self.table.setRowCount(0)
            self.table.setRowCount(len(vm.rows))
            for row in vm.rows.values():
                self.table.setRowHeight(row, 44)
        for name in redraw:
            self._fill_row(name)
        self._show_advice()
        self._filter_rows()
        self.disk.setText(vm.disk_line(self.link.connection.remote))
        waiting = vm.waiting(self.message.text())
        if waiting is not None:
            self.message.say(waiting)

    def _fill_row(self, name: str) -> None:
        row, shown = self.view_model.rows[name], self.view_model.row(name)
        item = QTableWidgetItem(shown.text)
        item.setToolTip(shown.tooltip)
        if shown.bold:
            font = QFont(item.font())
            font.setBold(True)
            item.setFont(font)
        self.table.setItem(row, 0, item)
        self.table.setItem(row, 1, QTableWidgetItem(shown.size))
        self.table.setItem(row, 2, QTableWidgetItem(""))
        self.table.removeCellWidget(row, 3)
        if shown.bar is not None:
            bar = self._bar(row)
            bar.setValue(shown.bar[0])
            bar.setFormat(shown.bar[1])
        self.table.setItem(row, 4, QTableWidgetItem(""))
        self.table.setItem(row, 5, QTableWidgetItem(""))
        self._refresh_actions(name)

    def _item(self, row: int, column: int) -> QTableWidgetItem:
        """A cell of a model's row (each is made with the row: :meth:`_fill_row`)."""
        item = self.table.item(row, column)
        if item is None:
            item = QTableWidgetItem("")
            self.table.setItem(row, column, item)
        return item

    def _bar(self, row: int) -> QProgressBar:
        """The row's progress bar, made when first needed (rows without one stay light)."""
        bar = self.table.cellWidget(row, 3)
        if not isinstance(bar, QProgressBar):
            bar = QProgressBar()
            bar.setRange(0, 1000)
            self.table.setCellWidget(row, 3, bar)
        return bar

    def _refresh_actions(self, name: str) -> None:
        row = self.view_model.rows.get(name)
        if row is None:
            return
        state = self.view_model.state(name)
        cell = self._item(row, 2)
        cell.setText(state.text)
        cell.setToolTip(state.tooltip)
        theme.item_tone(cell, state.tone)
        handlers = {
            "Pause": self.pause,
            "Cancel": self.cancel,
            "Retry": self.pull,
            "Discard": self.cancel,
            "Remove": self.remove,
            "Resume": self.pull,
            "Repair": self.pull,
            "Download": self.pull,
        }
        word = "always ready" if state.always_ready else ""
        buttons = _buttons(
            list(state.actions), ACTION_TIPS, lambda label: handlers[label](name), word
        )
        self.table.setCellWidget(row, 6, buttons)

    def _filter_rows(self) -> None:
        every = self.every_quant.isChecked()
        for name, row in self.view_model.rows.items():
            self.table.setRowHidden(row, self.view_model.hidden(name, every))

    def _show_details(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        name = next((n for n, r in self.view_model.rows.items() if r in rows), None)
        self.details.setText(self.view_model.details(name))

    # -- the recommendation ---------------------------------------------------------------
    def _update_advice(self) -> None:
        """The node's machine was read again: the recommendation (every row drawn again
        when it moved)."""
        if self.view_model.update_advice(self.link.backends.system):
            for name in self.view_model.rows:
                self._fill_row(name)
            self._filter_rows()
        self._show_advice()

    def _show_advice(self) -> None:
        advice = self.view_model.advice()
        self.advice.setVisible(advice is not None)
        if advice is not None:
            self.advice_text.setText(advice.text)
            self.advice_button.setVisible(advice.button is not None)
            self.advice_button.setText(advice.button or "Download")

    def _pull_recommended(self) -> None:
        if self.view_model.recommended is not None:
            self.pull(self.view_model.recommended.name)

    # -- actions --------------------------------------------------------------------------
    def pull(self, name: str) -> None:
        self.view_model.start_pull(name)
        self.link.pulls.pull(name)
        self._refresh_actions(name)
        self._update_advice()

    def pause(self, name: str) -> None:
        self.view_model.pause(name)
        self.link.pulls.pause(name)
        self._refresh_actions(name)

    def cancel(self, name: str) -> None:
        """Stop (if running) and delete the partly downloaded files on the node."""

        def done(answer: dict) -> None:
            self._say(self.view_model.discarded(name, answer))
            self._refresh_actions(name)

        self.link.pulls.discard(
            name,
            on_done=done,
            on_error=lambda text: self.message.fail(f"delete the partial files of {name}", text),
        )
        self._refresh_actions(name)

    def remove(self, name: str, confirm: bool = True) -> None:
        if confirm:
            answer = QMessageBox.question(
                self, "Remove model", f"Remove {name} and delete its files?"
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.link.models.remove(
            name,
            on_done=lambda _a: self.message.say(f"{name} removed."),
            on_error=lambda text: self.message.fail(f"remove {name}", text),
        )

    def on_pull_event(self, name: str, event: PullEvent) -> None:
        shown = self.view_model.pull_event(name, event)
        if shown.message is not None:
            self._say(shown.message)
        row = self.view_model.rows.get(name)
        if shown.ended:
            if row is not None:
                self._item(row, 4).setText("")
                self._item(row, 5).setText("")
                if shown.drop_bar:
                    self.table.removeCellWidget(row, 3)  # nothing arrived: no bar
            self._refresh_actions(name)
            self._filter_rows()
            self._update_advice()
            return
        if shown.actions:
            self._refresh_actions(name)
        if row is None:
            return
        state = self._item(row, 2)
        if shown.state is not None:
            state.setText(shown.state)
        if shown.state_tip is not None:
            state.setToolTip(shown.state_tip)
        if shown.bar_value is not None or shown.bar_text is not None or shown.bar_tip:
            bar = self._bar(row)
            if shown.bar_value is not None:
                bar.setValue(shown.bar_value)
            if shown.bar_text is not None:
                bar.setFormat(shown.bar_text)
            if shown.bar_tip is not None:
                bar.setToolTip(shown.bar_tip)
        if shown.speed is not None:
            self._item(row, 4).setText(shown.speed)
        if shown.time_left is not None:
            self._item(row, 5).setText(shown.time_left)

    # -- import ---------------------------------------------------------------------------
    def import_gguf(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(
            self, "Import GGUF model files", "", "GGUF models (*.gguf)"
        )
        if files:
            self.import_files(files)

    def import_files(self, files: list[str]) -> None:
        """This home's node adopts the files where they are; a node elsewhere gets them
        uploaded into its models folder."""
        remote = self.link.connection.remote
        self.message.say(self.view_model.importing(len(files), remote))
        self.link.models.import_files(
            files,
            on_done=lambda outcomes: self._say(self.view_model.imported(outcomes, remote)),
            on_error=lambda text: self.message.fail("import the files", text),
            on_progress=self._upload_progress,
        )

    def find_elsewhere(self) -> FoundModelsDialog:
        """The dialog of models other tools downloaded on the node's machine."""
        dialog = FoundModelsDialog(self.link.models, self._say, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        dialog.look()
        return dialog

    def _upload_progress(self, path: str, sent: int, total: int) -> None:
        self.message.say(self.view_model.sending(path, sent, total))

    # -- the Hugging Face token (on the node's machine) -----------------------------------
    def _node_state(self, state: str) -> None:
        """Connected: whether the node (perhaps another one now) keeps a token."""
        connected = state in ("idle", "generating")
        if connected and not self._token_read:
            self.link.models.hf_token(
                on_done=self._show_hf_token, on_error=lambda _text: self.hf_state.setText("unknown")
            )
        self._token_read = connected

    def _show_hf_token(self, status: dict) -> None:
        said, tip, removable, hint = self.view_model.token_state(status)
        self.hf_state.setText(said)
        self.hf_state.setToolTip(tip)
        self.hf_remove.setEnabled(removable)
        self.hf_token.setPlaceholderText(hint)

    def _save_hf_token(self) -> None:
        token = self.hf_token.text().strip()
        if not token:
            self.message.say("Type the token first (huggingface.co → Settings → Access Tokens).")
            return

        def saved(status: dict) -> None:
            self.hf_token.clear()
            self._show_hf_token(status)
            self.message.say("Hugging Face token saved on the node's machine (its keyring).")

        self.link.models.set_hf_token(
            token, on_done=saved, on_error=lambda text: self.message.fail("save the token", text)
        )

    def _remove_hf_token(self) -> None:
        def removed(status: dict) -> None:
            self._show_hf_token(status)
            self.message.say(
                "Hugging Face token removed from the node's machine."
                if status.get("removed")
                else "No token was stored on the node."
            )

        self.link.models.remove_hf_token(
            on_done=removed, on_error=lambda text: self.message.fail("remove the token", text)
        )

    # -- adapters (LoRA) ------------------------------------------------------------------
    def _adapter_section(self, layout: QVBoxLayout) -> None:
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Adapters (LoRA)</b>"))
        self.adapters_note = QLabel()
        self.adapters_note.setTextFormat(Qt.TextFormat.PlainText)
        theme.tone(self.adapters_note, "muted")
        head.addWidget(self.adapters_note, 1)
        self.add_adapter_button = QPushButton("Add adapter…")
        self.add_adapter_button.setToolTip(
            "A .safetensors LoRA (ComfyUI) or a PEFT folder, "
            "made for ACE-Step 1.5; Compose → Advanced uses it"
        )
        self.add_adapter_button.clicked.connect(self.choose_adapters)
        head.addWidget(self.add_adapter_button)
        layout.addLayout(head)
        t = self.adapter_table = _table(ADAPTER_COLUMNS, self.tr("Adapters"))
        t.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        h = t.horizontalHeader()
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        for col, width in ((1, 90), (3, 96)):
            h.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            h.resizeSection(col, width)
        t.verticalHeader().setDefaultSectionSize(34)
        t.setFixedHeight(h.height() + 34 * ADAPTER_ROWS_SHOWN + 4)
        layout.addWidget(t)

    def set_adapters(self, adapters: list) -> None:
        """One row per adapter on the node: name, size, what it was made for, Remove."""
        self.adapter_rows: dict[str, int] = {}
        t = self.adapter_table
        t.setRowCount(len(adapters))
        for row, adapter in enumerate(adapters):
            shown = self.view_model.adapter_row(adapter)
            self.adapter_rows[shown.name] = row
            item = QTableWidgetItem(shown.name)
            item.setToolTip(shown.tooltip)
            t.setItem(row, 0, item)
            t.setItem(row, 1, QTableWidgetItem(shown.size))
            made_for = QTableWidgetItem(shown.made_for)
            made_for.setToolTip(shown.made_for)
            if shown.problem:
                theme.item_tone(made_for, "danger")
            t.setItem(row, 2, made_for)
            t.setCellWidget(row, 3, self._remove_button(shown.name))
        adapters_known = self.link.adapters.loaded
        remote = self.link.connection.remote
        self.adapters_note.setText(self.view_model.adapters_note(adapters, adapters_known, remote))

    def _remove_button(self, name: str) -> QWidget:
        tips = {"Remove": "delete the adapter on the node"}
        return _buttons(["Remove"], tips, lambda _label: self.remove_adapter(name))

    def choose_adapters(self) -> None:
        """A file (a node elsewhere: uploaded), or on this home's node a PEFT folder too."""

        def files() -> None:
            chosen, _ = QFileDialog.getOpenFileNames(
                self, "Add LoRA adapters", "", "LoRA adapters (*.safetensors)"
            )
            if chosen:
                self.add_adapters(chosen)

        def folder() -> None:
            chosen = QFileDialog.getExistingDirectory(self, "Add a PEFT adapter folder")
            if chosen:
                self.add_adapters([chosen])

        if self.link.connection.remote:
            files()
            return
        menu = QMenu(self)
        menu.addAction("A .safetensors file…", files)
        menu.addAction("A PEFT folder (adapter_model.safetensors)…", folder)
        menu.exec(self.add_adapter_button.mapToGlobal(self.add_adapter_button.rect().bottomLeft()))

    def add_adapters(self, paths: list[str]) -> None:
        self.message.say(self.view_model.adding(len(paths), self.link.connection.remote))
        self.link.adapters.add(
            paths,
            on_done=lambda outcomes: self._say(self.view_model.adapters_added(outcomes)),
            on_error=lambda text: self.message.fail("add the adapters", text),
            on_progress=self._upload_progress,
        )

    def remove_adapter(self, name: str, confirm: bool = True) -> None:
        if confirm:
            answer = QMessageBox.question(
                self, "Remove adapter", f"Remove the adapter {name} and delete its files?"
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.link.adapters.remove(
            name,
            on_done=lambda answer: self._say(self.view_model.adapter_removed(name, answer)),
            on_error=lambda text: self.message.fail(f"remove {name}", text),
        )
