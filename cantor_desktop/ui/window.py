"""The main window: a sidebar of pages, the readiness banner and a status line."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QDialog, QHBoxLayout, QLabel, QListWidget, QMainWindow,
                               QPlainTextEdit, QPushButton, QStackedWidget, QVBoxLayout, QWidget)

from .. import config
from ..paths import paths
from .compose_form import ComposeForm
from .icons import app_icon, dot_pixmap
from .node_link import NodeLink
from .pages.compose import ComposePage
from .pages.firstrun import ReadinessBanner
from .pages.hardware import HardwarePage
from .pages.library import LibraryPage
from .pages.settings import SettingsPage
from .pages.songs import SongsPage

PAGES = ("Compose", "Songs", "Library", "Hardware & Backends", "Settings")


class MainWindow(QMainWindow):
    def __init__(self, link: NodeLink | None = None) -> None:
        super().__init__()
        self.setWindowTitle("Cantor")
        self.setWindowIcon(app_icon())
        self.resize(1180, 760)
        self.link = link or NodeLink(self)
        self.settings, self.settings_error = config.load_or_defaults()
        self.keep_in_tray = False  # set by main when a tray icon is showing

        central = QWidget()
        outer = QVBoxLayout(central)
        self.banner = ReadinessBanner()
        outer.addWidget(self.banner)
        row = QHBoxLayout()
        outer.addLayout(row, 1)
        self.sidebar = QListWidget()
        self.sidebar.addItems(PAGES)
        self.sidebar.setFixedWidth(190)
        self.sidebar.setStyleSheet("QListWidget { font-size: 14px; } "
                                   "QListWidget::item { padding: 8px; }")
        self.pages = QStackedWidget()
        self.compose = ComposePage(self.link)
        self.songs = SongsPage(self.link)
        self.library = LibraryPage(self.link)
        self.hardware = HardwarePage(self.link)
        self.settings_page = SettingsPage()
        for page in (self.compose, self.songs, self.library, self.hardware, self.settings_page):
            self.pages.addWidget(page)
        self.sidebar.currentRowChanged.connect(self.pages.setCurrentIndex)
        self.sidebar.setCurrentRow(0)
        row.addWidget(self.sidebar)
        row.addWidget(self.pages, 1)
        self.setCentralWidget(central)

        self.dot = QLabel()
        self.state_label = QLabel()
        self.node_button = QPushButton("Start node")
        self.node_button.setFlat(True)
        self.log_button = QPushButton("Node log")
        self.log_button.setFlat(True)
        bar = self.statusBar()
        bar.addWidget(self.dot)
        bar.addWidget(self.state_label, 1)
        bar.addPermanentWidget(self.node_button)
        bar.addPermanentWidget(self.log_button)
        self.node_button.clicked.connect(self._node_button)
        self.log_button.clicked.connect(self.show_log)

        self.link.state_changed.connect(self._state)
        self.link.status_changed.connect(self.state_label.setText)
        self.link.error.connect(lambda text: bar.showMessage(text, 15000))
        self.link.system_loaded.connect(lambda s: self.banner.update_from(s, self.link.models))
        self.link.models_loaded.connect(lambda m: self.banner.update_from(self.link.system, m))
        self.banner.try_sketch.connect(self.try_sketch)
        self.banner.set_up.connect(lambda: self.show_page("Hardware & Backends"))
        self.songs.use_settings.connect(self.use_settings)
        self.compose.generated.connect(lambda _id: None)
        self.settings_page.saved.connect(self.tray_sync)
        self.settings_page.file_changed.connect(self.tray_sync)
        self._state(self.link.state)
        self.tray = None
        if self.settings_error is not None:
            bar.showMessage(f"node.toml is not valid, using defaults: {self.settings_error}")

    def tray_sync(self) -> None:
        if self.tray is not None:
            self.tray.sync_keep_loaded()

    def show_page(self, name: str) -> None:
        self.sidebar.setCurrentRow(PAGES.index(name))

    def try_sketch(self) -> None:
        self.show_page("Compose")
        if not self.compose.caption.toPlainText().strip():
            self.compose.caption.setPlainText("bright acoustic pop, hand claps, warm bass")
        self.compose.model.setCurrentIndex(0)
        self.compose.caption.setFocus()

    def use_settings(self, rec) -> None:
        self.compose.set_form(ComposeForm.from_settings(rec.params, rec.seed))
        self.show_page("Compose")

    def open_song(self, song_id: str) -> None:
        self.bring_up()
        self.show_page("Songs")
        self.songs.select(song_id)

    def bring_up(self) -> None:
        self.show()
        self.setWindowState(self.windowState() & ~Qt.WindowMinimized)
        self.raise_()
        self.activateWindow()

    def _state(self, state: str) -> None:
        self.dot.setPixmap(dot_pixmap(state))
        self.state_label.setText(self.link.status_line())
        running = state in ("idle", "generating", "starting")
        self.node_button.setText("Stop node" if running else "Start node")

    def _node_button(self) -> None:
        if self.link.state in ("idle", "generating", "starting"):
            self.link.stop()
        else:
            self.link.start()

    def show_log(self) -> None:
        dialog = QDialog(self)
        dialog.setWindowTitle("Node log")
        dialog.resize(820, 480)
        layout = QVBoxLayout(dialog)
        text = QPlainTextEdit()
        text.setReadOnly(True)
        layout.addWidget(text)

        def load():
            try:
                with open(paths().node_log, "rb") as fh:
                    fh.seek(0, 2)
                    fh.seek(max(0, fh.tell() - 200_000))
                    data = fh.read().decode("utf-8", "replace")
            except OSError as exc:
                data = f"No node log yet ({exc.strerror}: {paths().node_log})"
            if data != text.toPlainText():
                text.setPlainText(data)
                text.verticalScrollBar().setValue(text.verticalScrollBar().maximum())

        timer = QTimer(dialog)
        timer.timeout.connect(load)
        timer.start(1000)
        load()
        dialog.show()

    def closeEvent(self, event) -> None:  # noqa: N802
        if self.keep_in_tray:
            event.ignore()
            self.hide()
            self.statusBar().showMessage("Cantor keeps running in the tray")
            return
        super().closeEvent(event)
