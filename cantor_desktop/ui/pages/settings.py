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

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, QTimer, QUrl, Qt, Signal
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
from ...views import settings as shown
from .. import theme
from ..message_line import MessageLine
from ..tasks import Tasks
from ..widgets import ComboBox, SpinBox

if TYPE_CHECKING:
    from ..node_link import NodeLink

POLL_MS = 500


class SettingsPage(QWidget):
    saved = Signal()
    saved_keys = Signal(list)  # the keys the last save changed
    file_changed = Signal()

    def __init__(self, link: NodeLink | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.tasks = Tasks()
        self.path = paths().config_file
        self.fields: dict[str, QWidget] = {}
        self.errors: dict[str, QLabel] = {}
        self.notes: dict[str, QLabel] = {}
        self._loaded: dict[str, object] = {}
        self._stamp: tuple[int, int, int] | None = None

        outer = QVBoxLayout(self)
        outer.addWidget(
            QLabel("<h2>%s</h2>" % QCoreApplication.translate("MainWindow", "Settings"))
        )
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
                box = QGroupBox(shown.group(opt.key))
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
            note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
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
            label = QLabel(shown.label(opt.key))
            label.setToolTip(f"{opt.key}: {opt.help}")
            widget.setToolTip(shown.tooltip(opt.key))
            groups[table].addRow(label, cell)
            label.setBuddy(widget)  # the row's field, not the cell around it
            widget.setAccessibleName(shown.label(opt.key))
            if table == "app":
                token_row = QHBoxLayout()
                self.token = QLineEdit()
                self.token.setEchoMode(QLineEdit.EchoMode.Password)
                self.token.setAccessibleName(self.tr("Node token"))
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
        self.status = MessageLine()
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
            if self.link is not None and self.remote:
                self.link.settings.refresh()
            self.reload(force=True)

    def _lock_local_only(self) -> None:
        """Keys that only the node's machine may set are read-only for a remote node."""
        for key, widget in self.fields.items():
            hint = shown.local_only_hint(key, self.remote)
            widget.setEnabled(not hint)
            widget.setToolTip(shown.tooltip(key, hint))
            note = self.notes[key]
            note.setText(hint)
            note.setVisible(bool(hint))

    # -- editors ------------------------------------------------------------------------------
    def _editor(self, opt: config.Option) -> QWidget:
        if opt.kind is bool:
            tick = QCheckBox()
            tick.toggled.connect(self._check)
            return tick
        choices = opt.choice_list()
        if choices or opt.key == "models.default":  # the default model: what is installed
            combo = ComboBox()
            combo.addItems(list(choices or ()))
            combo.currentIndexChanged.connect(self._check)
            return combo
        if opt.kind is int:
            number = SpinBox()
            low = opt.minimum if opt.minimum is not None else -(2**31)  # a Qt int's range
            high = opt.maximum if opt.maximum is not None else 2**31 - 1
            number.setRange(low, high)
            number.valueChanged.connect(self._check)
            return number
        line = QLineEdit()
        line.textChanged.connect(self._check)
        return line

    def value(self, key: str) -> Any:
        w = self.fields[key]
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QComboBox):
            return w.currentData() if w.currentData() is not None else w.currentText()
        if isinstance(w, QSpinBox):
            return w.value()
        text = w.text() if isinstance(w, QLineEdit) else ""
        return config.split_list(text) if config.OPTIONS[key].kind is list else text

    def set_value(self, key: str, value: Any) -> None:
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
        elif isinstance(w, QLineEdit) and isinstance(value, list):
            w.setText(", ".join(value))
        elif isinstance(w, QLineEdit):
            w.setText("" if value is None else str(value))
        w.blockSignals(False)

    def changes(self) -> dict:
        return shown.changes({key: self.value(key) for key in self.fields}, self._loaded)

    def _check(self, *_: object) -> bool:
        changed = self.changes()
        refused = shown.problems(changed)
        for key, err in self.errors.items():
            err.setText(refused.get(key, err.text()))
            err.setVisible(key in refused)
        ok = not refused
        self.save_button.setEnabled(ok and bool(changed) and self.banner.isHidden())
        self.revert_button.setEnabled(bool(changed))
        return ok

    def _model_choices(self, current: str | None = None) -> None:
        """The default model is chosen among the installed ones (and the Sketch); one set in
        node.toml that is not installed is shown as such, never silently replaced."""
        combo = self.fields["models.default"]
        assert isinstance(combo, QComboBox)
        current = current if current is not None else self.value("models.default")
        models = self.link.models.listed if self.link is not None else []
        combo.blockSignals(True)
        combo.clear()
        for text, name in shown.model_choices(models, current):
            combo.addItem(text, name)
        combo.setCurrentIndex(max(0, combo.findData(current)))
        combo.blockSignals(False)

    # -- file ---------------------------------------------------------------------------------
    def _poll(self) -> None:
        if shown.stamp(self.path) != self._stamp:
            self.reload()
            self.file_changed.emit()

    def reload(self, force: bool = False) -> None:
        """Read node.toml; keep what the user is editing unless ``force``."""
        self._stamp = shown.stamp(self.path)
        cfg, error = config.load_or_defaults(self.path)
        if error is not None:
            self.banner.setText(shown.malformed(error))
            self.banner.show()
            self.save_button.setEnabled(False)
            return
        self.banner.hide()
        pending = {} if force else self.changes()
        theirs = self.link.settings.node_config if self.link is not None else {}
        values = shown.shown_values(cfg.as_dict(), theirs, self.remote)
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
                self.status.fail("save the settings", str(exc))
                return False
            self._saved(changes)
            return True
        failed: list[str] = []

        def refused(text: str) -> None:
            failed.append(text)
            self.status.fail("save the settings", text)

        self.link.settings.change(changes, on_error=refused, on_done=lambda: self._saved(changes))
        return not failed

    def _saved(self, changes: dict) -> None:
        self.status.say(shown.saved(self.remote))
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

        save_secret_later(
            REMOTE_TOKEN, self.token.text().strip(), self.status.say, self.status.fail, "Token"
        )
