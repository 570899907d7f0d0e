"""The main window: a sidebar of pages and a status line."""

from __future__ import annotations

from PySide6.QtWidgets import (QHBoxLayout, QLabel, QListWidget, QMainWindow, QStackedWidget,
                               QVBoxLayout, QWidget)

from .. import config

PAGES = ("Hardware & Backends", "Library", "Compose", "Songs", "Settings")


class MainWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Cantor")
        self.resize(1100, 720)
        self.settings, self.settings_error = config.load_or_defaults()

        central = QWidget()
        row = QHBoxLayout(central)
        self.sidebar = QListWidget()
        self.sidebar.addItems(PAGES)
        self.sidebar.setFixedWidth(200)
        self.pages = QStackedWidget()
        for name in PAGES:
            page = QWidget()
            QVBoxLayout(page).addWidget(QLabel(name))
            self.pages.addWidget(page)
        self.sidebar.currentRowChanged.connect(self.pages.setCurrentIndex)
        self.sidebar.setCurrentRow(0)
        row.addWidget(self.sidebar)
        row.addWidget(self.pages, 1)
        self.setCentralWidget(central)
        if self.settings_error is not None:
            self.statusBar().showMessage(f"node.toml is not valid, using defaults: "
                                         f"{self.settings_error}")
