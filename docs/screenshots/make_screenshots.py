"""Screenshot every page of Cantor Desktop, empty and busy, into docs/screenshots/.

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_screenshots.py

Each page is saved in the light scheme (NAME.png) and the dark one (NAME-dark.png).

Uses a throw-away CANTOR_HOME, a real child node with the sketch engine, and the test
suite's model hub on 127.0.0.1 for a download in progress (no internet).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(OUT))
os.environ.setdefault("QT_API", "pyside6")
home = tempfile.mkdtemp(prefix="cantor-shots-")
os.environ["CANTOR_HOME"] = home
os.environ["PYTHON_KEYRING_BACKEND"] = "keyrings.alt.file.PlaintextKeyring"

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def spin(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def wait(pred, timeout=30.0) -> None:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end and not pred():
        spin(50)


def open_app(*, node_port: bool = True):
    """The app as a user starts it (its QApplication on the qasync loop, the Shell, its own
    child node on a free port unless node.toml names one), its window shown at the shots'
    size, the node ready: (the Shell, its loop)."""
    from cantor_desktop import config
    from cantor_desktop.system.net import free_port
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.tasks import new_loop

    app = QApplication.instance() or QApplication(sys.argv)
    loop = new_loop(app, already_running=True)
    if node_port:
        config.update({"node.port": free_port()})
    shell = Shell(app)
    shell.window.resize(1200, 760)
    shell.window.show()
    shell.link.connection.start()
    wait(lambda: shell.link.connection.state == "idle", 60)
    return shell, loop


def close_app(shell, loop) -> None:
    """The node stopped, the window and the loop closed (so the process can end)."""
    from cantor_desktop.ui.tasks import close_loop_executor

    fut = asyncio.ensure_future(shell.link.shutdown())
    wait(fut.done, 20)
    shell.window.shutdown()
    close_loop_executor(loop)
    asyncio.events._set_running_loop(None)


def shot(window, name: str) -> None:
    from both_schemes import save_both

    spin(300)
    save_both(window, name, settle=lambda: spin(150))


def main() -> int:
    from cantor_desktop import config
    from cantor_desktop.system.net import free_port
    from support.hub import ModelHub

    from cantor_desktop.ui.tasks import close_loop_executor, new_loop

    app = QApplication(sys.argv)
    loop = new_loop(app, already_running=True)
    config.update({"node.port": free_port()})
    config.update({"models.lm": "0.6B"})  # the language model the hub's set has
    hub = ModelHub()
    pulled = hub.add_set(size=48 * 1024 * 1024)
    from cantor_desktop.models import catalogue

    for entry in catalogue.builtin().files.values():  # the hub lists the whole catalogue
        if entry.name not in hub.files:
            hub.add(entry.name, 4096)
            hub.advertise(entry.name, size=entry.size)
    hub.__enter__()
    for name in pulled:
        hub.server.throttle(hub.cdn_path(name), 6 * 1024 * 1024)
    failing = "acestep-v15-sft-Q8_0"  # a download that fails (Retry offered)
    hub.server.fail(hub.cdn_path(f"{failing}.gguf"), 404, times=None)
    os.environ["HF_ENDPOINT"] = hub.base_url

    from cantor_desktop.ui.main import Shell

    shell = Shell(app)
    w = shell.window
    w.resize(1200, 760)
    w.show()
    pages = {
        "compose": "Compose",
        "songs": "Songs",
        "library": "Library",
        "hardware": "Hardware & Backends",
        "settings": "Settings",
    }
    # empty: before the node answers
    for key, name in pages.items():
        w.show_page(name)
        shot(w, f"{key}-empty")
    shell.link.connection.start()
    wait(lambda: shell.link.connection.state == "idle")
    wait(lambda: shell.link.backends.system, 20)
    spin(500)
    # busy
    c = w.compose
    c.caption.setPlainText("warm lo-fi piano, rain on the window, slow brushed drums")
    c.lyrics.setPlainText("[Verse]\nstreetlights hum a quiet tune\n\n[Chorus]\nstay, stay a while")
    c.bpm.setText("78")
    c.key.setCurrentText("A minor")
    c.duration.setText("30")
    c.generate.click()
    wait(lambda: any(s.state == "done" for s in shell.link.songs.by_id.values()), 60)
    c.caption.setPlainText("bright synth pop, hand claps, driving bass")
    c.lyrics.setPlainText("")
    c.instrumental.setChecked(True)
    c.bpm.setText("124")
    c.duration.setText("20")
    c.takes.setValue(2)
    c.generate.click()
    wait(
        lambda: (
            len(shell.link.songs.by_id) >= 2
            and all(s.is_finished for s in shell.link.songs.by_id.values())
        ),
        60,
    )
    c.takes.setValue(1)
    c.caption.setPlainText("epic orchestral trailer, taiko, choir")
    c.duration.setText("600")
    c.bpm.setText("")
    c.generate.click()
    wait(
        lambda: any(
            s.state == "running" and s.progress > 0.2 for s in shell.link.songs.by_id.values()
        ),
        60,
    )
    w.show_page("Compose")
    shot(w, "compose-busy")
    w.show_page("Songs")
    first = next(iter(sorted(shell.link.songs.by_id.values(), key=lambda r: r.created)))
    w.songs.select(first.id)
    shell.link.songs.change(first.id, favourite=True)
    wait(
        lambda: all(
            w.songs.store.known(t.audio)
            for r in shell.link.songs.by_id.values()
            if r.state == "done"
            for t in r.takes
        ),
        20,
    )
    spin(500)
    shot(w, "songs-busy")
    w.songs.search.setText("synth")
    spin(300)
    shot(w, "songs-search")
    w.songs.search.clear()
    for rec in list(shell.link.songs.by_id.values()):
        if not rec.is_finished:
            shell.link.songs.cancel(rec.id)
    w.show_page("Library")
    lib = w.library
    name = "acestep-v15-turbo-Q8_0"
    wait(lambda: name in lib.rows and lib.view_model.recommended is not None, 20)
    lib.table.selectRow(lib.rows[lib.view_model.recommended.name])
    shot(w, "library-recommended")
    lib.pull(failing)
    wait(lambda: failing in lib.view_model.failed, 20)
    lib.pull(name)
    wait(lambda: " / " in lib._bar(lib.rows[name]).format(), 30)
    spin(1500)
    shot(w, "library-busy")
    w.show_page("Hardware & Backends")
    w.hardware.find_best()
    spin(1500)
    shot(w, "hardware-busy")
    w.show_page("Settings")
    config.update({"node.keep_loaded": True})
    spin(800)
    shot(w, "settings-busy")
    (Path(home) / "node.toml").write_text("[node\nport = 1\n")
    spin(900)
    shot(w, "settings-malformed")
    fut = asyncio.ensure_future(shell.link.shutdown())
    wait(fut.done, 20)
    hub.__exit__(None, None, None)
    w.shutdown()
    close_loop_executor(loop)
    asyncio.events._set_running_loop(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
