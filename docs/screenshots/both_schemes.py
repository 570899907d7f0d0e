"""Save a screenshot in the light and the dark scheme: ``NAME.png`` and ``NAME-dark.png``
(used by the make_*.py scripts here)."""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parent


def save_both(widget, name: str, settle=None) -> None:
    """Grab ``widget`` in each scheme (``settle()`` lets it repaint in between)."""
    from PySide6.QtWidgets import QApplication

    from cantor_desktop.ui import theme

    app = QApplication.instance()
    for scheme, suffix in (("light", ""), ("dark", "-dark")):
        theme.apply(app, scheme)
        if settle is not None:
            settle()
        widget.grab().save(str(OUT / f"{name}{suffix}.png"))
    theme.apply(app, "light")
    print("saved", name, "(light and dark)")
