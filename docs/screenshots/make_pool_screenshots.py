"""Screenshot the app connected to a member of a pool: Hardware & Backends with its Pool
section, Compose with its Node choice open, and the Pool section while Redis is down.

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_pool_screenshots.py

A real redis-server and three real nodes on 127.0.0.1 (tests/support/pool_nodes.py):
alpha and bravo make Sketch songs, charlie ACE-Step turbo ones too (its Sketch renders
slowly here, so its queue shows). The app drives alpha with the pool's token, as an app on
another machine would.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported (and the paths to
# the repository and the tests)
from make_screenshots import spin, wait  # noqa: E402


def save_screen_both(window, combo, name: str) -> None:
    """Like ``save_both``, with ``combo``'s list open: the list is a window of its own,
    so the shot is taken from the screen (Xvfb's), where the window is."""
    from both_schemes import OUT

    from cantor_desktop.ui import theme

    app = QApplication.instance()
    for scheme, suffix in (("light", ""), ("dark", "-dark")):
        theme.apply(app, scheme)
        combo.hidePopup()
        spin(200)
        combo.showPopup()
        spin(400)
        g = window.geometry()
        shot = app.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(), g.height())
        shot.save(str(OUT / f"{name}{suffix}.png"))
    combo.hidePopup()
    theme.apply(app, "light")
    print("saved", name, "(light and dark)")


def main() -> int:
    from both_schemes import save_both
    from support.pool_nodes import TOKEN, TURBO, PoolNode, ThreeNodePool, post

    from cantor_desktop.system.secrets import set_secret
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.node_link import REMOTE_TOKEN, NodeLink
    from cantor_desktop.ui.tasks import close_loop_executor, new_loop

    base = Path(tempfile.mkdtemp(prefix="cantor-pool-shots-"))
    pool = ThreeNodePool(base)
    # charlie renders slowly: a song in the making and two waiting for it show
    pool.members[2] = PoolNode(pool.redis, base / "c", "charlie", acestep=True, synth_seconds=60)
    redis, (alpha, _bravo, charlie) = pool.__enter__()
    loop = None
    try:
        set_secret(REMOTE_TOKEN, TOKEN)
        for k in range(3):
            song = {"caption": f"slow strings {k}", "duration": 60, "model": "sketch"}
            asyncio.run(post(charlie, song, node="charlie"))
        app = QApplication.instance() or QApplication(sys.argv)
        loop = new_loop(app, already_running=True)
        link = NodeLink(url=alpha.url, start_child=False)
        w = Shell(app, link).window
        w.resize(1200, 760)
        w.show()
        link.connection.start()
        wait(
            lambda: (
                link.connection.state.connected
                and link.pool.view is not None
                and link.pool.view.members
            ),
            60,
        )
        w.show_page("Hardware & Backends")
        wait(lambda: any(m.making and m.waiting for m in link.pool.view.members), 60)
        spin(500)
        save_both(w, "pool-hardware", settle=lambda: spin(200))

        w.show_page("Compose")
        c = w.compose
        c.caption.setPlainText("warm lo-fi piano, rain on the window, slow brushed drums")
        c.instrumental.setChecked(True)
        c.model.setCurrentIndex(max(0, c.model.findData(TURBO)))
        c.node.setCurrentIndex(max(0, c.node.findData("charlie")))
        spin(300)
        save_screen_both(w, c.node, "pool-compose")

        redis.kill9()
        w.show_page("Hardware & Backends")
        wait(lambda: link.pool.view is not None and not link.pool.view.reachable, 30)
        spin(500)
        save_both(w, "pool-unreachable", settle=lambda: spin(200))
        redis.start()
        wait(lambda: link.pool.view is not None and link.pool.view.reachable, 30)
        print("the pool came back:", link.status_line())
    finally:
        if loop is not None:
            close_loop_executor(loop)
            asyncio.events._set_running_loop(None)  # the nodes are stopped with asyncio.run
        pool.__exit__()
    return 0


if __name__ == "__main__":
    sys.exit(main())
