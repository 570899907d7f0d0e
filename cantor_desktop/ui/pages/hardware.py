"""Hardware & Backends: the machine, a row per backend with its evidence and actions, and
the node's pool (its members) when it is in one."""

from __future__ import annotations

from PySide6.QtCore import Qt
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
from ..pool_panel import PoolPanel
from ...views.transfer import human_bytes

FAMILY = "acestep"
POOL_EVERY_S = 2.0  # the pool's members, live while the page is open


def family_status(system: dict) -> dict:
    """The family's backend status from /v1/system (``families`` or the older ``backends``)."""
    fam = (system.get("families") or {}).get(FAMILY)
    if fam is None:
        fam = (system.get("backends") or {}).get(FAMILY) or {}
        if isinstance(fam.get("status"), dict):
            fam = {**fam.get("status"), **{k: v for k, v in fam.items() if k != "status"}}
    return fam


def backend_rows(system: dict) -> list[dict]:
    """One dict per backend: name, state, evidence, reason, pinned, default (Qt-free)."""
    hw = system.get("hardware") or {}
    evidence = hw.get("backends") or {}
    fam = family_status(system)
    listed = fam.get("backends") or []
    status = (
        {b.get("name"): b for b in listed if isinstance(b, dict)}
        if isinstance(listed, list)
        else dict(listed)
    )
    known = bool(evidence or status)  # nothing yet: the node has not described the machine
    rows = []
    for name in config.BACKENDS:
        ev = evidence.get(name) or {}
        st = status.get(name) or {}
        if not known:
            state = "unknown"
        else:  # not installed but this machine can run it: it can be installed
            state = st.get("state") or (
                "installable" if ev.get("supported", name == "cpu") else "unsupported"
            )
            if state == "available":
                state = "installable"
        supported = known and state != "unsupported" and bool(ev.get("supported", True))
        rows.append(
            {
                "name": name,
                "state": str(state).replace("_", " "),
                "evidence": "; ".join(st.get("evidence") or ev.get("evidence") or []),
                "reason": st.get("message") or ev.get("reason") or "",
                "version": st.get("version") or "",
                "pinned": fam.get("pinned") == name or bool(st.get("pinned")),
                "default": fam.get("default") == name,
                "installed": bool(st.get("installed")),
                "supported": supported,
            }
        )
    return rows


def machine_text(system: dict) -> str:
    hw = system.get("hardware") or {}
    if not hw:
        return "Waiting for the node to describe this machine…"
    if "error" in hw:
        return f"Could not read the hardware: {hw['error']}"
    lines = [
        f"<b>{hw.get('os', '?')} · {hw.get('arch', '?')}</b>",
        f"CPU: {hw.get('cpu_name') or 'unknown'}"
        + (f" ({', '.join(hw.get('cpu_features') or [])})" if hw.get("cpu_features") else ""),
        f"Memory: {human_bytes(hw.get('ram_bytes'))}",
    ]
    gpus = hw.get("gpus") or []
    if not gpus:
        lines.append("GPUs: none found")
    for g in gpus:
        vram = f", {g['vram_mib'] / 1024:.1f} GiB VRAM" if g.get("vram_mib") else ""
        drv = f", driver {g['driver']}" if g.get("driver") else ""
        lines.append(f"GPU: {g.get('name', '?')} ({g.get('vendor', '')}{drv}{vram})")
    return "<br>".join(lines)


class HardwarePage(QWidget):
    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.running_key: str | None = None
        self.running_action: str | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("<h2>Hardware &amp; Backends</h2>"))
        box = QGroupBox("This machine")
        bl = QVBoxLayout(box)
        self.machine = QLabel(machine_text({}))
        self.machine.setWordWrap(True)
        self.machine.setTextInteractionFlags(Qt.TextSelectableByMouse)
        bl.addWidget(self.machine)
        layout.addWidget(box)
        self.pool = PoolPanel()
        layout.addWidget(self.pool)

        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Backend", "State", "Evidence", ""])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        h = self.table.horizontalHeader()
        h.setSectionResizeMode(2, QHeaderView.Stretch)
        for col, w in ((0, 150), (1, 120), (3, 230)):
            h.setSectionResizeMode(col, QHeaderView.Fixed)
            h.resizeSection(col, w)
        # every backend in sight, whatever else the page shows (the pool's members)
        self.table.setMinimumHeight(
            self.table.horizontalHeader().sizeHint().height() + len(config.BACKENDS) * 40 + 4
        )
        layout.addWidget(self.table, 1)

        row = QHBoxLayout()
        self.find = QPushButton("Find the best backend")
        self.find.setToolTip(
            "Install each candidate in turn, best first, and keep the first that works"
        )
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
        self.log.setMinimumHeight(48)
        self.log.setWordWrap(True)  # long reasons (a manifest URL and its error) wrap
        self.log.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        layout.addWidget(self.log)

        self.find.clicked.connect(self.find_best)
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
            name = (
                r["name"]
                + ("  📌 pinned" if r["pinned"] else "")
                + ("  (auto choice)" if r["default"] and not r["pinned"] else "")
            )
            self.table.setItem(i, 0, QTableWidgetItem(name))
            state = QTableWidgetItem(
                r["state"] + (f" {r['version']}" if r["version"] and r["installed"] else "")
            )
            self.table.setItem(i, 1, state)
            shown = (
                r["evidence"]
                if r["supported"] and r["evidence"]
                else (
                    r["reason"]
                    or r["evidence"]
                    or ("waiting for the node" if r["state"] == "unknown" else "")
                )
            )
            if r["state"] == "rejected":  # the engine's own reason, first
                shown = r["reason"]
            ev = QTableWidgetItem(shown)
            ev.setToolTip(r["evidence"] + ("\n" + r["reason"] if r["reason"] else ""))
            self.table.setItem(i, 2, ev)
            self.table.setCellWidget(i, 3, self._actions(r))
            self.table.setRowHeight(i, 40)

    def _actions(self, r: dict) -> QWidget:
        w = QWidget()
        row = QHBoxLayout(w)
        row.setContentsMargins(2, 2, 2, 2)
        installed = r["installed"] or r["state"] in ("installed", "ready", "in use")
        if r["pinned"]:
            use = QPushButton("Unpin (auto)")
            use.clicked.connect(lambda: self.run("use", None))
        elif r["state"] == "rejected":
            use = QPushButton("Try again")
            use.setToolTip("Fetch this backend again, trial-load it, and pin it if it works")
            use.clicked.connect(lambda: self.run("use", r["name"]))
            use.setEnabled(r["supported"])
        else:
            use = QPushButton("Use" if installed else "Install && use")
            use.setToolTip("Fetch this backend if needed, check that it loads, and pin it")
            use.clicked.connect(lambda: self.run("use", r["name"]))
            use.setEnabled(r["supported"])
        row.addWidget(use)
        if installed:
            u = QPushButton("Update")
            u.clicked.connect(lambda: self.run("update", r["name"]))
            row.addWidget(u)
        return w

    def run(self, action: str, backend: str | None) -> None:
        if not self.link.backends.running:
            self.log.addItem("The node is not running; start it first.")
            return
        self.running_key = self.link.backends.run_action(action, backend)
        self.running_action = action
        what = {
            "find": "Finding the best backend…",
            "update": "Updating the installed backends…",
            "use": f"Switching to {backend}…" if backend else "Unpinning: back to auto…",
        }
        self.log.addItem(what[action])
        self.progress.setValue(0)
        self.progress.show()
        self.cancel.show()
        self.find.setEnabled(False)

    def _model_ready(self) -> bool:
        return any(
            m.get("state") in ("installed", "ready")
            and m.get("name") != "sketch"
            and not m.get("builtin")
            for m in self.link.models.listed
        )

    def find_best(self) -> None:
        """The node tries the backends this machine supports, best first, and keeps the first
        that loads; each candidate's outcome shows here as it happens."""
        self.run("find", None)

    def _cancel(self) -> None:
        if self.running_key:
            self.link.backends.cancel(self.running_key)

    def on_event(self, key: str, event: dict) -> None:
        state = event.get("state")
        if state in ("done", "failed", "cancelled"):
            if state != "done":
                reason = event.get("error") or ""
                self.log.addItem(
                    f"{state.capitalize()}: {reason}" if reason else f"{state.capitalize()}."
                )
            else:
                self.log.addItem("Done.")
                if self.running_action in ("find", "use") and not self._model_ready():
                    self.log.addItem(
                        "Next: download an ACE-Step model in Library "
                        "(the built-in Sketch engine works meanwhile)."
                    )
                self.log.scrollToBottom()
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
        text = event.get("message") or event.get("reason")
        backend = event.get("backend")
        kind = event.get("kind") or event.get("event") or ""
        if (
            text
            and kind != "download"
            or (kind == "download" and event.get("progress") in (None, 0))
        ):
            label = {
                "rejected": "✗ ",
                "failed": "✗ ",
                "skipped": "– ",
                "chosen": "✓ ",
                "done": "✓ ",
            }.get(kind, "")
            prefix = f"{backend}: " if backend and not str(text).startswith(f"{backend}:") else ""
            self.log.addItem(f"{label}{prefix}{text}")
            self.log.scrollToBottom()

    def _keep_loaded(self, on: bool) -> None:
        self.link.settings.change(
            {"node.keep_loaded": on},
            on_error=lambda text: self.log.addItem(f"Could not save keep-loaded: {text}"),
        )
