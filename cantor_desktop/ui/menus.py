"""The window's menu bar: File, Edit, Song, Window and Help, as each OS has them.

On macOS the menus go to the system's menu bar, and the actions with a role land where a
Mac user looks for them: About Cantor, Settings… (⌘,) and Quit Cantor (⌘Q) in the
application menu, whatever menu they were put in here; the Window menu has Minimize (⌘M)
and Zoom. Elsewhere the bar is the window's, Settings… sits in Edit and Quit in File.
Every other action has no role, so Qt's guess by name ("Settings", "About") never moves
it. Shortcuts come from :mod:`.shortcuts` (the platform's standard keys, shown in its own
text).

It is made after the window's first paint, with the banner and the Compose page (the frame
paints first: start-up).
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QMenuBar

from .translation import QT_TRANSLATE_NOOP

TITLES = (
    QT_TRANSLATE_NOOP("MenuBar", "&File"),
    QT_TRANSLATE_NOOP("MenuBar", "&Edit"),
    QT_TRANSLATE_NOOP("MenuBar", "&Song"),
    QT_TRANSLATE_NOOP("MenuBar", "&Window"),
    QT_TRANSLATE_NOOP("MenuBar", "&Help"),
)
"""The menus, by the names the code calls them (the bar shows them translated)."""
QUIT_TEXT = {"darwin": "Quit Cantor", "win32": "E&xit"}
"""What each OS calls leaving the app in its menus (Windows: Exit, with its x); elsewhere
"&Quit Cantor"."""


PAGE_TEXT = {
    "Compose": QT_TRANSLATE_NOOP("MenuBar", "C&ompose"),
    "Songs": QT_TRANSLATE_NOOP("MenuBar", "&Songs"),
    "Library": QT_TRANSLATE_NOOP("MenuBar", "&Library"),
    "Hardware & Backends": QT_TRANSLATE_NOOP("MenuBar", "&Hardware && Backends"),
}
"""The Window menu's pages with their Alt-key letters (&& is the page's own &)."""


def quit_text(platform: str) -> str:
    return QUIT_TEXT.get(platform, "&Quit Cantor")


class MenuBar:
    """The menu bar of a :class:`.window.MainWindow` and its application-wide actions."""

    def __init__(self, window, platform: str | None = None):
        self.window = window
        self.platform = platform or sys.platform
        self.mac = self.platform == "darwin"
        self.bar: QMenuBar = window.menuBar()
        self.menus = {
            title.replace("&", ""): self.bar.addMenu(QCoreApplication.translate("MenuBar", title))
            for title in TITLES
        }
        self.actions: dict = {}  # name → QAction
        self.filled = False

    def _action(
        self,
        name: str,
        text: str,
        slot,
        keys: str | None = None,
        role=None,
        tip: str | None = None,
    ):
        from PySide6.QtGui import QAction

        from . import shortcuts

        action = QAction(text, self.window)
        # NoRole: never moved by a guess from its text on macOS
        action.setMenuRole(QAction.MenuRole.NoRole if role is None else role)
        found = shortcuts.keys(keys, self.platform) if keys else []
        if found:
            action.setShortcuts(found)
        action.setToolTip(shortcuts.tip(tip or text.replace("&", "").rstrip("…"), found))
        action.triggered.connect(lambda _checked=False: slot())
        self.actions[name] = action
        return action

    def fill(self, song_actions, generate=None) -> None:
        """Every menu's actions (the song ones are the Songs page's own; ``generate`` is
        Compose's QAction)."""
        from PySide6.QtGui import QAction

        from . import shortcuts

        if self.filled:
            return
        self.filled = True
        w = self.window
        act = self._action
        self.actions.update({f"song:{k}": v for k, v in song_actions.actions.items()})
        # the & letters: Alt+letter in a menu on Windows and Linux (macOS shows none)
        about = act("about", "&About Cantor", w.show_about, role=QAction.MenuRole.AboutRole)
        settings = act(
            "preferences",
            "&Settings…",
            lambda: w.show_page("Settings"),
            keys="preferences",
            role=QAction.MenuRole.PreferencesRole,
        )
        quit_ = act(
            "quit",
            quit_text(self.platform),
            w.quit_requested.emit,
            keys="quit",
            role=QAction.MenuRole.QuitRole,
        )
        quit_.setToolTip(
            shortcuts.tip("Quit Cantor and stop the node it started", quit_.shortcuts())
        )

        file = self.menus["File"]
        songs = song_actions.actions
        for item in (songs["export"], songs["reveal"], songs["copy_path"], None):
            file.addSeparator() if item is None else file.addAction(item)
        file.addAction(
            act("import", "&Import GGUF Files…", w.import_models, tip="Add model files you have")
        )
        file.addSeparator()
        file.addAction(act("close", "&Close Window", w.close, keys="close_window"))
        if not self.mac:
            file.addSeparator()
        file.addAction(quit_)  # macOS moves it to the application menu (its role)

        edit = self.menus["Edit"]
        for name, text, slot in (
            ("cut", "Cu&t", "cut"),
            ("copy", "&Copy", "copy"),
            ("paste", "&Paste", "paste"),
            ("select_all", "Select &All", "selectAll"),
        ):
            edit.addAction(act(name, text, lambda s=slot: w.edit_focus(s), keys=name))
        edit.addSeparator()
        edit.addAction(songs["find"])
        if not self.mac:
            edit.addSeparator()
        edit.addAction(settings)  # macOS: the application menu's Settings… (⌘,)

        song = self.menus["Song"]
        song.setToolTipsVisible(True)  # a disabled action says why
        items = [generate, None] if generate is not None else []
        items += ["play", "ab", None, "repaint", "extend", "cover", "reference"]
        items += ["layer", "complete", "stems", "render_again", "another_take", None]
        items += ["rename", "favourite", "reuse", None, "trash"]
        for item in items:
            if item is None:
                song.addSeparator()
            else:
                song.addAction(songs[item] if isinstance(item, str) else item)

        window = self.menus["Window"]
        window.addAction(
            act("minimize", "Mi&nimize", w.showMinimized, keys="minimize" if self.mac else None)
        )
        window.addAction(act("zoom", "&Zoom", w.toggle_zoom))
        window.addSeparator()
        for n, page in enumerate(w.PAGES[:4], start=1):
            text = QCoreApplication.translate(
                "MenuBar", PAGE_TEXT.get(page, page.replace("&", "&&"))
            )
            window.addAction(
                act(f"page:{page}", text, lambda p=page: w.show_page(p), keys=f"page_{n}")
            )
        if self.mac:  # Settings… is in the application menu there
            window.addAction(act("page:Settings", "Se&ttings", lambda: w.show_page("Settings")))
        window.addSeparator()
        window.addAction(
            act("bring_up", "&Cantor", w.bring_up, tip="Bring the window to the front")
        )

        help_ = self.menus["Help"]
        help_.addAction(act("help", "Cantor &Help", w.show_help, keys="help"))
        help_.addAction(act("node_log", "&Node Log", w.show_log, tip="The node's log, live"))
        help_.addAction(act("logs", "Open &Logs Folder", w.open_logs))
        help_.addSeparator()
        help_.addAction(about)  # macOS: the application menu's About Cantor
        help_.addAction(
            act("about_qt", "About &Qt", w.show_about_qt, role=QAction.MenuRole.AboutQtRole)
        )


def readme():
    """The guide that comes with Cantor (a Path): the README beside the package (a
    checkout) or in the bundle; None when neither is there."""
    from pathlib import Path

    bundle = getattr(sys, "_MEIPASS", None)
    top = Path(bundle) if bundle else Path(__file__).resolve().parents[2]
    found = top / "README.md"
    return found if found.is_file() else None
