"""Screenshot Extend… (what the new part sings, and how much of the song it hears) in each
shipped language, light and dark: ``extend``, ``extend-de``, ``extend-ja``.

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_extend_shots.py

The dialog as the Songs page opens it for 20 s added after a take, with two lines typed.
Japanese needs a font with its characters (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    from PySide6.QtWidgets import QApplication

    from both_schemes import save_both

    from cantor_desktop.ui import theme, translation
    from cantor_desktop.ui.extend_dialog import ExtendDialog

    app = QApplication(sys.argv)
    theme.install(app, "light")
    for language, suffix in (("en", ""), ("de", "-de"), ("ja", "-ja")):
        translation.install(app, language)  # the language before it taken out first
        dialog = ExtendDialog("Extending +20.0 s after the song")
        dialog.lyrics.setPlainText("[Verse 2]\nThe night goes on")
        dialog.show()
        app.processEvents()
        save_both(dialog, f"extend{suffix}", settle=app.processEvents)
        dialog.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
