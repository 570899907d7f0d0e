"""The light or dark of the place a tray icon sits, where it is not the app's own: Windows
draws its taskbar (and the tray on it) in the scheme of "Choose your default Windows mode"
(``SystemUsesLightTheme``), which may differ from the apps' mode (``AppsUseLightTheme``) the
app's palette follows: a dark taskbar beside light apps is Windows 11's common setting."""

from __future__ import annotations

import sys
from collections.abc import Callable

PERSONALIZE = r"Software\Microsoft\Windows\CurrentVersion\Themes\Personalize"

Reader = Callable[[str], int | None]


def _read_personalize(name: str) -> int | None:
    if sys.platform != "win32":
        return None
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, PERSONALIZE) as key:
            value, _kind = winreg.QueryValueEx(key, name)
    except OSError:
        return None
    return int(value) if isinstance(value, int) else None


def taskbar_scheme(read: Reader | None = None, platform: str = sys.platform) -> str | None:
    """ "light" or "dark" as Windows draws its taskbar; None elsewhere, or when Windows
    does not say (before Windows 10 1903: the taskbar is dark then)."""
    if platform != "win32":
        return None
    value = (read or _read_personalize)("SystemUsesLightTheme")
    if value is None:
        return None
    return "light" if value else "dark"
