"""Tying a child to its owner on POSIX: Linux's parent-death signal, and a pipe the child
watches (the only tie macOS has).

The owner makes one pipe per process and keeps its write end, which no child inherits
(file descriptors are close-on-exec by default). Each child gets the read end and its number
in ``CANTOR_OWNER_FD``. However the owner ends — quit, crash, ``kill -9`` — the kernel closes
the write end and every child's read returns end-of-file at once: the child then stops
itself gracefully (SIGTERM to itself, the way a terminal's Ctrl-C would), and if that has
not finished after a grace period it ends its own children and exits.

Only Cantor's own processes (the node, the sketch engine) can watch; a third-party engine
cannot, so on Linux every child also gets the parent-death signal, and on macOS an engine
is ended by its node (its graceful stop, or the leftovers check at the node's next start).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import stat
import sys
import threading
import time
from typing import Callable, MutableMapping

log = logging.getLogger(__name__)

OWNER_FD_ENV = "CANTOR_OWNER_FD"
PR_SET_PDEATHSIG = 1

_lock = threading.Lock()
_pipe: tuple[int, int, int] | None = None  # (pid that made it, read end, write end)


def owner_fd() -> int | None:
    """The read end of this process's owner pipe, made on first use (None on Windows)."""
    global _pipe
    if sys.platform == "win32":
        return None
    with _lock:
        if _pipe is None or _pipe[0] != os.getpid():  # a forked copy makes its own
            read, write = os.pipe()  # both close-on-exec
            _pipe = (os.getpid(), read, write)
        return _pipe[1]


def _die_with_parent_hook(sig: str = "SIGTERM") -> Callable[[], None] | None:
    """A pre-exec hook asking Linux for the signal named ``sig`` when the parent thread dies
    (named: Windows has no SIGKILL, and this module is imported there too). prctl is
    resolved here, in the parent, so the forked child makes only one system call; from this
    process's own C library (``CDLL(None)``): no library search, which on Linux runs
    ``ldconfig -p`` as a subprocess at every start of the app and the node."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    number = int(getattr(signal, sig))

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, number, 0, 0, 0)

    return hook


DIE_WITH_PARENT = _die_with_parent_hook()
KILLED_WITH_PARENT = _die_with_parent_hook("SIGKILL")
"""For an engine: its graceful stop (SIGTERM) finishes the job it runs, for an owner that is
gone and will never take the result."""


def watch_owner(
    on_gone: Callable[[], None] | None = None,
    *,
    grace: float = 15.0,
    env: MutableMapping[str, str] | None = None,
) -> bool:
    """In a child: stop when the owner's pipe (``CANTOR_OWNER_FD``) closes.

    ``on_gone()`` runs in a watcher thread (default: SIGTERM to this process, which takes
    its graceful path); after ``grace`` s more the process ends its children and exits 1.
    The variable is removed from the environment so nothing started later misreads it.
    Returns True when a watch is set up."""
    env = os.environ if env is None else env
    raw = env.pop(OWNER_FD_ENV, None)
    if raw is None or sys.platform == "win32":
        return False
    try:
        fd = int(raw)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        log.warning(
            "%s=%r is not a pipe this process holds; not watching its owner", OWNER_FD_ENV, raw
        )
        return False

    def watch() -> None:
        try:
            while os.read(fd, 4096):  # the owner never writes: only end-of-file comes
                pass
        except OSError:
            pass
        log.warning("the process that started this one has ended; stopping")
        try:
            (on_gone or _stop_self)()
        except Exception:  # noqa: BLE001
            log.exception("stopping after the owner ended")
        time.sleep(grace)
        log.error("still running %g s after the owner ended; ending now", grace)
        from .table import end_tree

        try:
            end_tree(os.getpid(), grace=1.0)
        finally:
            os._exit(1)

    global _watched_fd
    _watched_fd = fd
    threading.Thread(target=watch, name="owner-watch", daemon=True).start()
    return True


_watched_fd: int | None = None


def keep_across_exec() -> None:
    """Before ``os.execv``: hand the owner pipe being watched on to the new program image
    (the descriptor survives exec and its number is back in the environment)."""
    if _watched_fd is None:
        return
    try:
        os.set_inheritable(_watched_fd, True)
        os.environ[OWNER_FD_ENV] = str(_watched_fd)
    except OSError:
        pass


def _stop_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
