"""Library: the node's models with what each is for, the one suited to the node's machine,
pulls with live progress (retry, pause, discard), removal, import and the Hugging Face token;
the node's LoRA adapters (what each was made for, add, remove).

Everything acts on the node (its files, its keyring), whether it runs here or elsewhere; the
page reads the node's typed pull events (:class:`~cantor_desktop.models.events.PullEvent`)
and says the outcome of every action, failures included.
"""

from __future__ import annotations

import re
from html import escape

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont
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

from ...models.advice import Machine, Recommendation, describe, family_words, recommend
from ...models.events import PullEvent, PullStep
from .. import theme
from ...views.transfer import TransferMeter, human_bytes, human_duration
from . import page_header

COLUMNS = ["Model", "Size", "State", "Progress", "Speed", "Time left", ""]
# Fixed column widths (Size … actions); the Model column takes the rest. Below WIDE_AT px of
# table the narrow set hides Speed and Time left (the progress bar's tooltip has them) so the
# action column stays in view and the model name keeps room.
WIDE = ((1, 114), (2, 118), (3, 140), (4, 72), (5, 62), (6, 174))
NARROW = ((1, 84), (2, 96), (3, 120), (4, 0), (5, 0), (6, 174))
WIDE_AT = 880
READY = "ready"
DEFAULT_QUANT = "Q8_0"
RED, AMBER = "danger", "warning"  # tones of the message line (ui.theme)
STAR = "★"
KINDS = {"dit": "DiT", "text_enc": "text encoder", "vae": "VAE", "lm": "language model"}
ADAPTER_COLUMNS = ["Adapter", "Size", "Made for", ""]
ADAPTER_ROWS_SHOWN = 4  # the adapter table's height, in rows (it scrolls past that)


def done_message(name: str, event: PullEvent) -> str:
    """What a finished pull says: ready, or downloaded with the engine problem and what to do."""
    if event.engine_ready is False:
        reason = (event.engine_error or "the engine step failed").strip().rstrip(".")
        return (
            f"{name}: Model ready. No engine yet: {reason} — "
            f"Hardware & Backends → Find the best backend"
        )
    return f"{name} is downloaded and ready."


def failed_message(name: str, event: PullEvent) -> str:
    """The page's line for a failed pull; addresses shortened to the file they name (the
    row's tooltip keeps the node's whole message)."""
    reason = re.sub(r"https?://\S+/([^/\s]+?):", r"\1:", event.message).rstrip(".")
    text = f"Download of {name} failed: {reason}."
    if event.error_type == "NeedsToken":
        text += " Save a Hugging Face token below (it is kept on the node's machine), then Retry."
    return text


def row_actions(
    state: str, *, builtin: bool, pulling: bool, failed: bool, partial: bool
) -> list[str]:
    """The buttons a row offers, by what the model is doing (no Qt)."""
    if builtin:
        return []
    if pulling:
        return ["Pause", "Cancel"]
    if failed:
        return ["Retry", "Discard"] if partial else ["Retry"]
    if state == READY:
        return ["Remove"]
    if state in ("partial", "paused"):
        return ["Resume", "Discard"]
    if state in ("corrupt", "missing companion"):
        return ["Repair"]
    return ["Download"]


def _named(name: str, why: str) -> str:
    """ "name: why", unless the reason already starts with the name."""
    return why if why.startswith(name) else f"{name}: {why}"


class LibraryPage(QWidget):
    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.meters: dict[str, TransferMeter] = {}
        self.rows: dict[str, int] = {}
        self.pulling: set[str] = set()  # models whose pull is running
        self.failed: dict[str, str] = {}  # model → why its last pull failed
        self.paused: set[str] = set()
        self.recommended: Recommendation | None = None
        self._kinds: dict[str, str] = {}  # file name → kind, from pull plans
        self._received: dict[str, int] = {}  # model → bytes its running pull got
        self._models: dict[str, dict] = {}
        self._shown: dict[str, dict] = {}
        self._token_read = False  # the node's Hugging Face token state, read once connected
        layout = QVBoxLayout(self)
        self.disk = QLabel()
        self.disk.setTextFormat(Qt.PlainText)
        self.disk.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addLayout(page_header("Library", self.disk))

        self.advice = QFrame()
        self.advice.setObjectName("advice")
        theme.paint_panel(self.advice, "info")
        row = QHBoxLayout(self.advice)
        row.setContentsMargins(10, 6, 10, 6)
        self.advice_text = QLabel()
        self.advice_text.setWordWrap(True)
        row.addWidget(self.advice_text, 1)
        self.advice_button = QPushButton("Download")
        self.advice_button.clicked.connect(
            lambda: self.recommended and self.pull(self.recommended.name)
        )
        row.addWidget(self.advice_button)
        self.advice.hide()
        layout.addWidget(self.advice)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.setSelectionMode(QTableWidget.SingleSelection)
        self.table.setWordWrap(False)  # long names end in "…", the full name is the tooltip
        self.table.setTextElideMode(Qt.ElideRight)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        h = self.table.horizontalHeader()
        h.setMinimumSectionSize(0)
        h.setSectionResizeMode(0, QHeaderView.Stretch)
        for col, _w in WIDE:
            h.setSectionResizeMode(col, QHeaderView.Fixed)
        self.narrow: bool | None = None
        self._fit_columns(self.table.width())
        self.table.installEventFilter(self)
        self.table.itemSelectionChanged.connect(self._show_details)
        layout.addWidget(self.table, 1)

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
        under.addWidget(self.every_quant, 0, Qt.AlignTop)
        layout.addLayout(under)
        self._adapter_section(layout)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.PlainText)  # node messages are text, never markup
        layout.addWidget(self.message)

        tools = QHBoxLayout()
        self.import_button = QPushButton("Import GGUF files…")
        self.import_button.clicked.connect(self.import_gguf)
        tools.addWidget(self.import_button)
        tools.addStretch(1)
        tools.addWidget(QLabel("Hugging Face token"))
        self.hf_token = QLineEdit()
        self.hf_token.setEchoMode(QLineEdit.Password)
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
        layout.addLayout(tools)

        link.models.loaded.connect(self.set_models)
        link.backends.system_loaded.connect(lambda _s: self._update_advice())
        link.pulls.changed.connect(self.on_pull_event)
        link.connection.state_changed.connect(self._node_state)
        self.set_models(link.models.listed)
        link.adapters.changed.connect(self.set_adapters)
        self.set_adapters(link.adapters.adapters)
        self._node_state(str(link.connection.state))
        theme.notifier().changed.connect(self._scheme_changed)

    def _scheme_changed(self, _scheme: str) -> None:
        for table in (self.table, self.adapter_table):
            theme.retone_items(table)

    # -- layout ---------------------------------------------------------------------------
    def eventFilter(self, obj, event):
        if obj is self.table and event.type() == QEvent.Resize:
            self._fit_columns(event.size().width())
        return super().eventFilter(obj, event)

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

    def _say(self, text: str, tone: str | None = None) -> None:
        theme.tone(self.message, tone or None)
        self.message.setText(text)

    # -- the models -----------------------------------------------------------------------
    def set_models(self, models: list) -> None:
        """Show the node's library; rows whose model did not change are left alone."""
        unique: dict[str, dict] = {}
        for m in models:
            unique.setdefault(m["name"], m)
        self._models = unique
        changed_advice = self._update_advice(refill=False)
        names = list(unique)
        if names != list(self.rows):
            self.table.setRowCount(0)
            self.rows.clear()
            self._shown = {}
            self.table.setRowCount(len(names))
            for row, name in enumerate(names):
                self.rows[name] = row
                self.table.setRowHeight(row, 44)
        elif changed_advice:
            self._shown = {}
        for name, m in unique.items():
            if self._shown.get(name) != m:
                self._fill_row(self.rows[name], name, m)
                self._shown[name] = m
        self._filter_rows()
        self._disk_line()
        waiting = "The catalogue shows here once the node answers (Start node, bottom right)."
        if not unique:
            self._say(waiting)
        elif self.message.text() == waiting:
            self._say("")

    def _disk_line(self) -> None:
        used = sum(
            int(m.get("size_bytes") or 0) for m in self._models.values() if not m.get("builtin")
        )
        folder = next(
            (
                m.get("folder")
                for m in self._models.values()
                if m.get("folder") and not m.get("builtin") and not m.get("imported")
            ),
            None,
        )
        where = " on the node's machine" if self.link.connection.remote else ""
        self.disk.setText(
            f"Models use {human_bytes(used)}{where}" + (f" · {folder}" if folder else "")
        )

    def _fill_row(self, row: int, name: str, m: dict) -> None:
        title = m.get("display_name") or name
        marked = self.recommended is not None and self.recommended.name == name
        if marked:
            title = f"{STAR} {title}"
        about = (
            "for trying things out: no download"
            if m.get("builtin")
            else family_words(m.get("variant"))
        )
        item = QTableWidgetItem(f"{title}\n{about}" if about else title)
        item.setToolTip(
            "\n".join(
                x
                for x in (
                    name,
                    "Recommended for this machine." if marked else "",
                    describe(m.get("variant"), m.get("quant")) or about,
                )
                if x
            )
        )
        if marked:
            font = QFont(item.font())
            font.setBold(True)
            item.setFont(font)
        self.table.setItem(row, 0, item)
        state = m.get("state", "")
        size, to_get = int(m.get("size_bytes") or 0), int(m.get("download_bytes") or 0)
        if m.get("builtin"):
            size_text = "built in"
        elif state == READY or not to_get:
            size_text = human_bytes(size)
        else:
            size_text = f"{human_bytes(to_get)} to get"
        self.table.setItem(row, 1, QTableWidgetItem(size_text))
        self.table.setItem(row, 2, QTableWidgetItem(""))
        self.table.removeCellWidget(row, 3)
        if not m.get("builtin") and (size or name in self.pulling):
            bar = self._bar(row)
            bar.setValue(1000 if state == READY else int(1000 * size / max(1, size + to_get)))
            bar.setFormat(
                READY if state == READY else f"{human_bytes(size)} of {human_bytes(size + to_get)}"
            )
        self.table.setItem(row, 4, QTableWidgetItem(""))
        self.table.setItem(row, 5, QTableWidgetItem(""))
        self._refresh_actions(name)

    def _bar(self, row: int) -> QProgressBar:
        """The row's progress bar, made when first needed (rows without one stay light)."""
        bar = self.table.cellWidget(row, 3)
        if not isinstance(bar, QProgressBar):
            bar = QProgressBar()
            bar.setRange(0, 1000)
            self.table.setCellWidget(row, 3, bar)
        return bar

    def _state(self, name: str) -> str:
        """What the row's State column says now."""
        m = self._models.get(name, {})
        if name in self.pulling:
            return "downloading"
        if name in self.failed:
            return "failed"
        state = m.get("state", "")
        if state == "partial" and name in self.paused:
            return "paused"
        return state

    def _refresh_actions(self, name: str) -> None:
        row = self.rows.get(name)
        if row is None:
            return
        m = self._models.get(name, {})
        state = self._state(name)
        cell = self.table.item(row, 2)
        cell.setText("" if m.get("builtin") else state)
        cell.setToolTip(self.failed.get(name, ""))
        theme.item_tone(cell, "danger" if state == "failed" else None)
        buttons = row_actions(
            state,
            builtin=bool(m.get("builtin")),
            pulling=state == "downloading",
            failed=state == "failed",
            partial=int(m.get("size_bytes") or 0) > 0,
        )
        w = QWidget()
        box = QHBoxLayout(w)
        box.setContentsMargins(2, 2, 2, 2)
        if m.get("builtin"):
            box.addWidget(QLabel("always ready"))
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
        tips = {
            "Discard": "delete the partly downloaded files on the node",
            "Cancel": "stop and delete the partly downloaded files on the node",
            "Pause": "stop; Resume carries on where it stopped",
            "Retry": "try the download again (what arrived is kept)",
        }
        for label in buttons:
            b = QPushButton(label)
            b.setToolTip(tips.get(label, ""))
            b.clicked.connect(lambda _c=False, f=handlers[label]: f(name))
            box.addWidget(b)
        self.table.setCellWidget(row, 6, w)

    def _filter_rows(self) -> None:
        every = self.every_quant.isChecked()
        rec = self.recommended.name if self.recommended else None
        for name, row in self.rows.items():
            m = self._models.get(name, {})
            keep = (
                every
                or m.get("builtin")
                or name == rec
                or name in self.failed
                or m.get("quant") in (None, DEFAULT_QUANT)
                or m.get("state") not in ("not downloaded", None)
                or name in self.pulling
            )
            self.table.setRowHidden(row, not keep)

    def _show_details(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        name = next((n for n, r in self.rows.items() if r in rows), None)
        m = self._models.get(name or "", {})
        if not m:
            self.details.clear()
            return
        text = describe(m.get("variant"), m.get("quant"))
        self.details.setText(
            f"<b>{escape(m.get('display_name') or name)}</b> "
            f"({escape(name)}) — {text or 'a model file you brought'}"
        )

    # -- the recommendation ---------------------------------------------------------------
    def _update_advice(self, refill: bool = True) -> bool:
        """Recompute the model suggested for the node's machine; True when it changed."""
        names = [n for n, m in self._models.items() if not m.get("builtin")]
        rec = recommend(Machine.from_system(self.link.backends.system), names) if names else None
        changed = rec != self.recommended
        self.recommended = rec
        if rec is None or rec.name not in self._models:
            self.advice.hide()
            return changed
        m = self._models[rec.name]
        ready = m.get("state") == READY
        self.advice_text.setText(
            f"{STAR} <b>Recommended for this machine: "
            f"{escape(m.get('display_name') or rec.name)}</b>"
            f"{' (downloaded)' if ready else ''} — {rec.reason}"
        )
        self.advice_button.setVisible(not ready and rec.name not in self.pulling)
        to_get = int(m.get("download_bytes") or 0)
        self.advice_button.setText(f"Download ({human_bytes(to_get)})" if to_get else "Download")
        self.advice.show()
        if changed and refill:
            self._shown = {}
            self.set_models(list(self._models.values()))
        return changed

    # -- actions --------------------------------------------------------------------------
    def pull(self, name: str) -> None:
        self.meters[name] = TransferMeter()
        self.failed.pop(name, None)
        self.paused.discard(name)
        self.pulling.add(name)
        self._received[name] = 0
        self.link.pulls.pull(name)
        self._refresh_actions(name)
        self._update_advice()

    def pause(self, name: str) -> None:
        self.paused.add(name)
        self.link.pulls.pause(name)
        self._refresh_actions(name)

    def cancel(self, name: str) -> None:
        """Stop (if running) and delete the partly downloaded files on the node."""

        def done(answer: dict) -> None:
            self.failed.pop(name, None)
            self.paused.discard(name)
            gone = answer.get("deleted") or []
            self._say(
                f"{name}: deleted {len(gone)} partly downloaded file(s), "
                f"{human_bytes(answer.get('freed_bytes') or 0)}."
                if gone
                else f"{name}: nothing partly downloaded was left to delete."
            )
            self._refresh_actions(name)

        self.link.pulls.discard(
            name,
            on_done=done,
            on_error=lambda text: self._say(
                f"Could not delete the partial files of {name}: {text}", RED
            ),
        )
        self._refresh_actions(name)

    def remove(self, name: str, confirm: bool = True) -> None:
        if confirm:
            answer = QMessageBox.question(
                self, "Remove model", f"Remove {name} and delete its files?"
            )
            if answer != QMessageBox.Yes:
                return
        self.link.models.remove(
            name,
            on_done=lambda _a: self._say(f"{name} removed."),
            on_error=lambda text: self._say(f"Could not remove {name}: {text}", RED),
        )

    def on_pull_event(self, name: str, event: PullEvent) -> None:
        row = self.rows.get(name)
        step = event.type
        if event.is_terminal:
            self.pulling.discard(name)
            if step is PullStep.DONE:
                self.failed.pop(name, None)
                self._say(done_message(name, event), AMBER if event.engine_ready is False else "")
            elif step is PullStep.FAILED:
                self.failed[name] = event.message
                self._say(failed_message(name, event), RED)
            else:
                self.paused.add(name)
                self._say(f"{name}: paused. Resume carries on where it stopped.")
            if row is not None:
                self.table.item(row, 4).setText("")
                self.table.item(row, 5).setText("")
                if (
                    step is PullStep.FAILED
                    and not self._received.get(name)
                    and not self._models.get(name, {}).get("size_bytes")
                ):
                    self.table.removeCellWidget(row, 3)  # nothing arrived: no bar
                if step is PullStep.DONE and name in self._models:
                    self._models[name] = {**self._models[name], "state": READY}
            self._refresh_actions(name)
            self._filter_rows()
            self._update_advice()
            return
        if name not in self.pulling:  # a pull started elsewhere (the first-run banner)
            self.pulling.add(name)
            self._refresh_actions(name)
        if row is None:
            return
        state = self.table.item(row, 2)
        if step is PullStep.CATALOGUE:
            state.setText("asking the hub…")
        elif step is PullStep.ENGINE:
            state.setText("engine…")
            state.setToolTip(event.message)
        elif step is PullStep.PLAN:
            self._kinds.update({f.get("name"): f.get("kind") for f in event.files})
            self._bar(row).setFormat(f"0 / {human_bytes(event.total)}")
        elif step in (PullStep.FILE_START, PullStep.PROGRESS, PullStep.FILE_DONE):
            self._progress(name, row, event)

    def _progress(self, name: str, row: int, event: PullEvent) -> None:
        meter = self.meters.setdefault(name, TransferMeter())
        bar = self._bar(row)
        meter.add(event.received)
        self._received[name] = event.received
        if event.total:
            bar.setValue(int(1000 * (event.fraction or 0)))
            bar.setFormat(f"{human_bytes(event.received)} / {human_bytes(event.total)}")
        speed = event.speed or meter.speed()
        eta = event.eta if event.eta is not None else meter.eta(event.total)
        self.table.item(row, 4).setText(f"{human_bytes(speed)}/s")
        self.table.item(row, 5).setText(human_duration(eta))
        tip = f"{human_bytes(speed)}/s, {human_duration(eta)} left"
        if event.file:
            tip = (
                f"{event.file}: {human_bytes(event.file_received)} / "
                f"{human_bytes(event.file_total)} — {tip}"
            )
            pct = (
                f" {int(100 * event.file_received / event.file_total)}%" if event.file_total else ""
            )
            what = KINDS.get(self._kinds.get(event.file, ""), event.file)
            self.table.item(row, 2).setText(f"{what}{pct}")  # this file; the bar: all of them
            self.table.item(row, 2).setToolTip(tip)
        bar.setToolTip(tip)

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
        self._say(
            f"Sending {len(files)} file(s) to the node…"
            if self.link.connection.remote
            else f"Importing {len(files)} file(s)…"
        )
        self.link.models.import_files(
            files,
            on_done=self._imported,
            on_error=lambda text: self._say(f"Import failed: {text}", RED),
            on_progress=self._upload_progress,
        )

    def _upload_progress(self, path: str, sent: int, total: int) -> None:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        self._say(f"Sending {name} to the node: {human_bytes(sent)} of {human_bytes(total)}")

    def _imported(self, outcomes: list) -> None:
        good = [p for p, answer, _e in outcomes if answer is not None]
        bad = [(p, e) for p, answer, e in outcomes if answer is None]
        text = f"Imported {len(good)} of {len(outcomes)} file(s)"
        if self.link.connection.remote and good:
            text += " into the node's models folder"
        if bad:
            text += ". Not imported: " + "; ".join(
                f"{p.replace(chr(92), '/').rsplit('/', 1)[-1]}: {e}" for p, e in bad
            )
        self._say(text + ".", RED if bad else "")

    # -- the Hugging Face token (on the node's machine) -----------------------------------
    def _node_state(self, state: str) -> None:
        """Connected: whether the node (perhaps another one now) keeps a token."""
        connected = state in ("idle", "generating")
        if connected and not self._token_read:
            self._read_hf_token()
        self._token_read = connected

    def _read_hf_token(self) -> None:
        self.link.models.hf_token(
            on_done=self._show_hf_token,
            on_error=lambda text: self.hf_state.setText("unknown"),
        )

    def _show_hf_token(self, status: dict) -> None:
        on = bool(status.get("set"))
        source = status.get("source")
        self.hf_state.setText(
            "✓ set" + (" (HF_TOKEN)" if source == "environment" else "") if on else "not set"
        )
        self.hf_state.setToolTip(status.get("note") or "")
        self.hf_remove.setEnabled(on and source == "keyring")
        self.hf_token.setPlaceholderText(
            "type a new one to replace it" if on else "for gated models only"
        )

    def _save_hf_token(self) -> None:
        token = self.hf_token.text().strip()
        if not token:
            self._say("Type the token first (huggingface.co → Settings → Access Tokens).")
            return

        def saved(status: dict) -> None:
            self.hf_token.clear()
            self._show_hf_token(status)
            self._say("Hugging Face token saved on the node's machine (its keyring).")

        self.link.models.set_hf_token(
            token,
            on_done=saved,
            on_error=lambda text: self._say(f"Token not saved: {text}", RED),
        )

    def _remove_hf_token(self) -> None:
        def removed(status: dict) -> None:
            self._show_hf_token(status)
            self._say(
                "Hugging Face token removed from the node's machine."
                if status.get("removed")
                else "No token was stored on the node."
            )

        self.link.models.remove_hf_token(
            on_done=removed,
            on_error=lambda text: self._say(f"Token not removed: {text}", RED),
        )

    # -- adapters (LoRA) ------------------------------------------------------------------
    def _adapter_section(self, layout: QVBoxLayout) -> None:
        head = QHBoxLayout()
        head.addWidget(QLabel("<b>Adapters (LoRA)</b>"))
        self.adapters_note = QLabel()
        self.adapters_note.setTextFormat(Qt.PlainText)
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
        t = self.adapter_table = QTableWidget(0, len(ADAPTER_COLUMNS))
        t.setHorizontalHeaderLabels(ADAPTER_COLUMNS)
        t.verticalHeader().hide()
        t.setEditTriggers(QTableWidget.NoEditTriggers)
        t.setSelectionMode(QTableWidget.NoSelection)
        t.setWordWrap(False)
        t.setTextElideMode(Qt.ElideRight)
        t.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        h = t.horizontalHeader()
        h.setSectionResizeMode(0, QHeaderView.Stretch)
        h.setSectionResizeMode(2, QHeaderView.Stretch)
        for col, width in ((1, 90), (3, 96)):
            h.setSectionResizeMode(col, QHeaderView.Fixed)
            h.resizeSection(col, width)
        t.verticalHeader().setDefaultSectionSize(34)
        t.setFixedHeight(h.height() + 34 * ADAPTER_ROWS_SHOWN + 4)
        layout.addWidget(t)

    def set_adapters(self, adapters: list) -> None:
        """One row per adapter on the node: name, size, what it was made for, Remove."""
        self.adapter_rows = {}
        t = self.adapter_table
        t.setRowCount(len(adapters))
        for row, a in enumerate(adapters):
            name = a["name"]
            self.adapter_rows[name] = row
            item = QTableWidgetItem(name)
            facts = [
                f"{a.get('engine_name') or name} ({(a.get('format') or '?').upper()})",
                a.get("path") or "",
            ]
            if a.get("base_model"):
                facts.append(f"base model: {a['base_model']}")
            if a.get("rank"):
                facts.append(
                    f"rank {a['rank']}" + (f", alpha {a['alpha']:g}" if a.get("alpha") else "")
                )
            if a.get("targets"):
                facts.append("changes " + ", ".join(a["targets"]))
            item.setToolTip("\n".join(f for f in facts if f))
            t.setItem(row, 0, item)
            t.setItem(row, 1, QTableWidgetItem(human_bytes(int(a.get("size") or 0))))
            made_for = QTableWidgetItem(a.get("made_for") or f"cannot be used: {a.get('problem')}")
            made_for.setToolTip(made_for.text())
            if a.get("problem"):
                theme.item_tone(made_for, "danger")
            t.setItem(row, 2, made_for)
            cell = QWidget()
            box = QHBoxLayout(cell)
            box.setContentsMargins(2, 2, 2, 2)
            remove = QPushButton("Remove")
            remove.setToolTip("delete the adapter on the node")
            remove.clicked.connect(lambda _c=False, n=name: self.remove_adapter(n))
            box.addWidget(remove)
            t.setCellWidget(row, 3, cell)
        where = " on the node's machine" if self.link.connection.remote else ""
        if adapters:
            used = sum(int(a.get("size") or 0) for a in adapters)
            self.adapters_note.setText(
                f"{len(adapters)} adapter(s), {human_bytes(used)}{where}"
                f" · Compose → Advanced → Adapter uses one"
            )
        elif self.link.adapters.loaded:
            self.adapters_note.setText(
                f"none yet{where}: add a .safetensors LoRA or a PEFT folder made for ACE-Step 1.5"
            )
        else:
            self.adapters_note.setText("")

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
        self._say(
            f"Sending {len(paths)} adapter(s) to the node…"
            if self.link.connection.remote
            else f"Adding {len(paths)} adapter(s)…"
        )
        self.link.adapters.add(
            paths,
            on_done=self._adapters_added,
            on_error=lambda text: self._say(f"Adding failed: {text}", RED),
            on_progress=self._upload_progress,
        )

    def _adapters_added(self, outcomes: list) -> None:
        good = [answer for _p, answer, _e in outcomes if answer is not None]
        bad = [(p, e) for p, answer, e in outcomes if answer is None]
        text = "; ".join(f"Added {a['name']} (made for {a.get('made_for')})" for a in good)
        if bad:
            text += (
                ("; " if text else "")
                + "Not added: "
                + "; ".join(
                    _named(p.replace(chr(92), "/").rstrip("/").rsplit("/", 1)[-1], e)
                    for p, e in bad
                )
            )
        self._say(text.rstrip(".") + ".", RED if bad else "")

    def remove_adapter(self, name: str, confirm: bool = True) -> None:
        if confirm:
            answer = QMessageBox.question(
                self, "Remove adapter", f"Remove the adapter {name} and delete its files?"
            )
            if answer != QMessageBox.Yes:
                return
        self.link.adapters.remove(
            name,
            on_done=lambda a: self._say(
                f"{name} removed, {human_bytes(int(a.get('freed_bytes') or 0))} freed."
            ),
            on_error=lambda text: self._say(f"Could not remove {name}: {text}", RED),
        )
