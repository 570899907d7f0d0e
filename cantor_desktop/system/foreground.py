"""Letting another process take the foreground: Windows lets only the process the user just
used bring a window to the front; a second launch (which the user just started) hands that
right to the first app before asking it to show itself, or its window would only flash in
the taskbar behind the others."""

from __future__ import annotations

import sys

ASFW_ANY = 0xFFFFFFFF
"""AllowSetForegroundWindow's "any process" (the first app's id is not known to a pipe's
client without another call)."""


def allow_others_to_the_front() -> bool:
    """Windows: AllowSetForegroundWindow(ASFW_ANY); True when Windows allowed it. Elsewhere
    nothing is needed (False)."""
    if sys.platform != "win32":
        return False
    import ctypes

    try:
        return bool(ctypes.windll.user32.AllowSetForegroundWindow(ASFW_ANY))
    except (AttributeError, OSError):  # a user32 without it: the window only flashes
        return False
