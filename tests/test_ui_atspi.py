"""The app as a screen reader meets it, on the real accessibility bus: the real app under an
X server of the test's own (Xvfb) with Qt's AT-SPI bridge on, at-spi2-core's bus on a
session bus of the test's own, and an AT-SPI client (tests/support/atspi_client.py:
pyatspi under the system's Python 3, as Orca uses it) that reads roles, names, label
relations and states from the bus and types through it (XTest, as a keyboard would).

The walk is a musician's with the keyboard alone: the caption typed where the app puts the
keyboard (Ctrl+Return before it is heard to say what is missing), Tab to Instrumental and
Space, Ctrl+Return, the song heard done, Ctrl+2 to Songs, Home to the new song, Space to
play it. At every step each control the bus shows has a name or a label."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support.procs import free_port

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "tests" / "support" / "atspi_client.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-pyatspi is installed
CONTROLS = {
    "push button",
    "toggle button",
    "check box",
    "radio button",
    "text",
    "password text",
    "combo box",
    "spin button",
    "slider",
    "list",
    "table",
    "tree",
    "page tab",
}


def _need(tool: str, package: str) -> None:
    if shutil.which(tool) is None and not Path(tool).exists():
        pytest.skip(f"{tool} is not installed (Debian: {package}; scripts/bootstrap.sh test)")


def _end_tree(proc: subprocess.Popen) -> None:
    """``proc`` and everything it started (dbus-daemon's activated bus and registry)."""
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for p in [*family, psutil.Process(proc.pid)] if proc.poll() is None else family:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _gone, alive = psutil.wait_procs(family, timeout=10)
    for p in alive:
        p.kill()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def desktop(tmp_path):
    """An X server and a session bus of the test's own: the environment their programs get."""
    _need("Xvfb", "xvfb")
    _need("dbus-daemon", "dbus")
    _need("pulseaudio", "pulseaudio")
    _need("/usr/libexec/at-spi-bus-launcher", "at-spi2-core")
    _need(SYSTEM_PYTHON, "python3")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import pyatspi"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("pyatspi is not installed for the system's Python (Debian: python3-pyatspi)")
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as f:
        display = ":" + f.readline().strip()
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=display, XDG_RUNTIME_DIR=str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    # a sound server with one output that plays into nothing (PulseAudio's null sink), so
    # Play has a device as on a musician's machine
    socket = tmp_path / "run" / "pulse-native"
    sound = subprocess.Popen(
        [
            "pulseaudio",
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "-L",
            "module-null-sink",
            "-L",
            f"module-native-protocol-unix auth-anonymous=1 socket={socket}",
        ],
        env={**env, "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env["PULSE_SERVER"] = f"unix:{socket}"
    deadline = time.monotonic() + 30
    while not socket.exists():  # the server listening (or gone: then it says why)
        assert sound.poll() is None and time.monotonic() < deadline, "pulseaudio did not start"
        time.sleep(0.05)
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert bus.stdout is not None
    env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().strip()
    try:
        yield env
    finally:
        _end_tree(bus)
        _end_tree(sound)
        xvfb.terminate()
        xvfb.wait(10)


class Client:
    """The AT-SPI client, one JSON command a line."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [SYSTEM_PYTHON, str(CLIENT)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **command) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer
        return answer

    def tree(self) -> list[dict]:
        return self.ask(do="tree")["nodes"]

    def focused(self) -> dict | None:
        return self.ask(do="focused")["node"]

    def key(self, sym: str, *mods: str) -> None:
        self.ask(do="key", sym=sym, mods=list(mods))

    def until(self, what: str, check, timeout: float = 60.0):
        """Read the bus until ``check(tree)`` gives something (returned), or fail."""
        deadline = time.monotonic() + timeout
        while True:
            tree = self.tree()
            found = check(tree)
            if found:
                return found
            if time.monotonic() > deadline:
                shown = "\n".join(
                    f"{'  ' * len(n['path'])}{n['role']}: {n['name'][:70]!r} {n['states']}"
                    for n in tree
                )
                pytest.fail(f"the bus never showed {what}; it showed:\n{shown}")
            time.sleep(0.1)  # a poll of the bus, not a wait for time to pass

    def hear(self, text: str, timeout: float = 30.0) -> None:
        """Wait for the app to announce ``text`` (as a screen reader would speak it)."""
        said: list[str] = []
        deadline = time.monotonic() + timeout
        while text not in said:
            if time.monotonic() > deadline:
                pytest.fail(f"never announced {text!r}; announced: {said}")
            said += self.ask(do="announcements")["said"]
            time.sleep(0.05)  # a poll of the client's events, not a wait for time to pass

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def unnamed(tree: list[dict]) -> list[str]:
    """Controls on the bus a screen reader could only call by their role."""
    return [
        f"{n['role']} at {n['path']}"
        for n in tree
        if n["role"] in CONTROLS
        and "focusable" in n["states"]
        and not any(c.isalpha() for c in n["name"])
        and not any(any(c.isalpha() for c in label) for label in n["labels"])
    ]


def _is(node: dict | None, role: str, name: str) -> bool:
    return node is not None and node["role"] == role and node["name"] == name


def test_a_song_made_and_played_with_the_keyboard_alone_through_the_bus(desktop, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    (home / "node.toml").write_text(f'[node]\nhost = "127.0.0.1"\nport = {port}\n')
    env = {
        **desktop,
        "CANTOR_HOME": str(home),
        "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",  # Qt's bridge, as with a screen reader running
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "PYTHONPATH": str(ROOT),
    }
    app = subprocess.Popen(
        [sys.executable, "-m", "cantor_desktop.ui.main"],
        env=env,
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = Client(env)
    try:
        assert client.ask(do="wait_app", name="Cantor", timeout=60)["ok"], "no Cantor on the bus"
        # the keyboard starts in the caption, named as its label says
        client.until("the caption focused", lambda _t: _is(client.focused(), "text", "Caption"))
        client.key("Return", "ctrl")  # Generate with nothing said yet: what is missing, heard
        client.hear("Caption is required: describe the song (style, instruments, mood)")
        client.ask(do="type", text="warm lofi piano at night")
        client.until(
            "the caption typed",
            lambda _t: (
                client.ask(do="text", role="text", name="Caption")["text"]
                == "warm lofi piano at night"
            ),
        )
        # no lyrics: Tab along to Instrumental (past Inspire me and Tidy my lyrics), Space
        for _ in range(3):
            client.key("Tab")
        client.until(
            "Instrumental focused", lambda _t: _is(client.focused(), "check box", "Instrumental")
        )
        client.key("space")
        client.until(
            "Instrumental checked",
            lambda t: any(
                _is(n, "check box", "Instrumental") and "checked" in n["states"] for n in t
            ),
        )
        tree = client.until(
            "Generate enabled (the node up)",
            lambda t: (
                t
                if any(_is(n, "push button", "Generate") and "enabled" in n["states"] for n in t)
                else None
            ),
        )
        assert unnamed(tree) == [], "Compose"
        client.key("Return", "ctrl")
        client.until(
            "the song done in the queue",
            lambda t: any(n["name"].startswith("Done") for n in t),
            timeout=120,
        )
        client.hear("Song ready: warm lofi piano at night")  # wherever the focus is
        client.key("2", "ctrl")
        client.until(
            "the songs list focused",
            lambda t: any(
                _is(n, "list", "Songs and takes") and "focused" in n["states"] for n in t
            ),
        )
        client.key("Home")
        tree = client.until(
            "the new song the list's current one",
            lambda t: (
                t
                if (found := client.focused())
                and found["role"] == "list item"
                and "warm lofi piano at night" in found["name"]
                else None
            ),
        )
        assert unnamed(tree) == [], "Songs"
        client.key("space")
        client.until(
            "Play turned to Pause", lambda t: any(_is(n, "push button", "Pause") for n in t)
        )
    finally:
        client.close()
        app.terminate()
        try:
            _, err = app.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            _end_tree(app)
            err = b""
        print("the app's output:", err.decode("utf-8", "replace")[-3000:])
