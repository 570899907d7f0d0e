"""Engines a killed node left behind.

Engines run in their own session (so a Ctrl-C meant for the node does not kill a song
half-way), which means a node killed with ``kill -9`` leaves its engine running. The node
records each engine it starts (pid and models folder) in ``paths().node_engines_file``; the
next node ends the recorded processes that are still alive *and* still the same program (its
command line names that models folder), so a recycled pid is never touched.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..config import write_atomic
from ..paths import paths

log = logging.getLogger(__name__)


def _file() -> Path:
    return paths().node_engines_file


def record(engines: dict[str, dict]) -> None:
    """Save ``{key: {"pid": int, "models_dir": str}}`` for the engines running now."""
    write_atomic(_file(), json.dumps(engines, indent=1).encode("utf-8"))


def _command_line(pid: int) -> str | None:
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.exists():
        try:
            return proc.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            return None
    if sys.platform == "win32":
        return None
    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def end_leftovers(timeout: float = 3.0) -> list[int]:
    """End the recorded engines that outlived their node; returns the pids ended."""
    try:
        engines = json.loads(_file().read_text("utf-8"))
    except (OSError, ValueError):
        return []
    ended = []
    for key, item in (engines or {}).items():
        try:
            pid, folder = int(item["pid"]), str(item["models_dir"])
        except (KeyError, TypeError, ValueError):
            continue
        if pid == os.getpid() or not _alive(pid):
            continue
        command = _command_line(pid)
        if not command or "--models" not in command or folder not in command:
            continue
        log.warning("ending the %s engine (pid %d) a previous node left running", key, pid)
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
                _reap(pid)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        ended.append(pid)
    record({})
    return ended


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
