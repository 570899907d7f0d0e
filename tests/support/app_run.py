"""The real app (``cantor_desktop.ui.main.main``, offscreen) as a child process, for the
tests of how it starts, quits and dies. (No tests here.)

The child makes the app's own QApplication class first and then runs the app's own ``main``
— exactly what the cantor-desktop entry point runs — with additions of the test's: it counts
the main windows it shows, and when the file ``quit_file`` appears it does what macOS's
termination does there (Qt's Cocoa plugin, ``applicationShouldTerminate:``): for a logout
(the file says ``logout``) the session manager's ``commitDataRequest`` first, then a
``QEvent.Quit`` sent to the application and waited for; with ``dock`` the window is closed
to the tray first, as when the Dock's Quit ends an app with no window. It prints whether
the Quit was accepted and how many of its children were still running when the answer
came. ``app_events``
chooses the application class macOS gets (True: its own events come to the shell) or the
one the other systems get (False); None leaves this system's own. A test that kills
the node again and again may cap the app's restart back-off (``backoff_max``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from cantor_desktop.auth.access import bearer, read_token

ROOT = Path(__file__).resolve().parents[2]

APP = r"""
import os, sys
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer
from PySide6.QtWidgets import QMainWindow
import cantor_desktop.ui.main as app_main
from cantor_desktop.ui.main import application_class, main

if os.environ.get("TEST_APP_EVENTS"):
    app_main.APP_EVENTS = os.environ["TEST_APP_EVENTS"] == "1"
app = application_class()(sys.argv[:1])      # the application main() itself would make
quit_file = sys.argv[1]
if len(sys.argv) > 2:       # a test that kills the node over and over: a shorter back-off
    from cantor_desktop.client import node_process
    node_process.BACKOFF_MAX = float(sys.argv[2])
shown = set()
shells = []  # the app's Shell, to reach its commitDataRequest slot (a QSessionManager
_init = app_main.Shell.__init__  # cannot be made from Python)


def remember(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    shells.append(self)


app_main.Shell.__init__ = remember

class Shown(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Show and isinstance(obj, QMainWindow):
            shown.add(id(obj))
        return False

watcher = Shown()
app.installEventFilter(watcher)

def running_children():
    import psutil

    return [c for c in psutil.Process().children(recursive=True) if c.is_running()
            and c.status() != psutil.STATUS_ZOMBIE]


def poll():
    if os.path.exists(quit_file):
        how = open(quit_file).read().strip()
        os.unlink(quit_file)
        if how == "dock" and shells:
            shells[0].window.keep_in_tray = True    # macOS has its menu bar icon: the
            shells[0].window.close()                # window closes, Cantor runs on
            print("window visible before quit:", shells[0].window.isVisible(), flush=True)
            print("quitting before the event:", shells[0]._quit.done(), flush=True)
        if how == "logout" and shells:
            shells[0]._session_ending(None)         # commitDataRequest: not cancelled
        event = QEvent(QEvent.Quit)
        QCoreApplication.sendEvent(app, event)      # then the Quit, waited for
        print("quit-event accepted:", event.isAccepted(), flush=True)
        print("children running at the answer:", len(running_children()), flush=True)
    QTimer.singleShot(50, poll)

QTimer.singleShot(50, poll)
code = main(sys.argv[:1])
print("main windows shown:", len(shown), flush=True)
print("main returned", code, flush=True)
sys.exit(code)
"""


class AppUnderTest:
    def __init__(
        self,
        home: Path,
        port: int,
        *,
        backoff_max: float | None = None,
        app_events: bool | None = None,
    ):
        self.home = home
        self.app_events = app_events
        self.port = port
        self.backoff_max = backoff_max
        self.url = f"http://127.0.0.1:{port}"
        self.quit_file = home / "quit-now"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "AppUnderTest":
        env = {
            **os.environ,
            "CANTOR_HOME": str(self.home),
            "QT_QPA_PLATFORM": "offscreen",
            "PYTHONPATH": str(ROOT),
        }
        if self.app_events is not None:
            env["TEST_APP_EVENTS"] = "1" if self.app_events else "0"
        extra = [] if self.backoff_max is None else [str(self.backoff_max)]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", APP, str(self.quit_file), *extra],
            env=env,
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def node_up(self, timeout: float = 40.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if (
                    httpx.get(self.url + "/v1/health", timeout=1, trust_env=False).status_code
                    == 200
                ):
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return False

    def headers(self) -> dict[str, str]:
        return bearer(read_token())

    def song(self, timeout: float = 60.0) -> dict:
        """One short sketch song, waited for (its engine then runs)."""
        r = httpx.post(
            self.url + "/v1/songs",
            json={"caption": "quit test", "duration": 10, "model": "sketch"},
            headers=self.headers(),
            timeout=10,
            trust_env=False,
        )
        r.raise_for_status()
        sid = r.json()["id"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            song = httpx.get(
                f"{self.url}/v1/songs/{sid}", headers=self.headers(), timeout=10, trust_env=False
            ).json()
            if song["state"] in ("done", "failed", "cancelled"):
                return song
            time.sleep(0.1)
        raise AssertionError(f"song {sid} did not end")

    def engine_pid(self) -> int | None:
        system = httpx.get(
            self.url + "/v1/system", headers=self.headers(), timeout=10, trust_env=False
        ).json()
        return next((i["pid"] for i in system["loaded"] if i.get("running")), None)

    def node_pid(self) -> int | None:
        for child in psutil.Process(self.pid).children():
            try:
                if "node" in child.cmdline():
                    return child.pid
            except psutil.NoSuchProcess:
                pass
        return None

    def tree(self) -> list[int]:
        """The app's descendants now (its node, the node's engine …)."""
        try:
            return [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def quit_by_event(self, how: str = "") -> None:
        """macOS's termination: "" Cmd+Q, "dock" the Dock's Quit with the window closed,
        "logout" the session ending."""
        self.quit_file.write_text(how)

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def finish(self, timeout: float = 40.0) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def engines_record(self) -> dict:
        try:
            return json.loads((self.home / "state" / "engines.json").read_text())
        except (OSError, ValueError):
            return {}


def still_running(pids, timeout: float = 10.0) -> list[int]:
    """The pids among ``pids`` still running after up to ``timeout`` s (zombies are gone)."""
    from cantor_desktop.system import procs

    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if procs.alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
