"""Hardware & Backends: the machine, a row per backend with its evidence and actions."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QGroupBox, QHBoxLayout, QHeaderView, QLabel,
                               QListWidget, QProgressBar, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from ... import config
from ..transfer import human_bytes

FAMILY = "acestep"


def backend_rows(system: dict) -> list[dict]:
    """One dict per backend: name, state, evidence, reason, pinned, default (Qt-free)."""
    hw = system.get("hardware") or {}
    evidence = hw.get("backends") or {}
    fam = (system.get("backends") or {}).get(FAMILY) or {}
    status = fam.get("status") or {}
    if isinstance(status, list):
        status = {s.get("backend") or s.get("name"): s for s in status if isinstance(s, dict)}
    if isinstance(status, dict) and "backends" in status and isinstance(status["backends"], (dict, list)):
        inner = status["backends"]
        status = inner if isinstance(inner, dict) else {
            s.get("backend") or s.get("name"): s for s in inner if isinstance(s, dict)}
    rows = []
    for name in config.BACKENDS:
        ev = evidence.get(name) or {}
        st = status.get(name) if isinstance(status, dict) else None
        state = st.get("state") if isinstance(st, dict) else (st or "")
        if not state:
            state = "available" if ev.get("supported", name == "cpu") else "unsupported"
        rows.append({
            "name": name, "state": str(state).replace("_", " "),
            "evidence": "; ".join(ev.get("evidence") or []),
            "reason": ev.get("reason") or (st.get("reason", "") if isinstance(st, dict) else ""),
            "version": st.get("version", "") if isinstance(st, dict) else "",
            "pinned": fam.get("pinned") == name, "default": fam.get("default") == name,
            "supported": bool(ev.get("supported", name == "cpu")),
        })
    return rows


def machine_text(system: dict) -> str:
    hw = system.get("hardware") or {}
    if not hw:
        return "Waiting for the node to describe this machine…"
    if "error" in hw:
        return f"Could not read the hardware: {hw['error']}"
    lines = [f"<b>{hw.get('os', '?')} · {hw.get('arch', '?')}</b>",
             f"CPU: {hw.get('cpu_name') or 'unknown'}"
             + (f" ({', '.join(hw.get('cpu_features') or [])})" if hw.get("cpu_features") else ""),
             f"Memory: {human_bytes(hw.get('ram_bytes'))}"]
    gpus = hw.get("gpus") or []
    if not gpus:
        lines.append("GPUs: none found")
    for g in gpus:
        vram = f", {g['vram_mib'] / 1024:.1f} GB VRAM" if g.get("vram_mib") else ""
        drv = f", driver {g['driver']}" if g.get("driver") else ""
        lines.append(f"GPU: {g.get('name', '?')} ({g.get('vendor', '')}{drv}{vram})")
    return "<br>".join(lines)


class HardwarePage(QWidget):
    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.running_key: str | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("<h2>Hardware &amp; Backends</h2>"))
        box = QGroupBox("This machine")
        bl = QVBoxLayout(box)
        self.machine = QLabel(machine_text({}))
        self.machine.setWordWrap(True)
        self.machine.setTextInteractionFlags(Qt.TextSelectableByMouse)
        bl.addWidget(self.machine)
        layout.addWidget(box)

        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Backend", "State", "Evidence", ""])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        h = self.table.horizontalHeader()
        h.setSectionResizeMode(2, QHeaderView.Stretch)
        for col, w in ((0, 150), (1, 120), (3, 230)):
            h.setSectionResizeMode(col, QHeaderView.Fixed)
            h.resizeSection(col, w)
        layout.addWidget(self.table, 1)

        row = QHBoxLayout()
        self.find = QPushButton("Find the best backend")
        self.find.setToolTip("Install each candidate in turn, best first, and keep the first that works")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.cancel = QPushButton("Cancel")
        self.cancel.hide()
        self.keep_loaded = QCheckBox("Keep the model loaded between songs")
        row.addWidget(self.find)
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel)
        row.addStretch(1)
        row.addWidget(self.keep_loaded)
        layout.addLayout(row)
        self.log = QListWidget()
        self.log.setMaximumHeight(140)
        layout.addWidget(self.log)

        self.find.clicked.connect(self.find_best)
        self.cancel.clicked.connect(self._cancel)
        self.keep_loaded.toggled.connect(self._keep_loaded)
        link.system_loaded.connect(self.set_system)
        link.backend_event.connect(self.on_event)
        self.set_system(link.system)

    def set_system(self, system: dict) -> None:
        self.machine.setText(machine_text(system))
        self.keep_loaded.blockSignals(True)
        self.keep_loaded.setChecked(bool(system.get("keep_loaded",
                                    config.load_or_defaults()[0].get("node.keep_loaded"))))
        self.keep_loaded.blockSignals(False)
        rows = backend_rows(system)
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            name = r["name"] + ("  📌 pinned" if r["pinned"] else "") + \
                ("  (auto choice)" if r["default"] and not r["pinned"] else "")
            self.table.setItem(i, 0, QTableWidgetItem(name))
            state = QTableWidgetItem(r["state"] + (f" {r['version']}" if r["version"] else ""))
            self.table.setItem(i, 1, state)
            ev = QTableWidgetItem(r["evidence"] if r["supported"] else (r["reason"] or r["evidence"]))
            ev.setToolTip(r["evidence"] + ("\n" + r["reason"] if r["reason"] else ""))
            self.table.setItem(i, 2, ev)
            self.table.setCellWidget(i, 3, self._actions(r))
            self.table.setRowHeight(i, 40)

    def _actions(self, r: dict) -> QWidget:
        w = QWidget()
        row = QHBoxLayout(w)
        row.setContentsMargins(2, 2, 2, 2)
        installed = r["state"] in ("installed", "ready", "in use", "update available")
        if not installed:
            b = QPushButton("Install")
            b.setEnabled(r["supported"])
            b.clicked.connect(lambda: self.run("install", r["name"]))
            row.addWidget(b)
        use = QPushButton("Use" if not r["pinned"] else "Unpin")
        use.clicked.connect(lambda: self.run("use", None if r["pinned"] else r["name"]))
        use.setEnabled(installed or r["pinned"])
        row.addWidget(use)
        if installed:
            u = QPushButton("Update")
            u.clicked.connect(lambda: self.run("update", r["name"]))
            row.addWidget(u)
        return w

    def run(self, action: str, backend: str | None) -> None:
        if self.link.client is None:
            self.log.addItem("The node is not running; start it first.")
            return
        self.running_key = self.link.backend_action(action, backend)
        what = {"install": "Installing", "use": "Switching to", "update": "Updating"}[action]
        self.log.addItem(f"{what} {backend or 'the best backend'}…")
        self.progress.setValue(0)
        self.progress.show()
        self.cancel.show()
        self.find.setEnabled(False)

    def find_best(self) -> None:
        """Trial-install the supported backends, best first; each outcome shows as it comes."""
        if self.link.client is None:
            self.log.addItem("The node is not running; start it first.")
            return
        rows = backend_rows(self.link.system)
        candidates = [r["name"] for r in rows if r["supported"]] or ["cpu"]
        for r in rows:
            if not r["supported"]:
                self.log.addItem(f"{r['name']}: skipped — {r['reason'] or 'not supported here'}")
        self.running_key = self.link.backend_action("find", None, candidates)
        self.log.addItem(f"Finding the best backend among {', '.join(candidates)}…")
        self.progress.setValue(0)
        self.progress.show()
        self.cancel.show()
        self.find.setEnabled(False)

    def _cancel(self) -> None:
        if self.running_key:
            self.link.tasks.cancel(self.running_key)

    def on_event(self, key: str, event: dict) -> None:
        state = event.get("state")
        if state in ("done", "failed", "cancelled"):
            if state != "done":
                self.log.addItem(f"{state.capitalize()}: {event.get('error', '')}".rstrip(": "))
            else:
                self.log.addItem("Done.")
            self.progress.hide()
            self.cancel.hide()
            self.find.setEnabled(True)
            self.running_key = None
            return
        done, total = event.get("done") or event.get("received"), event.get("total")
        if isinstance(done, (int, float)) and total:
            self.progress.setValue(int(1000 * done / total))
        elif isinstance(event.get("progress"), (int, float)):
            self.progress.setValue(int(1000 * event["progress"]))
        text = event.get("message") or event.get("outcome") or event.get("reason")
        backend = event.get("backend")
        if text:
            self.log.addItem(f"{backend}: {text}" if backend else str(text))
            self.log.scrollToBottom()

    def _keep_loaded(self, on: bool) -> None:
        try:
            config.update({"node.keep_loaded": on})
        except config.ConfigError as exc:
            self.log.addItem(f"Could not save keep-loaded: {exc}")
