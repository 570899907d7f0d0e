"""Screenshots of stems in the Songs page: the Stems… dialog, and stems under their song
selected as a set (``Select stems``), into docs/screenshots/.

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_stems_screenshots.py

Uses a throw-away CANTOR_HOME and a real child node with the built-in Sketch engine.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported
from make_screenshots import shot, spin, wait  # noqa: E402


def main() -> int:
    from cantor_desktop import config
    from cantor_desktop.system.net import free_port
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.tasks import close_loop_executor, new_loop

    app = QApplication(sys.argv)
    loop = new_loop(app, already_running=True)
    config.update({"node.port": free_port()})
    shell = Shell(app)
    w = shell.window
    w.resize(1200, 760)
    w.show()
    shell.link.connection.start()
    wait(lambda: shell.link.connection.state == "idle")
    c = w.compose
    c.caption.setPlainText("funk, tight drums, slap bass, electric piano, brass stabs")
    c.instrumental.setChecked(True)
    c.bpm.setText("104")
    c.duration.setText("30")
    c.generate.click()
    wait(lambda: any(s.state == "done" for s in shell.link.songs.by_id.values()), 60)
    song = next(iter(shell.link.songs.by_id.values()))
    w.show_page("Songs")
    page = w.songs
    page.select(song.id, 1)
    dialog = page.open_stems()
    dialog.choose(["drums", "bass", "keyboard", "brass"])
    spin(300)
    from both_schemes import save_both

    save_both(dialog, "stems-dialog", settle=lambda: spin(150))
    dialog.make.click()
    wait(
        lambda: (
            sum(
                1
                for s in shell.link.songs.by_id.values()
                if s.request.get("task") == "extract" and s.state == "done" and s.title
            )
            == 4
        ),
        60,
    )
    page.select(song.id, 1)
    page.select_stems()
    wait(
        lambda: all(
            page.store.known(t.audio) for s in shell.link.songs.by_id.values() for t in s.takes
        ),
        20,
    )
    shot(w, "songs-stems")
    fut = asyncio.ensure_future(shell.link.shutdown())
    wait(fut.done, 20)
    w.shutdown()
    close_loop_executor(loop)
    asyncio.events._set_running_loop(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
