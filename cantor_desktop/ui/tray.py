"""The tray: node state as the icon, a status line, node controls, keep-loaded, open, quit.

The menu and its actions exist even where no system tray does (offscreen, some desktops), so
they stay testable; the QSystemTrayIcon is only shown when ``isSystemTrayAvailable``. On
macOS the icon is a template image (black, tinted by the system for the menu bar).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from .. import config
from .icons import tray_icon


class Tray(QObject):
    open_requested = Signal()
    quit_requested = Signal()
    song_clicked = Signal(str)

    def __init__(self, link, parent=None):
        super().__init__(parent)
        self.link = link
        self.menu = QMenu()
        self.status = QAction("Node stopped", self.menu)
        self.status.setEnabled(False)
        self.start = QAction("Start node", self.menu)
        self.stop = QAction("Stop node", self.menu)
        self.restart = QAction("Restart node", self.menu)
        self.keep_loaded = QAction("Keep model loaded", self.menu)
        self.keep_loaded.setCheckable(True)
        self.open = QAction("Open Cantor", self.menu)
        self.quit = QAction("Quit", self.menu)
        for a in (self.status, None, self.start, self.stop, self.restart, self.keep_loaded, None,
                  self.open, self.quit):
            self.menu.addSeparator() if a is None else self.menu.addAction(a)
        self.start.triggered.connect(link.start)
        self.stop.triggered.connect(link.stop)
        self.restart.triggered.connect(link.restart)
        self.keep_loaded.toggled.connect(self._keep_loaded)
        self.open.triggered.connect(self.open_requested)
        self.menu.aboutToShow.connect(self.sync_keep_loaded)
        self.quit.triggered.connect(self.quit_requested)
        self.icon: QSystemTrayIcon | None = None
        self._last_song: str | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.icon = QSystemTrayIcon(tray_icon("stopped"), self)
            self.icon.setContextMenu(self.menu)
            self.icon.activated.connect(self._activated)
            self.icon.messageClicked.connect(self._message_clicked)
            self.icon.show()
        link.state_changed.connect(self.on_state)
        link.status_changed.connect(self.on_status)
        link.song_finished.connect(self.notify_done)
        self.sync_keep_loaded()
        self.on_state(link.state)

    @property
    def available(self) -> bool:
        return self.icon is not None

    def on_state(self, state: str) -> None:
        running = state in ("idle", "generating", "starting")
        self.start.setEnabled(not running)
        self.stop.setEnabled(running or self.link.owns_node)
        self.restart.setEnabled(state != "starting")
        if self.icon is not None:
            self.icon.setIcon(tray_icon(state))
        self.on_status(self.link.status_line())

    def on_status(self, line: str) -> None:
        self.status.setText(line)
        if self.icon is not None:
            self.icon.setToolTip(f"Cantor — {line}")

    def sync_keep_loaded(self) -> None:
        cfg, _ = config.load_or_defaults()
        self.keep_loaded.blockSignals(True)
        self.keep_loaded.setChecked(bool(cfg.get("node.keep_loaded")))
        self.keep_loaded.blockSignals(False)

    def _keep_loaded(self, on: bool) -> None:
        def failed(text: str) -> None:
            self.keep_loaded.blockSignals(True)
            self.keep_loaded.setChecked(not on)
            self.keep_loaded.blockSignals(False)
            self.link.error.emit(f"Keep model loaded not saved: {text}")
        self.link.set_settings({"node.keep_loaded": on}, on_error=failed)

    def tell(self, title: str, text: str) -> None:
        """A message from the tray icon (where the system shows them)."""
        if self.icon is not None:
            self.icon.showMessage(title, text, self.icon.icon(), 8000)

    def notify_done(self, rec) -> None:
        self._last_song = rec.id
        if self.icon is not None and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage("Song ready", rec.caption or "Your song is done",
                                  QSystemTrayIcon.Information, 8000)

    def _message_clicked(self) -> None:
        if self._last_song:
            self.song_clicked.emit(self._last_song)

    def _activated(self, reason) -> None:
        if reason in (QSystemTrayIcon.Trigger, QSystemTrayIcon.DoubleClick):
            self.open_requested.emit()
