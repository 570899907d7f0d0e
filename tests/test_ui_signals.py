"""SIGTERM or Ctrl-C (SIGINT) to the app quits it like the tray's Quit: its child node stops.

A real app process (offscreen, its own CANTOR_HOME) starts its node child; the test finds
the child by its parent pid, signals the app, and checks that both are gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from conftest import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds the child node through /proc")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:  # fields: state, ppid, ...
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/v1/health", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_quits_the_app_and_stops_its_node(signum):
    from cantor_desktop import config
    port = free_port()
    config.update({"node.port": port})
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = open(os.path.join(os.environ["CANTOR_HOME"], "app.out"), "wb")
    app = subprocess.Popen([sys.executable, "-m", "cantor_desktop.ui.main"], env=env,
                           stdout=out, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 30
        while not _answers(url):
            assert app.poll() is None, f"the app exited with {app.returncode}"
            assert time.monotonic() < end, "the app's node never answered"
            time.sleep(0.1)
        nodes = [p for p in _children(app.pid) if _alive(p)]
        assert nodes, "the node that answers is not the app's child"
        time.sleep(0.3)  # past start-up: the handler is installed before the node starts
        app.send_signal(signum)
        assert app.wait(20) == 0
        end = time.monotonic() + 5
        while any(_alive(p) for p in nodes) and time.monotonic() < end:
            time.sleep(0.05)
        assert not any(_alive(p) for p in nodes), "the app's node outlived the app"
        assert not _answers(url)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(5)
        out.close()
