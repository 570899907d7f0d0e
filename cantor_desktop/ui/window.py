"""The main window: a sidebar of pages, the readiness banner and a status line.

Start-up is skeleton first: ``MainWindow(skeleton=True)`` builds only the frame (sidebar,
empty page stack, status bar) from QtWidgets, so the app can paint it at once; ``populate``
then loads the settings and builds the Compose page, the banner and the node wiring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal  # not Qt: its enums cost ~13 ms
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from .translation import QT_TRANSLATE_NOOP

if TYPE_CHECKING:
    from .menus import MenuBar
    from .song_actions import SongActions

PAGES = (
    QT_TRANSLATE_NOOP("MainWindow", "Compose"),
    QT_TRANSLATE_NOOP("MainWindow", "Songs"),
    QT_TRANSLATE_NOOP("MainWindow", "Library"),
    QT_TRANSLATE_NOOP("MainWindow", "Hardware & Backends"),
    QT_TRANSLATE_NOOP("MainWindow", "Settings"),
)
"""The pages, by the names the code calls them (the sidebar shows them translated)."""


def _build(name: str, link, song_actions=None):
    """Pages other than Compose are built the first time they are needed (quick start-up)."""
    if name == "Songs":
        from .pages.songs import SongsPage

        return SongsPage(link, song_actions=song_actions)
    if name == "Library":
        from .pages.library import LibraryPage

        return LibraryPage(link)
    if name == "Hardware & Backends":
        from .pages.hardware import HardwarePage

        return HardwarePage(link)
    if name == "Settings":
        from .pages.settings import SettingsPage

        return SettingsPage(link)
    from .pages.compose import ComposePage

    return ComposePage(link)


class MainWindow(QMainWindow):
    PAGES = PAGES  # the pages in the sidebar's order (the Window menu lists them too)
    first_painted = Signal()
    quit_requested = Signal()  # the menu's Quit: the shell quits (the node stops)

    def __init__(self, link=None, *, skeleton: bool = False, platform: str | None = None) -> None:
        super().__init__()
        self.platform = platform  # sys.platform unless a test names another
        self.setWindowTitle("Cantor")
        self.resize(1180, 760)
        self.link = link
        self.keep_in_tray = False  # set by main when a tray icon is showing
        self.tray = None
        self.quitting = False  # set by the shell's quit: a close is then accepted
        self.populated = False
        self._built: dict[str, QWidget] = {}
        self.painted = False  # True once the window has painted (first_painted follows)

        central = QWidget()
        self.outer = QVBoxLayout(central)
        row = QHBoxLayout()
        self.outer.addLayout(row, 1)
        self.sidebar = QListWidget()
        self.sidebar.addItems([self.tr(page) for page in PAGES])
        self.sidebar.setAccessibleName(self.tr("Pages"))
        font = self.sidebar.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.sidebar.setFont(font)
        # as wide as its longest page name in this language (and at least 190 px)
        longest = max(self.sidebar.fontMetrics().horizontalAdvance(self.tr(p)) for p in PAGES)
        self.sidebar.setFixedWidth(max(190, longest + 40))
        self.sidebar.setSpacing(6)  # roomy rows without a style sheet (quicker first paint)
        from .theme import navigation

        navigation(self.sidebar)
        self.pages = QStackedWidget()
        for _name in PAGES:
            self.pages.addWidget(QWidget())
        self.sidebar.setCurrentRow(0)
        row.addWidget(self.sidebar)
        row.addWidget(self.pages, 1)
        self.setCentralWidget(central)
        self.menu_bar: MenuBar | None = None  # after the first paint (populate), like the banner
        self.song_actions: SongActions | None = None
        if not skeleton:
            self.populate()

    def _build_status_bar(self) -> None:
        """The node's dot, state line and buttons: after the first paint (QStatusBar's first
        use costs ~3 ms, a tenth of the frame's own cost)."""
        from PySide6.QtWidgets import QLabel, QPushButton

        self.dot = QLabel("●")  # a glyph in the state's colour: nothing to draw
        self.state_label = QLabel(self.tr("Starting…"))
        self.node_button = QPushButton(self.tr("Start node"))
        self.node_button.setFlat(True)
        self.log_button = QPushButton(self.tr("Node log"))
        self.log_button.setFlat(True)
        bar = self.statusBar()
        bar.addWidget(self.dot)
        bar.addWidget(self.state_label, 1)
        bar.addPermanentWidget(self.node_button)
        bar.addPermanentWidget(self.log_button)

    def populate(self) -> None:
        """Everything past the frame: settings, icon, banner, Compose, the node's signals."""
        if self.populated:
            return
        self.populated = True
        self._build_status_bar()
        from .. import config
        from .icons import app_icon
        from .pages.firstrun import ReadinessBanner

        if self.link is None:
            from .node_link import NodeLink

            self.link = NodeLink(self)
        self.setWindowIcon(app_icon())
        self.settings, self.settings_error = config.load_or_defaults()
        self.banner = ReadinessBanner()
        self.outer.insertWidget(0, self.banner)
        from .song_actions import SongActions

        self.song_actions = SongActions(self, self.platform)
        from .menus import MenuBar

        self.menu_bar = MenuBar(self, self.platform)
        self.song_actions["find"].triggered.connect(self.find_songs)
        self.page("Compose")
        self.menu_bar.fill(self.song_actions, self.compose.generate_action)
        self.compose.generate_action.triggered.connect(lambda: self.show_page("Compose"))
        self.sidebar.currentRowChanged.connect(self._show_row)
        self._show_row(self.sidebar.currentRow())
        self.compose.caption.setFocus()  # the first thing a musician does: say the song
        bar = self.statusBar()
        self.node_button.clicked.connect(self._node_button)
        self.log_button.clicked.connect(self.show_log)
        self.link.connection.state_changed.connect(self._state)
        self.link.pool.changed.connect(self._pool)
        self.link.status_changed.connect(self.state_label.setText)
        self.link.error.connect(lambda text: bar.showMessage(text, 15000))
        self.link.backends.system_loaded.connect(
            lambda s: self.banner.update_from(s, self.link.models.listed)
        )
        self.link.models.loaded.connect(
            lambda m: self.banner.update_from(self.link.backends.system, m)
        )
        self.link.songs.finished.connect(self._announce_song)
        self.link.songs.failed.connect(self._announce_song)
        self.banner.try_sketch.connect(self.try_sketch)
        self.banner.set_up.connect(self.set_up_acestep)
        self._state(self.link.connection.state)
        if self.settings_error is not None:
            bar.showMessage(f"node.toml is not valid, using defaults: {self.settings_error}")

    # -- pages ------------------------------------------------------------------------------
    def page(self, name: str) -> QWidget:
        """The page, built now if this is its first use."""
        self.populate()
        if name not in self._built:
            widget = _build(name, self.link, self.song_actions)
            index = PAGES.index(name)
            current = self.pages.currentIndex()
            old = self.pages.widget(index)  # the empty page that held its place
            self.pages.insertWidget(index, widget)
            if old is not None:
                self.pages.removeWidget(old)
                old.deleteLater()
            self.pages.setCurrentIndex(current)
            self._built[name] = widget
            if name == "Songs":
                widget.use_settings.connect(self.use_settings)
                widget.cover_requested.connect(self.make_cover)
                widget.reference_requested.connect(self.use_reference)
            elif name == "Settings":
                widget.saved.connect(self.tray_sync)
                widget.saved_keys.connect(self._settings_saved)
                widget.file_changed.connect(self.tray_sync)
                widget.file_changed.connect(self.link.settings.refresh)
            elif name == "Compose":
                widget.play_song.connect(lambda sid: self.open_song(sid, play=True))
        return self._built[name]

    def _show_row(self, row: int) -> None:
        if 0 <= row < len(PAGES):
            songs = self._built.get("Songs")
            if songs is not None and PAGES[row] != "Songs":
                from .pages.songs import SongsPage  # loaded already: the page is built

                assert isinstance(songs, SongsPage)
                songs.stop_playback()  # leaving Songs stops the sound
            page = self.page(PAGES[row])
            self.pages.setCurrentIndex(row)
            if not self.sidebar.hasFocus():  # a shortcut or a menu: the keys go to the page
                _focus_first(page)

    compose = property(lambda self: self.page("Compose"))
    songs = property(lambda self: self.page("Songs"))
    library = property(lambda self: self.page("Library"))
    hardware = property(lambda self: self.page("Hardware & Backends"))
    settings_page = property(lambda self: self.page("Settings"))

    def paintEvent(self, e) -> None:  # noqa: N802 — paints only (event() would see them all)
        if not self.painted:
            self.painted = True
            from PySide6.QtCore import QTimer

            QTimer.singleShot(0, self.first_painted.emit)
        super().paintEvent(e)

    def _settings_saved(self, keys: list) -> None:
        """A new node address (or our node's host/port) means connecting afresh; any other
        change reaches every page at once (the node's settings are read again)."""
        if {"app.node_url", "node.host", "node.port"} & set(keys):
            self.statusBar().showMessage("Connecting to the node at its new address…", 5000)
            self.link.connection.restart()
        else:
            self.link.settings.refresh()

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

    def set_up_acestep(self) -> None:
        """The banner's set-up action does the next step, not only show a page: with no
        backend yet it starts "Find the best backend"; with one, it opens the Library."""
        if self.banner.state == "needs download":
            self.show_page("Library")
            return
        self.show_page("Hardware & Backends")
        hardware = self.hardware
        if hardware.running_key is None:
            hardware.find_best()  # without a node it says so in the page's log

    def use_settings(self, song) -> None:
        from ..views.compose_form import ComposeForm

        seed = song.takes[0].seed if song.takes else None
        self.compose.set_form(ComposeForm.from_settings(song.request, seed))
        self.show_page("Compose")

    def make_cover(self, source: dict, name: str) -> None:
        """Compose, set to make a cover of ``source`` (the caption is the musician's)."""
        self.compose.set_cover(source, name)
        self.show_page("Compose")
        self.compose.caption.setFocus()

    def use_reference(self, source: dict, name: str) -> None:
        self.compose.set_reference(source, name)
        self.show_page("Compose")

    def open_song(self, song_id: str, play: bool = False) -> None:
        self.bring_up()
        self.show_page("Songs")
        self.songs.select(song_id)
        if play:
            self.songs.toggle_play()

    def bring_up(self) -> None:
        self.show()
        from PySide6.QtCore import Qt

        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.raise_()
        self.activateWindow()

    def _announce_song(self, song) -> None:
        """A song done or failed, told to a screen reader wherever its focus is (the queue
        and the tray show it; a reader would not hear them)."""
        from .announce import announce

        if song.state == "done":
            announce(self, self.tr("Song ready: %1").replace("%1", song.name))
        else:
            text = self.tr("Song failed: %1").replace("%1", song.name)
            announce(self, text + (f" ({song.error})" if song.error else ""), urgent=True)

    def _state(self, state: str) -> None:
        from . import theme

        tone = theme.NODE_STATE_TONES.get(state, "muted")
        pool = self.link.pool.view
        if self.link.connection.state.connected and pool is not None and pool.short_problem():
            tone = "warning"  # the node works, its pool does not: the line says why
        theme.tone(self.dot, tone)
        self.state_label.setText(self.link.status_line())
        running = state in ("idle", "generating", "starting")
        self.node_button.setText(self.tr("Stop node") if running else self.tr("Start node"))

    def _pool(self, _view) -> None:
        self._state(str(self.link.connection.state))

    def _node_button(self) -> None:
        connection = self.link.connection
        if connection.state in ("idle", "generating", "starting"):
            connection.stop()
        else:
            connection.start()

    def show_log(self) -> None:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QDialog, QPlainTextEdit

        dialog = QDialog(self)
        dialog.setWindowTitle("Node log")
        dialog.resize(820, 480)
        layout = QVBoxLayout(dialog)
        text = QPlainTextEdit()
        text.setReadOnly(True)
        layout.addWidget(text)

        from ..system.paths import paths

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

    # -- the menus' own commands ------------------------------------------------------------
    def find_songs(self) -> None:
        self.show_page("Songs")
        self.songs.focus_search()

    def import_models(self) -> None:
        self.show_page("Library")
        self.library.import_gguf()

    def edit_focus(self, method: str) -> None:
        """Edit → Cut, Copy, Paste, Select All: to the field that has the focus."""
        from PySide6.QtWidgets import QApplication

        focus = QApplication.focusWidget()
        if focus is not None and hasattr(focus, method):
            getattr(focus, method)()

    def toggle_zoom(self) -> None:
        self.showNormal() if self.isMaximized() else self.showMaximized()

    def show_about(self) -> None:
        from PySide6.QtWidgets import QMessageBox

        from .. import __version__

        QMessageBox.about(
            self,
            "About Cantor",
            f"<b>Cantor {__version__}</b><p>Make songs with ACE-Step on your own machine. "
            "The built-in Sketch engine drafts a song with no download and no GPU.</p>",
        )

    def show_about_qt(self) -> None:
        from PySide6.QtWidgets import QMessageBox

        QMessageBox.aboutQt(self, "About Qt")

    def show_help(self) -> None:
        """Cantor's guide: the README that comes with it, else where to find help."""
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices
        from PySide6.QtWidgets import QMessageBox

        from .menus import readme

        found = readme()
        if found is not None and QDesktopServices.openUrl(QUrl.fromLocalFile(str(found))):
            return
        QMessageBox.information(
            self,
            "Cantor Help",
            "Write a caption on the Compose page (and lyrics, or choose Instrumental), then "
            "Generate. Your songs are on the Songs page: play them, edit them, drag them into "
            "your DAW. The Library downloads ACE-Step models; Hardware & Backends finds the "
            "best engine for this machine. Help → Node Log shows what the node is doing.",
        )

    def open_logs(self) -> None:
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        from ..system.paths import paths

        QDesktopServices.openUrl(QUrl.fromLocalFile(str(paths().logs_dir)))

    def shutdown(self) -> None:
        """Stop playback and join the pages' worker threads (the app is quitting)."""
        for page in self._built.values():
            stop = getattr(page, "shutdown", None)
            if stop is not None:
                stop()

    def closeEvent(self, event) -> None:
        if self.keep_in_tray and not self.quitting:
            event.ignore()
            self.hide()
            from . import app_state
            from .shortcuts import tray_word

            where = tray_word()
            self.statusBar().showMessage(f"Cantor keeps running in the {where}")
            if self.tray is not None and app_state.once("told_close_to_tray"):
                self.tray.tell(
                    "Cantor is still running",
                    f"Closing the window keeps Cantor and its songs going in the {where}. "
                    f"Quit from the {where} icon's menu, or with Quit Cantor.",
                )
            return
        super().closeEvent(event)


def _focus_first(page: QWidget) -> None:
    """Focus the page's own first control (its focus proxy: Songs' list), else the first
    a Tab would reach, so a page opened from the keyboard can be used from the keyboard at
    once."""
    from PySide6.QtCore import Qt

    if page.focusProxy() is not None:
        page.setFocus(Qt.FocusReason.TabFocusReason)
        return
    widget = page.nextInFocusChain()
    while widget is not None and widget is not page:
        if (
            page.isAncestorOf(widget)
            and widget.isVisibleTo(page)
            and widget.isEnabled()
            and widget.focusPolicy() & Qt.FocusPolicy.TabFocus
        ):
            widget.setFocus(Qt.FocusReason.TabFocusReason)
            return
        widget = widget.nextInFocusChain()
