"""SIGTERM or Ctrl-C (SIGINT) to the app quits it like the tray's Quit: its child node stops.

A real app process (offscreen, its own CANTOR_HOME) starts its node child; the test finds
the child among the app's children, signals the app, and checks that both are gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from support.procs import alive, answers, free_port, gone, wait_until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SIGTERM and SIGINT as a POSIX app gets them"
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_quits_the_app_and_stops_its_node(signum):
    from cantor_desktop import config

    port = free_port()
    config.update({"node.port": port})
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = open(os.path.join(os.environ["CANTOR_HOME"], "app.out"), "wb")
    app = subprocess.Popen(
        [sys.executable, "-m", "cantor_desktop.ui.main"],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:

        def node_up() -> bool:
            assert app.poll() is None, f"the app exited with {app.returncode}"
            return answers(url)

        wait_until(node_up, "the app's node to answer", timeout=60, every=0.1)
        # the signal handler is installed before the node starts: the app is ready for it
        nodes = [c.pid for c in psutil.Process(app.pid).children() if alive(c.pid)]
        assert nodes, "the node that answers is not the app's child"
        app.send_signal(signum)
        assert app.wait(20) == 0
        # the app stops its node before it exits: nothing of it is left, at once
        assert all(gone(p) for p in nodes), "the app's node outlived the app"
        assert not answers(url)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(5)
        out.close()
