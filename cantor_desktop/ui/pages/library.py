"""Library: the model catalogue with sizes and state, pulls with live progress, removal."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QMessageBox, QProgressBar, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ...paths import paths
from . import page_header
from ..transfer import TransferMeter, human_bytes, human_duration

COLUMNS = ["Model", "Size", "State", "Progress", "Speed", "Time left", ""]
# Fixed column widths (Size … actions); the Model column takes the rest. Below WIDE_AT px of
# table the narrow set hides Speed and Time left (the progress bar's tooltip has them) so the
# action column stays in view and the model name keeps room.
WIDE = ((1, 108), (2, 150), (3, 150), (4, 75), (5, 65), (6, 165))
NARROW = ((1, 92), (2, 104), (3, 150), (4, 0), (5, 0), (6, 130))
WIDE_AT = 880


async def read_secret(name: str) -> str | None:
    import asyncio

    def read():
        from ...secrets import get_secret
        try:
            return get_secret(name)
        except Exception:
            return None
    return await asyncio.to_thread(read)


async def write_secret(name: str, value: str) -> None:
    """Store ``value`` in the OS keyring (an empty value deletes it), off the GUI thread."""
    import asyncio

    def write():
        from ...secrets import delete_secret, set_secret
        set_secret(name, value) if value else delete_secret(name)
    await asyncio.to_thread(write)


def save_secret_later(name: str, value: str, show: Callable[[str], None], what: str) -> None:
    """Save a token from a page's button; ``show`` gets the outcome in words."""
    import asyncio
    try:
        loop = asyncio.get_running_loop()  # qasync's loop counts as running all along
    except RuntimeError:
        show(f"{what} not saved: no event loop")
        return
    task = loop.create_task(write_secret(name, value))

    def done(t) -> None:
        if t.cancelled():
            return
        exc = t.exception()
        show(f"{what} not saved: {exc}" if exc is not None
             else f"{what} saved in the keyring" if value else f"{what} removed from the keyring")
    task.add_done_callback(done)


def done_message(name: str, event: dict) -> str:
    """What a finished pull says: ready, or downloaded with the engine problem and what to do."""
    if event.get("engine_ready") is False:
        reason = (event.get("engine_error") or "the engine step failed").strip().rstrip(".")
        return (f"{name}: Model ready. No engine yet: {reason} — "
                f"Hardware & Backends → Find the best backend")
    return f"{name} is downloaded and ready."


def pull_numbers(event: dict) -> tuple[int | None, int | None, str | None, int | None, int | None]:
    """(done, total, file, file_done, file_total) from a pull progress event, whatever its keys."""
    def first(*names):
        for n in names:
            v = event.get(n)
            if isinstance(v, (int, float)):
                return int(v)
        return None
    done = first("total_done", "completed", "received", "done", "bytes_done")
    total = first("total_bytes", "total", "size")
    file = event.get("file") or event.get("path") or event.get("name_file")
    fdone = first("file_done", "file_received", "file_completed")
    ftotal = first("file_total", "file_size")
    return done, total, file, fdone, ftotal


class LibraryPage(QWidget):
    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.meters: dict[str, TransferMeter] = {}
        self.rows: dict[str, int] = {}
        self._shown: dict[str, dict] = {}
        layout = QVBoxLayout(self)
        self.disk = QLabel()
        layout.addLayout(page_header("Library", self.disk))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
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
        layout.addWidget(self.table, 1)
        self.message = QLabel()
        self.message.setWordWrap(True)
        layout.addWidget(self.message)

        tools = QHBoxLayout()
        self.import_button = QPushButton("Import GGUF files…")
        self.import_button.clicked.connect(self.import_gguf)
        tools.addWidget(self.import_button)
        tools.addStretch(1)
        tools.addWidget(QLabel("Hugging Face token"))
        self.hf_token = QLineEdit()
        self.hf_token.setEchoMode(QLineEdit.Password)
        self.hf_token.setPlaceholderText("only for gated models (kept in the OS keyring)")
        self.hf_token.setMinimumWidth(260)
        self.hf_save = QPushButton("Save token")
        self.hf_save.clicked.connect(self._save_hf_token)
        tools.addWidget(self.hf_token)
        tools.addWidget(self.hf_save)
        layout.addLayout(tools)
        # the OS keyring can be slow (D-Bus): read it off the GUI thread
        self.link.tasks.start("read:hf_token", read_secret("hf_token"),
                              on_done=lambda v: self.hf_token.setText(v or ""),
                              on_error=lambda _t: None)

        link.models_loaded.connect(self.set_models)
        link.pull_event.connect(self.on_pull_event)
        self.set_models(link.models)

    def eventFilter(self, obj, event):  # noqa: N802 — fit the columns to the table's width
        if obj is self.table and event.type() == QEvent.Resize:
            self._fit_columns(event.size().width())
        return super().eventFilter(obj, event)

    def _fit_columns(self, width: int) -> None:
        narrow = width < WIDE_AT
        if narrow == self.narrow:
            return
        self.narrow = narrow
        h = self.table.horizontalHeader()
        for col, w in (NARROW if narrow else WIDE):
            h.setSectionHidden(col, w == 0)
            if w:
                h.resizeSection(col, w)

    def set_models(self, models: list) -> None:
        """Show the library; rows whose model did not change are left alone (no stall)."""
        unique: dict[str, dict] = {}
        for m in models:
            unique.setdefault(m.get("name", "?"), m)
        names = list(unique)
        if names != list(self.rows):
            self.table.setRowCount(0)
            self.rows.clear()
            self._shown: dict[str, dict] = {}
            self.table.setRowCount(len(names))
            for row, name in enumerate(names):
                self.rows[name] = row
                self.table.setRowHeight(row, 44)
        used = 0
        for name, m in unique.items():
            if not m.get("builtin"):
                used += int(m.get("size_bytes") or m.get("size") or 0)
            if self._shown.get(name) != m:
                self._fill_row(self.rows[name], name, m)
                self._shown[name] = m
        self.disk.setText(f"Models use {human_bytes(used)} · {paths().models_dir}")
        waiting = "The catalogue shows here once the node answers (Start node, bottom right)."
        if not unique:
            self.message.setText(waiting)
        elif self.message.text() == waiting:
            self.message.clear()

    def _fill_row(self, row: int, name: str, m: dict) -> None:
        title = m.get("display_name") or m.get("description") or m.get("title") or ""
        item = QTableWidgetItem(f"{name}\n{title}" if title and title != name else name)
        item.setToolTip(f"{name}\n{title}" if title and title != name else name)
        self.table.setItem(row, 0, item)
        size = m.get("size_bytes") or m.get("size") or 0
        to_get = m.get("download_bytes") or 0
        state = m.get("state", "available")
        if m.get("builtin"):
            size_text = "built in"
        elif state in ("installed", "ready"):
            size_text = human_bytes(size)
        else:
            size_text = f"{human_bytes(to_get)} to get" if to_get else human_bytes(size)
        self.table.setItem(row, 1, QTableWidgetItem(size_text))
        self.table.setItem(row, 2, QTableWidgetItem(state.replace("_", " ")))
        self.table.removeCellWidget(row, 3)
        if not m.get("builtin") and (size or self.link.tasks.running(f"pull:{name}")):
            ready = state in ("installed", "ready")
            bar = self._bar(row)
            bar.setValue(1000 if ready else int(1000 * (size or 0) / max(1, (size or 0) + to_get)))
            bar.setFormat("ready" if ready else f"{human_bytes(size)} of "
                          f"{human_bytes((size or 0) + to_get)}")
        self.table.setItem(row, 4, QTableWidgetItem(""))
        self.table.setItem(row, 5, QTableWidgetItem(""))
        self.table.setCellWidget(row, 6, self._actions(name, m))

    def _bar(self, row: int) -> QProgressBar:
        """The row's progress bar, made when first needed (rows without one stay light)."""
        bar = self.table.cellWidget(row, 3)
        if not isinstance(bar, QProgressBar):
            bar = QProgressBar()
            bar.setRange(0, 1000)
            self.table.setCellWidget(row, 3, bar)
        return bar

    def _actions(self, name: str, m: dict) -> QWidget:
        w = QWidget()
        row = QHBoxLayout(w)
        row.setContentsMargins(2, 2, 2, 2)
        if m.get("builtin"):
            row.addWidget(QLabel("always ready"))
            return w
        state = m.get("state", "available")
        pulling = self.link.tasks.running(f"pull:{name}")
        if state in ("installed", "ready"):
            b = QPushButton("Remove")
            b.clicked.connect(lambda: self.remove(name))
            row.addWidget(b)
        elif pulling:
            p = QPushButton("Pause")
            p.clicked.connect(lambda: self.pause(name))
            c = QPushButton("Cancel")
            c.clicked.connect(lambda: self.cancel(name))
            row.addWidget(p)
            row.addWidget(c)
        else:
            label = "Resume" if state in ("partial", "paused") else "Download"
            if state in ("corrupt", "missing companion"):
                label = "Repair"
            b = QPushButton(label)
            b.clicked.connect(lambda: self.pull(name))
            row.addWidget(b)
        return w

    # -- actions --------------------------------------------------------------------------
    def pull(self, name: str) -> None:
        self.meters[name] = TransferMeter()
        self.link.pull(name)
        self._refresh_actions(name, "downloading")

    def pause(self, name: str) -> None:
        self.link.pause_pull(name)
        self._refresh_actions(name, "paused")

    def cancel(self, name: str) -> None:
        """Stop and forget: the pull stops; the partial files are removed by the node."""
        self.link.pause_pull(name)
        self.link.tasks.start(f"remove:{name}", self._discard(name))

    async def _discard(self, name: str) -> None:
        try:
            await self.link.client.delete_model(name)
        except Exception:
            pass
        await self.link.refresh_models()

    def remove(self, name: str, confirm: bool = True) -> None:
        if confirm:
            answer = QMessageBox.question(self, "Remove model",
                                          f"Remove {name} and delete its files?")
            if answer != QMessageBox.Yes:
                return
        self.link.remove_model(name)

    def _refresh_actions(self, name: str, state: str) -> None:
        row = self.rows.get(name)
        if row is None:
            return
        self.table.item(row, 2).setText(state)
        self.table.setCellWidget(row, 6, self._actions(name, {"state": state}))

    def on_pull_event(self, name: str, event: dict) -> None:
        row = self.rows.get(name)
        if row is None:
            return
        state = event.get("state")
        if state in ("done", "paused", "failed"):
            self.table.item(row, 4).setText("")
            self.table.item(row, 5).setText("")
            if state == "failed":
                self.message.setStyleSheet("color: #c0392b;")
                self.message.setText(f"Download of {name} failed: {event.get('error')}")
            elif state == "done":
                self.message.setText(done_message(name, event))
                self.message.setStyleSheet("color: #b45309;" if event.get("engine_ready") is False
                                           else "")
            self._refresh_actions(name, {"done": "installed", "paused": "paused",
                                         "failed": "failed"}[state])
            return
        done, total, file, fdone, ftotal = pull_numbers(event)
        meter = self.meters.setdefault(name, TransferMeter())
        bar = self._bar(row)
        if event.get("type") == "plan" and total is not None:
            bar.setFormat(f"0 / {human_bytes(total)}")
        elif done is not None:
            meter.add(done)
            if total:
                bar.setValue(int(1000 * done / total))
                bar.setFormat(f"{human_bytes(done)} / {human_bytes(total)}")
            speed = event.get("speed") if isinstance(event.get("speed"), (int, float)) \
                else meter.speed()
            eta = event.get("eta") if isinstance(event.get("eta"), (int, float)) \
                else meter.eta(total)
            self.table.item(row, 4).setText(f"{human_bytes(speed)}/s")
            self.table.item(row, 5).setText(human_duration(eta))
            bar.setToolTip(f"{human_bytes(speed)}/s, {human_duration(eta)} left")
        if file:
            tip = f"{file}: {human_bytes(fdone)} / {human_bytes(ftotal)}" if fdone is not None else file
            bar.setToolTip(tip)
            pct = f" {int(100 * fdone / ftotal)}%" if fdone is not None and ftotal else ""
            self.table.item(row, 2).setText(f"{file}{pct}")  # this file; the bar is the total
            self.table.item(row, 2).setToolTip(tip)

    def import_gguf(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Import GGUF model files", "",
                                                "GGUF models (*.gguf)")
        if files:
            self.link.tasks.start("import", self._import(files),
                                  on_error=lambda t: self.message.setText(f"Import failed: {t}"))

    async def _import(self, files: list[str]) -> None:
        import asyncio
        from ...models import library
        for f in files:  # adopted in place: nothing is moved or copied
            await asyncio.to_thread(library.import_path, f)
        self.message.setText(f"Imported {len(files)} file(s)")
        await self.link.refresh_models()

    def _save_hf_token(self) -> None:
        from ...secrets import HF_TOKEN
        save_secret_later(HF_TOKEN, self.hf_token.text().strip(), self.message.setText,
                          "Hugging Face token")
