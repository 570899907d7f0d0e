"""What runs, on every OS, through psutil: liveness, command line, image path, descendants,
ending a process tree (asked first, then forced), finding processes by image and command line.

Nothing here sends a raw signal or reads /proc: ``os.kill(pid, 0)`` is Ctrl-C on Windows
(GenerateConsoleCtrlEvent) and SIGKILL does not exist there. Every function takes ``ps``,
the psutil module by default, so tests run the same code against a fake process table.

On Windows psutil lets some system errors through as a plain ``OSError`` rather than its own
NoSuchProcess/AccessDenied: ``cmdline()`` of a process that is starting or ending raises
WinError 87 (giampaolo/psutil#2519), as ``exe()`` does for every process where Windows'
``NtQuerySystemInformation(SystemProcessIdInformation)`` is missing (Wine before 9.8,
giampaolo/psutil#2492). Such a process is unreadable, not a reason to stop looking at the
others; its image path is then asked of Windows itself (``QueryFullProcessImageNameW``).
"""

from __future__ import annotations

import logging
import os
import sys
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable


log = logging.getLogger(__name__)

POLL = 0.05


def _psutil(ps):
    """psutil, imported when first needed: the app looks at processes only when it stops its
    node, and psutil would stay loaded in its idle window (~2 MiB) all the same."""
    if ps is None:
        import psutil

        return psutil
    return ps


def _process(pid: int, ps):
    """The process ``pid`` or None when there is none (or only a zombie of it)."""
    try:
        proc = ps.Process(pid)
        if proc.status() == ps.STATUS_ZOMBIE:
            return None
        return proc
    except ps.NoSuchProcess:  # psutil.ZombieProcess is one too
        return None


def alive(pid: int | None, *, ps=None) -> bool:
    """True while ``pid`` runs; a zombie waiting to be reaped counts as ended."""
    if not pid or pid <= 0:
        return False
    ps = _psutil(ps)
    try:
        return _process(pid, ps) is not None
    except ps.AccessDenied:  # someone else's process: it runs
        return True


def command_line(pid: int, *, ps=None) -> list[str] | None:
    """The argument list of ``pid``, or None when it is gone or not ours to read."""
    ps = _psutil(ps)
    try:
        proc = _process(pid, ps)
        return list(proc.cmdline()) if proc is not None else None
    except (ps.NoSuchProcess, ps.AccessDenied):
        return None
    except OSError as exc:  # psutil#2519: a process starting or ending (Windows)
        log.debug("cannot read the command line of process %d: %s", pid, exc)
        return None


def image_path(pid: int, *, ps=None, k32=None) -> str | None:
    """The executable file of ``pid`` (its image), or None. ``k32``: the kernel32 to ask
    when psutil fails with a plain OSError (Windows' own; a fake in tests)."""
    ps = _psutil(ps)
    try:
        proc = _process(pid, ps)
        return (proc.exe() or None) if proc is not None else None
    except (ps.NoSuchProcess, ps.AccessDenied):
        return None
    except OSError as exc:
        return _image_path_from_windows(pid, exc, k32)


def _image_path_from_windows(pid: int, exc: OSError, k32=None) -> str | None:
    """psutil could not name the image of ``pid`` (see the module's doc): ask Windows."""
    if k32 is None and sys.platform != "win32":
        log.debug("cannot read the image path of process %d: %s", pid, exc)
        return None
    from . import windows

    return windows.image_path(pid, k32)


def _read(proc, what: str, ps, default=None, k32=None):
    """One attribute of a listed process, or ``default`` when it cannot be read."""
    try:
        return getattr(proc, what)()
    except (ps.NoSuchProcess, ps.AccessDenied):
        return default
    except OSError as exc:
        if what == "exe":
            return _image_path_from_windows(proc.pid, exc, k32)
        log.debug("cannot read %s of process %d: %s", what, proc.pid, exc)
        return default


def descendants(pid: int, *, ps=None) -> list[int]:
    """Children, grandchildren … of ``pid``, found now (once a parent is gone its children
    belong to someone else, so gather a tree before ending any of it)."""
    ps = _psutil(ps)
    try:
        proc = _process(pid, ps)
        return [c.pid for c in proc.children(recursive=True)] if proc is not None else []
    except (ps.NoSuchProcess, ps.AccessDenied):
        return []
    except OSError as exc:
        log.debug("cannot list the children of process %d: %s", pid, exc)
        return []


def same_path(a: str | os.PathLike | None, b: str | os.PathLike | None) -> bool:
    """Two paths name the same file (case-insensitively where the OS is)."""
    if not a or not b:
        return False
    return _canonical(a) == _canonical(b)


def _canonical(path: str | os.PathLike) -> str:
    """Absolute, links resolved (macOS's /var is /private/var), case folded on Windows."""
    return os.path.normcase(os.path.realpath(os.fspath(path)))


def path_under(path: str | os.PathLike | None, folder: str | os.PathLike) -> bool:
    if not path:
        return False
    p, f = _canonical(path), _canonical(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def end(pids: Iterable[int], *, grace: float = 3.0, ps=None) -> list[int]:
    """End these processes: ask each to stop (SIGTERM on POSIX; on Windows a windowless
    process has no such request, so this is TerminateProcess), wait up to ``grace`` s, then
    kill the ones left. Returns the pids that were running. A pid reused by another program
    since it was looked up is never touched (psutil checks the process's start time)."""
    ps = _psutil(ps)
    procs = []
    for pid in dict.fromkeys(pids):
        if pid == os.getpid():
            continue
        try:
            proc = _process(pid, ps)
            if proc is None:
                continue
            proc.terminate()
            procs.append(proc)
        except ps.NoSuchProcess:
            continue
        except ps.AccessDenied:
            log.warning("not allowed to end process %d", pid)
    _wait_gone(procs, grace, ps)
    for proc in procs:
        if alive(proc.pid, ps=ps):
            log.warning("process %d did not stop within %g s; killing it", proc.pid, grace)
            try:
                proc.kill()
            except (ps.NoSuchProcess, ps.AccessDenied):
                pass
    _wait_gone(procs, 2.0, ps)
    return [p.pid for p in procs]


def end_child(proc: subprocess.Popen, *, grace: float = 3.0) -> int | None:
    """End a child this process started (asked, then killed after ``grace`` s, as
    :func:`end` does) and reap it; its exit code."""
    if proc.poll() is None:
        end([proc.pid], grace=grace)
    return proc.wait()


def end_tree(pid: int, *, grace: float = 3.0, ps=None) -> list[int]:
    """End ``pid`` and all its descendants (gathered before anything is ended)."""
    return end([pid, *descendants(pid, ps=ps)], grace=grace, ps=ps)


def _wait_gone(procs, timeout: float, ps) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(p.pid, ps=ps) for p in procs) and time.monotonic() < deadline:
        time.sleep(POLL)


@dataclass
class Found:
    """A running process as :func:`find` saw it."""

    pid: int
    exe: str | None
    cmdline: list[str] = field(default_factory=list)
    ppid: int | None = None

    def argument_after(self, flag: str) -> str | None:
        """The value given to ``flag`` on its command line (``--models DIR``)."""
        for i, arg in enumerate(self.cmdline[:-1]):
            if arg == flag:
                return self.cmdline[i + 1]
        for arg in self.cmdline:
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
        return None


def find(match: Callable[[Found], bool], *, ps=None, k32=None) -> list[Found]:
    """Every running process (readable by us) for which ``match`` is true. Each attribute is
    read on its own: a process psutil cannot read (see the module's doc) is seen with what
    could be read, and never ends the search."""
    ps = _psutil(ps)
    found = []
    for proc in ps.process_iter():
        if proc.pid == os.getpid() or _read(proc, "status", ps) == ps.STATUS_ZOMBIE:
            continue
        item = Found(
            pid=proc.pid,
            exe=_read(proc, "exe", ps, k32=k32) or None,
            cmdline=list(_read(proc, "cmdline", ps) or []),
            ppid=_read(proc, "ppid", ps),
        )
        try:
            if match(item):
                found.append(item)
        except Exception:  # noqa: BLE001 - one odd process must not stop the search
            log.debug("matching process %s failed", item.pid, exc_info=True)
    return found
