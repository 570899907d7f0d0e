"""Real processes and ports for the tests: a free port, whether a process is alive or gone,
whether a node answers, and waiting for such a condition (never a fixed sleep).

    from support.procs import alive, answers, free_port, gone, stop, wait_until

``alive`` counts a zombie as gone: it has ended and only waits for its parent to reap it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import httpx
import psutil

from cantor_desktop.system.net import free_port  # noqa: F401 - the one free_port, for the tests too
from cantor_desktop.system.procs.table import end_child

T = TypeVar("T")


def alive(pid: int | None) -> bool:
    """The process exists and has not ended (a zombie has ended)."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def gone(pid: int | None) -> bool:
    return not alive(pid)


def stop(proc: subprocess.Popen, grace: float = 10.0) -> int | None:
    """End a child this test started and reap it (the app's own ``end_child``)."""
    return end_child(proc, grace=grace)


def answers(url: str, timeout: float = 1.0) -> bool:
    """A node (or anything with /v1/health) answers 200 at ``url``."""
    try:
        return (
            httpx.get(url.rstrip("/") + "/v1/health", timeout=timeout, trust_env=False).status_code
            == 200
        )
    except httpx.HTTPError:
        return False


def wait_until(
    condition: Callable[[], T], what: str, timeout: float = 30.0, every: float = 0.02
) -> T:
    """Poll ``condition`` until it returns something truthy, and return that. ``timeout``
    only stops a test that would otherwise hang: it is not the figure being checked."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
