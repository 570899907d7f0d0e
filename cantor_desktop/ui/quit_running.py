"""``cantor-desktop --quit``: close every running Cantor of this user and this installation
before its files are replaced or removed (the Windows installer runs it before an upgrade
and an uninstall; it works the same on Linux and macOS).

1. The app of this user and home is told ``quit`` through its single-instance socket (a
   named pipe on Windows): it takes its own quit path — the window goes, its node stops
   its engines and exits — and this waits until the app has let its socket go.
2. A node of this home that runs without the app (``cantor node`` in a terminal) is asked
   to stop through its API, as ``cantor node stop`` does.
3. Whatever still runs from this installation's folder (found by image path; frozen builds
   only) is ended: an app of another home, a node that would not stop.

Prints one line per step; exits 0 (1 when something of this installation still runs).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

APP_QUIT_WAIT = 60.0  # s for the app's quit path: its node stops its engines first
END_GRACE = 5.0


def _say(line: str) -> None:
    print(f"cantor-desktop --quit: {line}", flush=True)


def quit_app(timeout: float = APP_QUIT_WAIT) -> bool | None:
    """Tell this user's and home's app to quit and wait until it is gone: None when none
    ran, True when it quit, False when it still answers after ``timeout``."""
    from .instance import QUIT, instance_name, tell_app

    name = instance_name()
    if not tell_app(name, QUIT):
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if not _answers(name):
            return True
    return False


def _answers(name: str) -> bool:
    """Whether an app still listens as ``name`` (asked without a word: it reads nothing)."""
    from .instance import another_app_answers

    answered = another_app_answers(name, b"")
    if answered is not None:
        return answered
    from PySide6.QtNetwork import QLocalSocket

    sock = QLocalSocket()
    sock.connectToServer(name)
    connected = sock.waitForConnected(500)
    sock.abort()
    return connected


def installation_folder() -> Path | None:
    """The folder of this frozen build (None unfrozen: a checkout is not an installation)."""
    if not getattr(sys, "frozen", False):
        return None
    return Path(sys.executable).resolve().parent


def end_from_folder(folder: Path) -> list[int]:
    """End every process (but this one) whose image is inside ``folder``."""
    from ..system import procs

    me = os.getpid()
    found = procs.find(lambda f: f.pid != me and procs.path_under(f.exe, folder))
    return procs.end([f.pid for f in found], grace=END_GRACE) if found else []


def main() -> int:
    from PySide6.QtCore import QCoreApplication

    from ..client.node_process import stop_node

    qt = QCoreApplication.instance() or QCoreApplication([sys.argv[0]])  # noqa: F841 - sockets
    app = quit_app()
    _say(
        {
            None: "no Cantor app was running",
            True: "the app quit",
            False: f"the app still answers after {APP_QUIT_WAIT:g} s",
        }[app]
    )
    try:
        node, said = asyncio.run(stop_node())
        _say(said)
    except Exception as exc:  # noqa: BLE001 - a broken node.toml must not stop an upgrade
        _say(f"could not ask a node to stop: {exc}")
        node = 1
    folder = installation_folder()
    ended = end_from_folder(folder) if folder is not None else []
    if ended:
        _say(f"ended {len(ended)} process(es) still running from {folder}: {ended}")
    left = end_from_folder(folder) if folder is not None and ended else []
    return 1 if left or (app is False and node != 0) else 0
