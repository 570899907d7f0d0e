"""The Windows calls process life needs, through ctypes on an injectable ``kernel32``.

- A **Job Object with kill-on-close**: a process put in one takes every process it starts
  afterwards with it (job membership is inherited); when the last handle to the job closes
  — its owner exited, however it exited — Windows ends every process still in it. The node
  puts itself in one, so its engines, trial loads and probes never outlive it; the app puts
  its node in one.
- **No error dialogs**: the error mode (SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX) is
  inherited by children, so a missing DLL or a crash in an engine ends it with a status code
  instead of a modal box that blocks a trial load forever.
- **The default DLL search path** for children: PyInstaller's bootloader calls
  ``SetDllDirectoryW(_MEIPASS)``, which child processes inherit, so an engine would load our
  bundle's runtime DLLs instead of its own. It is reset (``SetDllDirectoryW(NULL)``) once,
  and ``_MEIPASS`` added with ``os.add_dll_directory`` (per process, not inherited), which is
  what Python's own extension and ctypes loading search.

Tests pass a fake kernel32 that models handles, jobs and a process table.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)

CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
SEM_FAILCRITICALERRORS = 0x0001
SEM_NOGPFAULTERRORBOX = 0x0002
SEM_NOOPENFILEERRORBOX = 0x8000
QUIET_ERROR_MODE = SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000


class IO_COUNTERS(ctypes.Structure):  # noqa: N801 - Windows' name
    _fields_ = [
        (name, ctypes.c_ulonglong)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


def load_kernel32() -> Any:
    """The real kernel32 with the signatures used here (Windows only)."""
    if sys.platform != "win32":
        raise OSError("kernel32 is Windows' own")
    from ctypes import wintypes

    k = ctypes.WinDLL("kernel32", use_last_error=True)
    sig = {
        "CreateJobObjectW": (wintypes.HANDLE, [wintypes.LPVOID, wintypes.LPCWSTR]),
        "SetInformationJobObject": (
            wintypes.BOOL,
            [wintypes.HANDLE, ctypes.c_int, wintypes.LPVOID, wintypes.DWORD],
        ),
        "AssignProcessToJobObject": (wintypes.BOOL, [wintypes.HANDLE, wintypes.HANDLE]),
        "OpenProcess": (wintypes.HANDLE, [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]),
        "CloseHandle": (wintypes.BOOL, [wintypes.HANDLE]),
        "GetCurrentProcess": (wintypes.HANDLE, []),
        "GetErrorMode": (wintypes.UINT, []),
        "SetErrorMode": (wintypes.UINT, [wintypes.UINT]),
        "GetDllDirectoryW": (wintypes.DWORD, [wintypes.DWORD, wintypes.LPWSTR]),
        "SetDllDirectoryW": (wintypes.BOOL, [wintypes.LPCWSTR]),
        "QueryFullProcessImageNameW": (
            wintypes.BOOL,
            [wintypes.HANDLE, wintypes.DWORD, wintypes.LPWSTR, ctypes.POINTER(wintypes.DWORD)],
        ),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(k, name)
        fn.restype, fn.argtypes = restype, argtypes
    return k


_KERNEL32: Any = None


def kernel32() -> Any:
    global _KERNEL32
    if _KERNEL32 is None:
        _KERNEL32 = load_kernel32()
    return _KERNEL32


def _last_error() -> int:
    get = getattr(ctypes, "get_last_error", None)
    return get() if get is not None else 0


class Job:
    """A Job Object whose processes end when its last handle closes (kill-on-close)."""

    def __init__(self, k32: Any = None):
        self.k32 = k32 if k32 is not None else kernel32()
        self.handle = self.k32.CreateJobObjectW(None, None)
        if not self.handle:
            raise OSError(f"CreateJobObjectW failed (error {_last_error()})")
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        ok = self.k32.SetInformationJobObject(
            self.handle,
            JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
            ctypes.byref(info),
            ctypes.sizeof(info),
        )
        if not ok:
            error = _last_error()
            self.close()
            raise OSError(f"SetInformationJobObject failed (error {error})")

    def assign(self, pid: int) -> bool:
        """Put process ``pid`` in the job (and with it every process it starts later)."""
        handle = self.k32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not handle:
            log.warning(
                "cannot open process %d to tie it to its owner (error %d)", pid, _last_error()
            )
            return False
        try:
            return self._assign_handle(handle, f"process {pid}")
        finally:
            self.k32.CloseHandle(handle)

    def assign_current(self) -> bool:
        """Put this process in the job: everything it starts from now on is in it too."""
        return self._assign_handle(self.k32.GetCurrentProcess(), "this process")

    def _assign_handle(self, handle, what: str) -> bool:
        if self.k32.AssignProcessToJobObject(self.handle, handle):
            return True
        log.warning(
            "cannot put %s in a job object (error %d); its children may outlive it",
            what,
            _last_error(),
        )
        return False

    def close(self) -> None:
        """Close our handle: with no other handle left, every process in the job ends."""
        if self.handle:
            self.k32.CloseHandle(self.handle)
            self.handle = None


def image_path(pid: int, k32: Any = None) -> str | None:
    """The executable file of process ``pid`` as Windows names it
    (``QueryFullProcessImageNameW``, which needs only limited query rights), or None."""
    k32 = k32 if k32 is not None else kernel32()
    handle = k32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return None
    try:
        size = ctypes.c_uint32(32768)
        buf = ctypes.create_unicode_buffer(size.value)
        if not k32.QueryFullProcessImageNameW(handle, 0, buf, ctypes.byref(size)):
            return None
        return buf.value or None
    finally:
        k32.CloseHandle(handle)


_own_job: Job | None = None
_own_lock = threading.Lock()


def tie_children_to_me(k32: Any = None) -> bool:
    """Put this process in a kill-on-close job held only by itself: every child it starts
    afterwards (engines, trial loads, probes) ends when it ends, even when it is killed.
    Once per process; False when Windows refused (the node's leftovers check remains)."""
    global _own_job
    with _own_lock:
        if _own_job is not None:
            return True
        try:
            job = Job(k32)
        except OSError as exc:
            log.warning("no job object for this process's children: %s", exc)
            return False
        if not job.assign_current():
            job.close()
            return False
        _own_job = job  # never closed: the handle goes when this process does
        return True


def quiet_error_mode(k32: Any = None) -> int:
    """No "DLL not found" or crash dialog from this process or the children it starts
    (they inherit the mode). Returns the mode now in force."""
    k32 = k32 if k32 is not None else kernel32()
    mode = k32.GetErrorMode() | QUIET_ERROR_MODE
    k32.SetErrorMode(mode)
    return mode


def default_dll_search(
    k32: Any = None,
    meipass: str | None = None,
    add_dll_directory: Callable[[str], Any] | None = None,
) -> bool:
    """Undo PyInstaller's ``SetDllDirectoryW(_MEIPASS)`` so children get the default DLL
    search path; keep ``_MEIPASS`` for this process's own loading (``os.add_dll_directory``).
    Returns True when the DLL directory was reset."""
    meipass = meipass if meipass is not None else getattr(sys, "_MEIPASS", None)
    if not meipass:
        return False
    k32 = k32 if k32 is not None else kernel32()
    buf = ctypes.create_unicode_buffer(32768)
    n = k32.GetDllDirectoryW(len(buf), buf)
    current = buf.value if n else ""
    import ntpath

    if not current or ntpath.normcase(ntpath.normpath(current)) != ntpath.normcase(
        ntpath.normpath(meipass)
    ):
        return False
    add = add_dll_directory or getattr(os, "add_dll_directory", None)
    if add is not None:
        try:
            _KEEP.append(add(meipass))
        except OSError as exc:
            log.warning("cannot add %s to this process's DLL directories: %s", meipass, exc)
    k32.SetDllDirectoryW(None)
    return True


_KEEP: list[Any] = []  # add_dll_directory cookies: the directory stays while they live


def clean_path(path: str, meipass: str | None = None) -> str:
    """PATH without the bundle's folders (``_internal`` and below): an engine must find its
    own DLLs and the system's, never our bundle's."""
    import ntpath  # Windows paths, whatever OS reads them (the tests run on Linux)

    meipass = meipass if meipass is not None else getattr(sys, "_MEIPASS", None)
    if not meipass or not path:
        return path
    bundle = ntpath.normcase(ntpath.normpath(meipass)).rstrip("\\")

    def inside(entry: str) -> bool:
        entry = ntpath.normcase(ntpath.normpath(entry.strip('"')))
        return entry == bundle or entry.startswith(bundle + "\\")

    return ";".join(p for p in path.split(";") if p and not inside(p))
