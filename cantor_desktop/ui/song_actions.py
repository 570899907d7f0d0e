"""The song commands as QActions: the Song menu shows them and the Songs page's buttons
follow them (:func:`.widgets.follow`). What each does and when it may act is
:mod:`cantor_desktop.views.song_actions`'s."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction

from ..views.song_actions import ACTIONS, Selection, availability
from . import shortcuts


class SongActions(QObject):
    """The song commands as QActions (the Song menu and the Songs page share them)."""

    def __init__(self, parent: QObject | None = None, platform: str | None = None):
        super().__init__(parent)
        self.platform = platform
        self.actions: dict[str, QAction] = {}
        for name, (text, what, keys_name) in ACTIONS.items():
            action = QAction(text, self)
            action.setMenuRole(QAction.MenuRole.NoRole)  # never moved to macOS's application menu
            keys = shortcuts.keys(keys_name, platform) if keys_name else []
            if keys:
                action.setShortcuts(keys)
            action.setProperty("cantorWhat", shortcuts.tip(what, keys))
            action.setToolTip(shortcuts.tip(what, keys))
            self.actions[name] = action
        find = self.actions["find"] = QAction("Find…", self)
        find.setMenuRole(QAction.MenuRole.NoRole)
        find.setShortcuts(shortcuts.keys("find", platform))
        find.setToolTip(shortcuts.tip("Search the songs", find.shortcuts()))
        self.update(Selection(page_built=False))

    def __getitem__(self, name: str) -> QAction:
        return self.actions[name]

    def update(self, sel: Selection) -> dict[str, str | None]:
        """Enable each action as the selection allows; a disabled one's tooltip says why."""
        reasons = availability(sel)
        for name, why in reasons.items():
            action = self.actions.get(name)
            if action is None:
                continue
            what = action.property("cantorWhat")
            action.setEnabled(why is None)
            action.setToolTip(what if why is None else f"{what}\n— {why}")
        self.actions["ab"].setEnabled(sel.page_built)
        return reasons
