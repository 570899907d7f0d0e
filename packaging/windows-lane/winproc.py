"""Windows processes of the lane, driven and watched from the Linux side.

- :class:`Xvfb`: the X server Wine's windows (and its virtual desktop) draw on.
- :func:`run` / :class:`WinProcess`: a Windows program under Wine with stdio on pipes (the
  only stdio Windows' CPython starts with under Wine); a running one's stdout is read line
  by line (the drivers print one JSON object per line).
- :func:`processes`: every Windows process a test started, found by the marker variable
  each test puts in its environment (Wine passes a process's Windows environment on to the
  Linux process behind it, children included), Wine's own services left out. "Nothing left
  running" means this list is empty.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import lane

MARK = "CANTOR_LANE_MARK"


class Xvfb:
    """An X server of its own (a display number it picks), for the lane's session."""

    def __init__(self, size=lane.DESKTOP_SIZE):
        read, write = os.pipe()
        self.proc = subprocess.Popen(
            [
                "Xvfb",
                "-displayfd",
                str(write),
                "-screen",
                "0",
                f"{size[0]}x{size[1]}x24",
                "-nolisten",
                "tcp",
                "-noreset",
            ],
            pass_fds=(write,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        with os.fdopen(read) as f:
            number = f.readline().strip()
        if not number:
            raise lane.LaneError("Xvfb did not start")
        self.display = f":{number}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def new_mark() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class Found:
    pid: int  # the Linux pid of the Windows process
    cmdline: str

    @property
    def role(self) -> str:
        line = self.cmdline.lower()
        if "sketch-server" in line or "ace-server" in line:
            return "engine"
        if " node" in line:
            return "node"
        return "app" if "app.py" in line or "cantor-desktop" in line else "other"


def processes(mark: str) -> list[Found]:
    """The Windows processes started with ``mark`` in their environment that still run
    (Wine's own: wineserver, C:\\windows\\... services and explorer, are not counted)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (
                (entry / "cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode("utf-8", "replace")
                .strip()
            )
        except OSError:
            continue
        low = cmd.lower()
        if (
            not cmd
            or "wineserver" in low
            or low.startswith(("c:\\windows\\", "xvfb", "/usr/lib/wine/wine"))
        ):
            continue
        found.append(Found(int(entry.name), cmd))
    return found


def wait_gone(mark: str, timeout: float) -> list[Found]:
    """Wait up to ``timeout`` s for every process of ``mark`` to end; what still runs."""
    deadline = time.monotonic() + timeout
    while (left := processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def end(found: list[Found]) -> None:
    """End leftovers a test found (they are counted as its failure first)."""
    for f in found:
        try:
            os.kill(f.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Session:
    """The environment of the tests' Windows processes: the lane's Wine settings, the
    session's display, a marker per test."""

    def __init__(self, display: str):
        self.display = display

    def env(self, mark: str, **extra: str) -> dict[str, str]:
        env = lane.base_env(self.display)
        env[MARK] = mark
        env.update({k: v for k, v in extra.items() if v is not None})
        return env

    def run(
        self, args: list[str], mark: str, *, timeout: float = 300, **extra: str
    ) -> subprocess.CompletedProcess:
        return lane.wine(args, env=self.env(mark, **extra), timeout=timeout, check=False)

    def start(self, args: list[str], mark: str, **extra: str) -> WinProcess:
        return WinProcess(args, self.env(mark, **extra))


class WinProcess:
    """A running Windows program: its stdout lines (parsed when JSON), a stdin to send
    commands on, its exit code."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.args = args
        self.proc = subprocess.Popen(
            ["wine", *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=lane.DRIVE_C,  # the only drive of the prefix
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, stream, is_stdout: bool) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if is_stdout:
                self.lines.put(line)
            else:
                self.errors.append(line)

    def events(self):
        """The JSON events read so far (and the other lines, as they came)."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            self.seen.append(line)

    def wait_event(self, name: str, timeout: float, **match) -> dict:
        """The next event ``name`` (with these fields) the program prints."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"no {name!r} event within {timeout:.0f} s; saw "
                    f"{self.seen[-15:]}; stderr {self.errors[-15:]}"
                )
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise RuntimeError(
                        f"the program ended ({self.proc.returncode}) before "
                        f"{name!r}; saw {self.seen[-15:]}; stderr "
                        f"{self.errors[-25:]}"
                    ) from None
                continue
            self.seen.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == name and all(event.get(k) == v for k, v in match.items()):
                return event

    def send(self, **command) -> None:
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def ask(self, reply: str, timeout: float = 60, **command) -> dict:
        self.send(**command)
        return self.wait_event(reply, timeout)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def output(self) -> str:
        self.events()
        return "\n".join(self.seen + ["--- stderr ---"] + self.errors)
