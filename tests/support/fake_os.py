"""A pretend operating system for the Windows and macOS branches of cantor_desktop.system.procs.

One process table behind two faces: ``psutil`` (Process, process_iter, the exceptions) and
``kernel32`` (job objects, handles, error mode, DLL directory), modelled on what the
Win32 documentation says: job membership is inherited by children started after it; a job
with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE ends its processes when its last handle closes; a
process's handles close when it exits; error mode and DLL directory are inherited.

It is a copy of our reading of those documents, so the tests built on it check that Cantor
makes the right calls in the right order — what only a run on Windows can confirm is listed
in packaging/README.md.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from cantor_desktop.system.procs import windows

CURRENT_PROCESS = -1  # GetCurrentProcess()'s pseudo handle


@dataclass
class Proc:
    pid: int
    exe: str
    cmdline: list[str]
    ppid: int
    alive: bool = True
    ignores_term: bool = False
    jobs: set = field(default_factory=set)
    handles: dict = field(default_factory=dict)
    error_mode: int = 0
    dll_directory: str | None = None
    how_ended: str = ""
    unreadable: tuple[str, ...] = ()
    """What psutil cannot read of it: a plain OSError (WinError 87), as psutil lets through
    for a process starting or ending, and for exe() where NtQuerySystemInformation lacks
    SystemProcessIdInformation (Wine before 9.8)."""


@dataclass
class Job:
    id: int
    flags: int = 0
    members: set = field(default_factory=set)
    handles: int = 0


class NoSuchProcess(Exception):
    def __init__(self, pid):
        super().__init__(f"no process {pid}")
        self.pid = pid


class ZombieProcess(NoSuchProcess):
    pass


class AccessDenied(Exception):
    pass


class FakeOS:
    def __init__(self, me: int = 7_000_000):  # above any real pid (Linux pid_max ≤ 2^22)
        self.procs: dict[int, Proc] = {}
        self.jobs: dict[int, Job] = {}
        self._next_pid = me + 1
        self._next_handle = 100
        self.me = me
        self.procs[me] = Proc(
            me, r"C:\Program Files\Cantor\cantor-desktop.exe", ["cantor-desktop.exe"], ppid=4
        )
        self.psutil = _Psutil(self)
        self.kernel32 = _Kernel32(self)

    # -- the world ---------------------------------------------------------------------------
    def spawn(
        self,
        parent: int,
        exe: str,
        cmdline: list[str],
        *,
        pid: int | None = None,
        ignores_term: bool = False,
    ) -> int:
        """CreateProcess: the child inherits its parent's jobs, error mode, DLL directory."""
        pid = pid or self._next_pid
        self._next_pid = max(self._next_pid, pid) + 1
        p = self.procs.get(parent)
        child = Proc(pid, exe, list(cmdline), ppid=parent, ignores_term=ignores_term)
        if p is not None and p.alive:
            child.jobs = set(p.jobs)
            child.error_mode = p.error_mode
            child.dll_directory = p.dll_directory
            for job in child.jobs:
                self.jobs[job].members.add(pid)
        self.procs[pid] = child
        return pid

    def exit(self, pid: int, how: str = "exited") -> None:
        """The process ends (or is killed): its handles close, which may end a job."""
        proc = self.procs.get(pid)
        if proc is None or not proc.alive:
            return
        proc.alive = False
        proc.how_ended = how
        for handle in list(proc.handles):
            self._close(proc, handle)

    def running(self) -> set[int]:
        return {pid for pid, p in self.procs.items() if p.alive}

    # -- handles -----------------------------------------------------------------------------
    def _new_handle(self, owner: Proc, kind: str, target) -> int:
        self._next_handle += 4
        owner.handles[self._next_handle] = (kind, target)
        if kind == "job":
            self.jobs[target].handles += 1
        return self._next_handle

    def _close(self, owner: Proc, handle: int) -> bool:
        item = owner.handles.pop(handle, None)
        if item is None:
            return False
        kind, target = item
        if kind == "job":
            job = self.jobs[target]
            job.handles -= 1
            if job.handles == 0 and job.flags & windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE:
                for member in sorted(job.members):
                    self.exit(member, "killed with its job")
        return True


class _Kernel32:
    """kernel32 as seen from the process ``os.me`` (the process running Cantor's code)."""

    def __init__(self, os_: FakeOS):
        self.os = os_
        self.calls: list[tuple] = []

    @property
    def _me(self) -> Proc:
        return self.os.procs[self.os.me]

    def CreateJobObjectW(self, attributes, name):  # noqa: N802 - Win32 names
        self.calls.append(("CreateJobObjectW",))
        job = Job(id=len(self.os.jobs) + 1)
        self.os.jobs[job.id] = job
        return self.os._new_handle(self._me, "job", job.id)

    def SetInformationJobObject(self, handle, klass, info, size):  # noqa: N802
        self.calls.append(("SetInformationJobObject", klass))
        kind, job_id = self._me.handles.get(handle, (None, None))
        if kind != "job" or klass != windows.JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS:
            return 0
        if size != ctypes.sizeof(windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION):
            return 0
        data = ctypes.cast(info, ctypes.POINTER(windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION))
        self.os.jobs[job_id].flags = data.contents.BasicLimitInformation.LimitFlags
        return 1

    def OpenProcess(self, access, inherit, pid):  # noqa: N802
        self.calls.append(("OpenProcess", pid))
        proc = self.os.procs.get(pid)
        rights = windows.PROCESS_SET_QUOTA | windows.PROCESS_QUERY_LIMITED_INFORMATION
        if proc is None or not proc.alive or not access & rights:
            return 0
        return self.os._new_handle(self._me, "process", pid)

    def QueryFullProcessImageNameW(self, handle, flags, buf, size):  # noqa: N802
        kind, pid = self._me.handles.get(handle, (None, None))
        if kind != "process" or not self.os.procs[pid].alive:
            return 0
        buf.value = self.os.procs[pid].exe
        return 1

    def GetCurrentProcess(self):  # noqa: N802
        return CURRENT_PROCESS

    def AssignProcessToJobObject(self, job_handle, proc_handle):  # noqa: N802
        self.calls.append(("AssignProcessToJobObject",))
        kind, job_id = self._me.handles.get(job_handle, (None, None))
        if proc_handle == CURRENT_PROCESS:
            pid = self.os.me
        else:
            pkind, pid = self._me.handles.get(proc_handle, (None, None))
            if pkind != "process":
                return 0
        if kind != "job":
            return 0
        self.os.jobs[job_id].members.add(pid)
        self.os.procs[pid].jobs.add(job_id)
        return 1

    def CloseHandle(self, handle):  # noqa: N802
        return int(self.os._close(self._me, handle))

    def GetErrorMode(self):  # noqa: N802
        return self._me.error_mode

    def SetErrorMode(self, mode):  # noqa: N802
        old, self._me.error_mode = self._me.error_mode, mode
        return old

    def GetDllDirectoryW(self, size, buf):  # noqa: N802
        value = self._me.dll_directory or ""
        if len(value) + 1 > size:
            return len(value) + 1
        buf.value = value
        return len(value)

    def SetDllDirectoryW(self, path):  # noqa: N802
        self.calls.append(("SetDllDirectoryW", path))
        self._me.dll_directory = path
        return 1


class _Process:
    def __init__(self, os_: FakeOS, pid: int):
        proc = os_.procs.get(pid)
        if proc is None or not proc.alive:
            raise NoSuchProcess(pid)
        self._os, self.pid = os_, pid

    @property
    def _p(self) -> Proc:
        proc = self._os.procs[self.pid]
        if not proc.alive:
            raise NoSuchProcess(self.pid)
        return proc

    def status(self):
        return "running" if self._p.alive else "zombie"

    def _readable(self, what: str) -> Proc:
        proc = self._p
        if what in proc.unreadable:
            raise OSError(22, "Invalid parameter", None, 87)
        return proc

    def cmdline(self):
        return list(self._readable("cmdline").cmdline)

    def exe(self):
        return self._readable("exe").exe

    def ppid(self):
        return self._p.ppid

    def children(self, recursive=False):
        out, todo = [], [self.pid]
        while todo:
            parent = todo.pop()
            for p in self._os.procs.values():
                if p.alive and p.ppid == parent:
                    out.append(_Process(self._os, p.pid))
                    if recursive:
                        todo.append(p.pid)
        return out

    def terminate(self):
        # Windows has no "please stop" for a windowless process: TerminateProcess
        proc = self._p
        if proc.ignores_term:
            return
        self._os.exit(self.pid, "terminated")

    def kill(self):
        _ = self._p  # NoSuchProcess for a process gone, as psutil's kill raises
        self._os.exit(self.pid, "killed")


class _Psutil:
    STATUS_ZOMBIE = "zombie"
    NoSuchProcess = NoSuchProcess
    ZombieProcess = ZombieProcess
    AccessDenied = AccessDenied

    def __init__(self, os_: FakeOS):
        self._os = os_

    def Process(self, pid):  # noqa: N802 - psutil's name
        return _Process(self._os, pid)

    def process_iter(self, attrs=None):
        for pid, p in list(self._os.procs.items()):
            if not p.alive:
                continue
            item = _Process(self._os, pid)
            item.info = {
                "pid": pid,
                "exe": p.exe,
                "cmdline": list(p.cmdline),
                "ppid": p.ppid,
                "status": "running",
            }
            yield item
