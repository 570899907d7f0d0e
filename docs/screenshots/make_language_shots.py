"""Screenshot Compose and Songs in each language Cantor ships besides English, light and dark
(``compose-de``, ``songs-de``, ``compose-ja``, ``songs-ja``).

Run under Xvfb from the repository root, once per language:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_language_shots.py de
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_language_shots.py ja

A throw-away CANTOR_HOME, a real child node with the sketch engine and one real Sketch song,
the app in the language given (``cantor_desktop/ui/translation.py``, as ``app.language``
chooses it). Japanese needs a font with its characters (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported (and the paths to
# the repository and the tests)
from make_screenshots import close_app, open_app, spin, wait  # noqa: E402


def main(language: str) -> int:
    from both_schemes import save_both

    from cantor_desktop import config
    from cantor_desktop.ui import translation

    app = QApplication(sys.argv)
    config.update({"app.language": language})
    translation.install(app, translation.chosen(language))
    shell, loop = open_app()
    w, link = shell.window, shell.link
    made = []
    link.songs.queue(
        "shots",
        {
            "caption": "warm lo-fi piano, rain on the window",
            "lyrics": "[Instrumental]",
            "duration": 20,
            "model": "sketch",
        },
        on_done=made.append,
    )
    wait(lambda: made and link.songs.get(made[0].id).state == "done", 90)
    w.show_page("Compose")
    w.compose.caption.setPlainText("dreamy synthwave, warm pads, gated drums")
    spin(400)
    save_both(w, f"compose-{language}", settle=lambda: spin(150))
    w.show_page("Songs")
    w.songs.select(made[0].id, 1)
    spin(600)
    save_both(w, f"songs-{language}", settle=lambda: spin(150))

    close_app(shell, loop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "de"))
