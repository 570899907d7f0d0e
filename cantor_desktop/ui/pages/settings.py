"""Settings: every node.toml key from the registry, the node address + token, the folders.

Fields are generated from :data:`cantor_desktop.config.OPTIONS` and checked with each
option's own validator as you type. Save goes through the link's settings service:
for this home's node, :func:`config.update` on our node.toml (locked, atomic, comments kept);
for a node that is not this home's, the node's own settings are shown and saved over its API,
and the keys that may be set only on its machine (what runs, where files go, who may talk
to it) are shown read-only with the command to use there. The app's own keys (``app.*``) are
always ours. The file is polled every 500 ms, so an edit made by the CLI or an editor shows
within a second; a malformed file is shown with its line and column and Save is off, so it is
never overwritten.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ... import config
from ...system.paths import paths
from .. import theme
from ..tasks import Tasks
from ..widgets import ComboBox, SpinBox

POLL_MS = 500
LABELS = {
    "node.host": "Listen address",
    "node.port": "Port",
    "node.keep_loaded": "Keep model loaded",
    "backends.acestep": "ACE-Step backend",
    "engines.manifest": "Engine manifest URL",
    "engines.acestep.path": "Own ace-server executable",
    "models.default": "Default model",
    "models.lm": "Language model size",
    "songs.dir": "Songs folder",
    "songs.format": "Song format",
    "app.node_url": "Node address (remote)",
    "node.allowed_hosts": "Allowed host names",
    "node.max_queue": "Most songs waiting",
    "export.format": "Format",
    "export.rate": "Sample rate",
    "export.loudness": "Loudness (LUFS or off)",
    "export.peak": "True-peak ceiling (dBTP)",
    "export.pattern": "File names",
    "export.drag": "Drag out exported files",
}


def _stamp(path) -> tuple | None:
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return None


class SettingsPage(QWidget):
    saved = Signal()
    saved_keys = Signal(list)  # the keys the last save changed
    file_changed = Signal()

    def __init__(self, link=None, parent=None):
        super().__init__(parent)
        self.link = link
        self.tasks = Tasks()
        self.path = paths().config_file
        self.fields: dict[str, QWidget] = {}
        self.errors: dict[str, QLabel] = {}
        self.notes: dict[str, QLabel] = {}
        self._loaded: dict[str, object] = {}
        self._stamp = None

        outer = QVBoxLayout(self)
        outer.addWidget(QLabel("<h2>Settings</h2>"))
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setMargin(8)
        theme.paint_panel(self.banner, "alarm")
        self.banner.hide()
        outer.addWidget(self.banner)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        inner = QWidget()
        col = QVBoxLayout(inner)
        scroll.setWidget(inner)
        outer.addWidget(scroll, 1)

        groups = {}
        for opt in config.OPTIONS.values():
            table = opt.key.split(".")[0]
            if table not in groups:
                box = QGroupBox(
                    {
                        "node": "Node",
                        "backends": "Backends",
                        "engines": "Engines",
                        "models": "Models",
                        "songs": "Songs",
                        "export": "Export (this app)",
                        "app": "This app",
                    }.get(table, table)
                )
                form = QFormLayout(box)
                col.addWidget(box)
                groups[table] = form
            widget = self._editor(opt)
            self.fields[opt.key] = widget
            err = QLabel()
            theme.tone(err, "danger")
            err.setWordWrap(True)
            err.hide()
            self.errors[opt.key] = err
            note = QLabel()
            theme.tone(note, "muted")
            note.setWordWrap(True)
            note.setTextInteractionFlags(Qt.TextSelectableByMouse)
            note.hide()
            self.notes[opt.key] = note
            cell = QWidget()
            v = QVBoxLayout(cell)
            v.setContentsMargins(0, 0, 0, 0)
            row = QHBoxLayout()
            row.addWidget(widget, 1)
            if opt.key == "songs.dir":
                browse = QPushButton("Choose…")
                browse.clicked.connect(self._choose_songs_dir)
                row.addWidget(browse)
            v.addLayout(row)
            v.addWidget(note)
            v.addWidget(err)
            label = QLabel(LABELS.get(opt.key, opt.key))
            label.setToolTip(f"{opt.key}: {opt.help}")
            widget.setToolTip(f"{opt.help}\nnode.toml key: {opt.key}")
            groups[table].addRow(label, cell)
            if table == "app":
                token_row = QHBoxLayout()
                self.token = QLineEdit()
                self.token.setEchoMode(QLineEdit.Password)
                self.token.setPlaceholderText("token for a remote node (kept in the OS keyring)")
                self.token_save = QPushButton("Save token")
                self.token_save.clicked.connect(self._save_token)
                token_row.addWidget(self.token, 1)
                token_row.addWidget(self.token_save)
                groups[table].addRow("Node token", token_row)

        folders = QGroupBox("Folders")
        fl = QFormLayout(folders)
        p = paths()
        for name, where in (
            ("Settings file", p.config_file),
            ("Models", p.models_dir),
            ("Engines", p.engines_dir),
            ("Logs", p.logs_dir),
        ):
            b = QPushButton(str(where))
            b.setFlat(True)
            b.setStyleSheet("text-align:left;")
            target = where.parent if where.suffix else where
            b.clicked.connect(
                lambda _=False, t=target: QDesktopServices.openUrl(QUrl.fromLocalFile(str(t)))
            )
            fl.addRow(name, b)
        col.addWidget(folders)
        col.addStretch(1)

        buttons = QHBoxLayout()
        self.status = QLabel()
        self.save_button = QPushButton("Save")
        self.revert_button = QPushButton("Revert")
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.save_button)
        outer.addLayout(buttons)
        self.save_button.clicked.connect(self.save)
        self.revert_button.clicked.connect(lambda: self.reload(force=True))

        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self._poll)
        self.timer.start()
        self._remote_shown = False
        if link is not None:
            link.settings.loaded.connect(lambda _values: self.reload())
            link.connection.state_changed.connect(self._node_changed)
            link.models.loaded.connect(lambda _models: self._model_choices())
        self.reload(force=True)
        self._node_changed()

    # -- whose settings -----------------------------------------------------------------------
    @property
    def remote(self) -> bool:
        """The node we drive is not this home's: its settings are its own."""
        if self.link is None:
            return False
        connection = self.link.connection
        return connection.state in ("idle", "generating") and connection.remote

    def _node_changed(self, *_) -> None:
        if self.remote != self._remote_shown:
            self._remote_shown = self.remote
            self._lock_local_only()
            if self.remote:
                self.link.settings.refresh()
            self.reload(force=True)

    def _lock_local_only(self) -> None:
        """Keys that only the node's machine may set are read-only for a remote node."""
        for key, widget in self.fields.items():
            opt = config.OPTIONS[key]
            locked = self.remote and opt.local_only and not config.is_app_key(key)
            widget.setEnabled(not locked)
            hint = f"Set on the node's machine: cantor config set {key} VALUE" if locked else ""
            widget.setToolTip((hint + "\n" if hint else "") + f"{opt.help}\nnode.toml key: {key}")
            note = self.notes[key]
            note.setText(hint)
            note.setVisible(bool(hint))

    # -- editors ------------------------------------------------------------------------------
    def _editor(self, opt: config.Option) -> QWidget:
        if opt.kind is bool:
            w = QCheckBox()
            w.toggled.connect(self._check)
        elif choices := opt.choice_list():
            w = ComboBox()
            w.addItems(list(choices))
            w.currentIndexChanged.connect(self._check)
        elif opt.key == "models.default":  # a choice of what is installed
            w = ComboBox()
            w.currentIndexChanged.connect(self._check)
        elif opt.kind is int:
            w = SpinBox()
            w.setRange(opt.minimum, opt.maximum)
            w.valueChanged.connect(self._check)
        else:
            w = QLineEdit()
            w.textChanged.connect(self._check)
        return w

    def value(self, key: str):
        w = self.fields[key]
        if config.OPTIONS[key].kind is list:
            return config.split_list(w.text())
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QComboBox):
            return w.currentData() if w.currentData() is not None else w.currentText()
        if isinstance(w, QSpinBox):
            return w.value()
        return w.text()

    def set_value(self, key: str, value) -> None:
        w = self.fields[key]
        w.blockSignals(True)
        if isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QComboBox) and key == "models.default":
            self._model_choices(str(value))
        elif isinstance(w, QComboBox):
            w.setCurrentText(str(value))
        elif isinstance(w, QSpinBox):
            w.setValue(int(value))
        elif isinstance(value, list):
            w.setText(", ".join(value))
        else:
            w.setText("" if value is None else str(value))
        w.blockSignals(False)

    def changes(self) -> dict:
        out = {}
        for key in self.fields:
            value = self.value(key)
            if value != self._loaded.get(key):
                opt = config.OPTIONS[key]
                out[key] = None if (opt.optional and value == "") else value
        return out

    def _check(self, *_) -> bool:
        ok = True
        for key, value in self.changes().items():
            err = self.errors[key]
            try:
                if value is not None:
                    config.option(key).validate(value)
                err.hide()
            except config.ConfigError as exc:
                err.setText(str(exc))
                err.show()
                ok = False
        for key in self.fields:
            if key not in self.changes():
                self.errors[key].hide()
        self.save_button.setEnabled(ok and bool(self.changes()) and self.banner.isHidden())
        self.revert_button.setEnabled(bool(self.changes()))
        return ok

    def _model_choices(self, current: str | None = None) -> None:
        """The default model is chosen among the installed ones (and the Sketch); one set in
        node.toml that is not installed is shown as such, never silently replaced."""
        combo = self.fields["models.default"]
        current = current if current is not None else self.value("models.default")
        models = self.link.models.listed if self.link is not None else []
        names = ["sketch"] + [
            m["name"]
            for m in models
            if isinstance(m, dict) and m.get("state") == "ready" and m.get("name") != "sketch"
        ]
        combo.blockSignals(True)
        combo.clear()
        for name in names:
            combo.addItem("Sketch — built-in, no AI model" if name == "sketch" else name, name)
        if current and current not in names:
            combo.addItem(f"{current} (not installed)", current)
        combo.setCurrentIndex(max(0, combo.findData(current)))
        combo.blockSignals(False)

    # -- file ---------------------------------------------------------------------------------
    def _poll(self) -> None:
        if _stamp(self.path) != self._stamp:
            self.reload()
            self.file_changed.emit()

    def reload(self, force: bool = False) -> None:
        """Read node.toml; keep what the user is editing unless ``force``."""
        self._stamp = _stamp(self.path)
        cfg, error = config.load_or_defaults(self.path)
        if error is not None:
            self.banner.setText(
                f"node.toml is not valid and was left as it is — fix it in an "
                f"editor or with `cantor config`:\n{error}"
            )
            self.banner.show()
            self.save_button.setEnabled(False)
            return
        self.banner.hide()
        pending = {} if force else self.changes()
        values = cfg.as_dict()
        if self.remote:  # the node's own settings; only app.* are ours
            values.update(
                {
                    k: v
                    for k, v in self.link.settings.node_config.items()
                    if k in values and not config.is_app_key(k)
                }
            )
        for key, value in values.items():
            if key not in pending:
                self.set_value(key, value)
        self._loaded = {k: (v if v is not None else "") for k, v in values.items()}
        self._check()
        if force:
            self._read_token()

    def _read_token(self) -> None:
        """The remote node token, read from the keyring off the GUI thread (it can be slow)."""
        import asyncio

        from ..node_link import REMOTE_TOKEN
        from ..secret_store import read_secret

        try:
            asyncio.get_running_loop()  # qasync's loop counts as running all along
        except RuntimeError:  # no event loop (a bare widget in a test): leave the field
            return
        self.tasks.start(
            "read:remote-token",
            read_secret(REMOTE_TOKEN),
            on_done=lambda value: self.token.setText(value or ""),
            on_error=lambda _text: None,
        )

    def save(self) -> bool:
        if not self._check():
            return False
        changes = self.changes()
        if self.link is None:
            try:
                config.update(changes, self.path)
            except config.ConfigError as exc:
                self.status.setText(f"Not saved: {exc}")
                return False
            self._saved(changes)
            return True
        failed: list[str] = []

        def refused(text: str) -> None:
            failed.append(text)
            self.status.setText(f"Not saved: {text}")

        self.link.settings.change(changes, on_error=refused, on_done=lambda: self._saved(changes))
        return not failed

    def _saved(self, changes: dict) -> None:
        self.status.setText("Saved" + (" on the node" if self.remote else ""))
        self.reload(force=True)
        self.saved.emit()
        self.saved_keys.emit(sorted(changes))

    def _choose_songs_dir(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Songs folder", self.value("songs.dir"))
        if folder:
            self.set_value("songs.dir", folder)
            self._check()

    def _save_token(self) -> None:
        from ..node_link import REMOTE_TOKEN
        from ..secret_store import save_secret_later

        save_secret_later(REMOTE_TOKEN, self.token.text().strip(), self.status.setText, "Token")
