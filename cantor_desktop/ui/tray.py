"""The tray: node state as the icon, a status line, node controls, keep-loaded, open, quit.

The QSystemTrayIcon is only made when ``isSystemTrayAvailable``; its menu is built with it,
or when first asked for (:attr:`Tray.menu`). Where there is no tray (GNOME without an
extension, offscreen) the window starts without a menu nobody can open (~0.3 MiB). On macOS
the icon is a template image (black, tinted by the system for the menu bar).
"""

from __future__ import annotations

import sys

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QSystemTrayIcon

from .. import config
from ..views.messages import failure
from .icons import tray_icon

if TYPE_CHECKING:
    from .node_link import NodeLink


class TrayMenu:
    """The tray's menu and its actions (the status line first, disabled)."""

    def __init__(self, tray: Tray) -> None:
        from PySide6.QtGui import QAction
        from PySide6.QtWidgets import QMenu

        connection = tray.link.connection
        self.widget = QMenu()
        from .menus import quit_text

        self.status = QAction("Node stopped", self.widget)
        self.status.setEnabled(False)
        self.start = QAction("&Start node", self.widget)
        self.stop = QAction("S&top node", self.widget)
        self.restart = QAction("&Restart node", self.widget)
        self.keep_loaded = QAction("&Keep model loaded", self.widget)
        self.keep_loaded.setCheckable(True)
        self.open = QAction("&Open Cantor", self.widget)
        self.quit = QAction(quit_text(sys.platform), self.widget)
        for a in (
            self.status,
            None,
            self.start,
            self.stop,
            self.restart,
            self.keep_loaded,
            None,
            self.open,
            self.quit,
        ):
            self.widget.addSeparator() if a is None else self.widget.addAction(a)
        self.start.triggered.connect(connection.start)
        self.stop.triggered.connect(connection.stop)
        self.restart.triggered.connect(connection.restart)
        self.keep_loaded.toggled.connect(tray.set_keep_loaded)
        self.open.triggered.connect(tray.open_requested)
        self.widget.aboutToShow.connect(tray.sync_keep_loaded)
        self.quit.triggered.connect(tray.quit_requested)


class Tray(QObject):
    open_requested = Signal()
    quit_requested = Signal()
    song_clicked = Signal(str)

    def __init__(self, link: NodeLink, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self._menu: TrayMenu | None = None
        self.icon: QSystemTrayIcon | None = None
        self._last_song: str | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.icon = QSystemTrayIcon(tray_icon("stopped"), self)
            self.icon.setContextMenu(self.menu.widget)
            self.icon.activated.connect(self._activated)
            self.icon.messageClicked.connect(self._message_clicked)
            self.icon.show()
        link.connection.state_changed.connect(self.on_state)
        link.status_changed.connect(self.on_status)
        link.songs.finished.connect(self.notify_done)
        self.on_state(link.connection.state)
        if self.icon is not None:  # a light or dark system panel: the note's colour follows
            from . import theme

            theme.notifier().changed.connect(self._scheme_changed)

    def _scheme_changed(self, _scheme: str) -> None:
        """(A method, not a lambda: the connection ends with the tray.)"""
        self.on_state(self.link.connection.state)

    @property
    def menu(self) -> TrayMenu:
        """The menu, built now if this is its first use (in the node's present state)."""
        if self._menu is None:
            self._menu = TrayMenu(self)
            self.sync_keep_loaded()
            self.on_state(self.link.connection.state)
        return self._menu

    @property
    def available(self) -> bool:
        return self.icon is not None

    def on_state(self, state: str) -> None:
        menu = self._menu
        if menu is not None:
            running = state in ("idle", "generating", "starting")
            menu.start.setEnabled(not running)
            menu.stop.setEnabled(running or self.link.connection.owns_node)
            menu.restart.setEnabled(state != "starting")
        if self.icon is not None:
            self.icon.setIcon(tray_icon(state))
        self.on_status(self.link.status_line())

    def on_status(self, line: str) -> None:
        if self._menu is not None:
            self._menu.status.setText(line)
        if self.icon is not None:
            self.icon.setToolTip(f"Cantor — {line}")

    def sync_keep_loaded(self) -> None:
        """The keep-loaded tick as node.toml says (a menu not built yet reads it then)."""
        if self._menu is None:
            return
        cfg, _ = config.load_or_defaults()
        action = self._menu.keep_loaded
        action.blockSignals(True)
        action.setChecked(bool(cfg.get("node.keep_loaded")))
        action.blockSignals(False)

    def set_keep_loaded(self, on: bool) -> None:
        def failed(text: str) -> None:
            action = self.menu.keep_loaded
            action.blockSignals(True)
            action.setChecked(not on)
            action.blockSignals(False)
            self.link.error.emit(failure("save Keep model loaded", text))

        self.link.settings.change({"node.keep_loaded": on}, on_error=failed)

    def tell(self, title: str, text: str) -> None:
        """A message from the tray icon (where the system shows them)."""
        if self.icon is not None:
            self.icon.showMessage(title, text, self.icon.icon(), 8000)

    def notify_done(self, rec) -> None:
        self._last_song = rec.id
        if self.icon is not None and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage(
                "Song ready",
                rec.caption or "Your song is done",
                QSystemTrayIcon.MessageIcon.Information,
                8000,
            )

    def _message_clicked(self) -> None:
        if self._last_song:
            self.song_clicked.emit(self._last_song)

    def _activated(self, reason) -> None:
        if opens_window(reason):
            self.open_requested.emit()


def opens_window(reason, platform: str = sys.platform) -> bool:
    """Whether a click on the icon brings the window up. On macOS a click on a menu-bar
    item opens its menu (which has Open Cantor), and must not raise the window as well;
    elsewhere a click (Windows, KDE) or a double click opens the window, the menu being
    the right button's."""
    if platform == "darwin":
        return False
    return reason in (
        QSystemTrayIcon.ActivationReason.Trigger,
        QSystemTrayIcon.ActivationReason.DoubleClick,
    )
