"""Keep PySide6's import scan from holding every module's source in memory.

After PySide6 is imported, it looks at every module imported later to see whether the
module mentions "PySide6" (to decide whether its ``from __feature__ import`` switches apply
there). It asks with ``inspect.getsource``, which keeps each file's lines in ``linecache``
for the life of the process: about 9 MiB for the app run from source, a sixth of a bare
window's memory. This answers the same question from the file's bytes and keeps nothing.
The frozen app has no sources, so both ways answer False there."""

from __future__ import annotations

import sys
from types import ModuleType

import PySide6  # noqa: F401 - installs the scan this module replaces

SCAN_NAME = "_mod_uses_pyside"


def mentions_pyside(module: ModuleType, *_more, **_named) -> bool:
    """Whether the module's source file says "PySide6" (as PySide6's own scan answers).

    It runs inside every import that follows PySide6's: it never raises (an error here
    would fail that import), and takes whatever else a later PySide6 may pass."""
    try:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            return False
        with open(path, "rb") as source:
            return b"PySide6" in source.read()
    except Exception:  # unreadable, a NUL in the path, …: no source, as PySide6 says
        return False


def install() -> bool:
    """Replace PySide6's scan; False when this PySide6 has no such scan (nothing to do)."""
    feature = sys.modules.get("__feature__")
    if feature is None or not callable(getattr(feature, SCAN_NAME, None)):
        return False
    setattr(feature, SCAN_NAME, mentions_pyside)
    return True
