"""Keyboard shortcuts and the words for the system's parts, as each OS has them.

Shortcuts come from ``QKeySequence.StandardKey`` where Qt has one (Find, Delete, Close,
Quit, Preferences, Help), so each platform gets its own (⌘Q, Ctrl+Q, none on Windows where
Alt+F4 closes); the others are written with ``Ctrl``, which Qt shows and reads as ⌘ on
macOS. Every shortcut a user reads (menus, tooltips) is the platform's own text
(``QKeySequence.NativeText``): "⌘↩" on a Mac, "Ctrl+Return" elsewhere — never a spelling
written into a string.

``platform`` is ``sys.platform`` unless a test names another one.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QKeyCombination, Qt
from PySide6.QtGui import QKeySequence


def is_mac(platform: str | None = None) -> bool:
    return (platform or sys.platform) == "darwin"


def tray_word(platform: str | None = None) -> str:
    """Where the app's status icon lives, in the OS's own words."""
    platform = platform or sys.platform
    if platform == "darwin":
        return "menu bar"
    return "system tray"  # Windows 11's settings and KDE say so; GNOME's extensions too


def keys(name: str, platform: str | None = None) -> list[QKeySequence]:
    """The key sequences of a command, the platform's standard ones first."""
    std = STANDARD.get(name)
    found = list(QKeySequence.keyBindings(std)) if std is not None else []
    found = [k for k in found if not k.isEmpty()]
    for extra in EXTRA.get(name, ()):
        wanted_here, combo = extra
        if wanted_here is None or wanted_here == is_mac(platform):
            seq = QKeySequence(combo)
            if seq not in found:
                found.append(seq)
    if not found and name in FALLBACK:
        found = [QKeySequence(FALLBACK[name])]
    return found


def shown(seq: QKeySequence | list[QKeySequence] | None) -> str:
    """A shortcut as the platform writes it ("⌘↩", "Ctrl+Return"); the first of several."""
    if isinstance(seq, list):
        seq = seq[0] if seq else None
    if seq is None or seq.isEmpty():
        return ""
    return seq.toString(QKeySequence.SequenceFormat.NativeText)


def tip(text: str, seq: QKeySequence | list[QKeySequence] | None) -> str:
    """A tooltip naming its shortcut: "Generate (⌘↩)"."""
    key = shown(seq)
    return f"{text} ({key})" if key else text


STANDARD = {
    "find": QKeySequence.StandardKey.Find,
    "trash": QKeySequence.StandardKey.Delete,
    "close_window": QKeySequence.StandardKey.Close,
    "quit": QKeySequence.StandardKey.Quit,
    "preferences": QKeySequence.StandardKey.Preferences,
    "help": QKeySequence.StandardKey.HelpContents,
    "copy": QKeySequence.StandardKey.Copy,
    "cut": QKeySequence.StandardKey.Cut,
    "paste": QKeySequence.StandardKey.Paste,
    "select_all": QKeySequence.StandardKey.SelectAll,
}

CTRL = Qt.KeyboardModifier.ControlModifier  # ⌘ on macOS (Qt swaps them there)

Keys = QKeyCombination | Qt.Key
EXTRA: dict[str, tuple[tuple[bool | None, Keys], ...]] = {
    # (only on a Mac: True, only elsewhere: False, everywhere: None), the keys
    "generate": ((None, CTRL | Qt.Key.Key_Return), (None, CTRL | Qt.Key.Key_Enter)),
    "play": ((None, Qt.Key.Key_Space),),
    "ab": ((None, Qt.Key.Key_B),),
    # the Finder moves to the trash with ⌘⌫ (Delete alone is fn+⌫ on a Mac keyboard)
    "trash": ((True, CTRL | Qt.Key.Key_Backspace),),
    "minimize": ((True, CTRL | Qt.Key.Key_M),),
    "export": ((None, CTRL | Qt.Key.Key_E),),
    "page_1": ((None, CTRL | Qt.Key.Key_1),),
    "page_2": ((None, CTRL | Qt.Key.Key_2),),
    "page_3": ((None, CTRL | Qt.Key.Key_3),),
    "page_4": ((None, CTRL | Qt.Key.Key_4),),
}

FALLBACK = {
    # where the platform has no standard key for it (Windows, GNOME): what apps there use
    "preferences": CTRL | Qt.Key.Key_Comma,
}
