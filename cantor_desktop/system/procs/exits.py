"""How a process ended, in words a person can act on, and the "restart me" exit code.

On POSIX a negative return code is the signal that ended the process. On Windows a crash
ends a process with an NTSTATUS code (0xC0000135 …) that means nothing as a bare decimal
number, so the common ones are named with what usually causes them.
"""

from __future__ import annotations

import re
import signal

RESTART_EXIT_CODE = 75
"""A node started by a parent that supervises it (the app) exits with this code when it
should be started again (``cantor upgrade``); the parent starts it at once, as no crash."""

KILLED = -9
"""The return code of a process ended by SIGKILL (POSIX's signal 9; Windows has no such
signal, so none of its processes ends with this code)."""

SUPERVISED_ENV = "CANTOR_NODE_SUPERVISED"
"""Set by a parent that understands :data:`RESTART_EXIT_CODE`."""

NTSTATUS: dict[int, tuple[str, str]] = {
    0xC0000135: ("STATUS_DLL_NOT_FOUND", "a DLL the program needs was not found"),
    0xC0000139: (
        "STATUS_ENTRYPOINT_NOT_FOUND",
        "a DLL it loaded is the wrong version (an entry point is missing)",
    ),
    0xC0000142: ("STATUS_DLL_INIT_FAILED", "a DLL failed to initialise"),
    0xC000007B: (
        "STATUS_INVALID_IMAGE_FORMAT",
        "a DLL is for another architecture, 32- and 64-bit mixed",
    ),
    0xC0000005: ("STATUS_ACCESS_VIOLATION", "it crashed touching memory it does not own"),
    0xC000001D: (
        "STATUS_ILLEGAL_INSTRUCTION",
        "this CPU lacks an instruction the build uses, such as AVX2",
    ),
    0xC0000096: ("STATUS_PRIVILEGED_INSTRUCTION", "it crashed on a privileged instruction"),
    0xC00000FD: ("STATUS_STACK_OVERFLOW", "its stack overflowed"),
    0xC0000409: ("STATUS_STACK_BUFFER_OVERRUN", "it stopped itself after a fatal error"),
    0xC0000417: ("STATUS_INVALID_CRUNTIME_PARAMETER", "the C runtime stopped it"),
    0xC0000017: ("STATUS_NO_MEMORY", "it ran out of memory"),
    0xC0000094: ("STATUS_INTEGER_DIVIDE_BY_ZERO", "it crashed dividing by zero"),
    0xC000013A: ("STATUS_CONTROL_C_EXIT", "it was stopped with Ctrl-C or closed"),
    0xC0000374: ("STATUS_HEAP_CORRUPTION", "its memory heap was corrupted"),
}


def ntstatus(code: int) -> int | None:
    """The NTSTATUS value of a Windows exit code (given signed or unsigned), else None."""
    if code is None or -256 < code < 0x100:
        return None
    unsigned = code & 0xFFFFFFFF
    return unsigned if unsigned >= 0xC0000000 else None


def describe_exit(code: int | None) -> str:
    """ "exit code 1" / "killed by signal 9 (SIGKILL)" /
    "exit code 0xC0000135 (STATUS_DLL_NOT_FOUND: a DLL the program needs was not found)"."""
    if code is None:
        return "still running"
    text = code_text(code)
    return f"killed by {text}" if text.startswith("signal") else f"exit code {text[5:]}"


_BARE_EXIT = re.compile(r"exit code -?\d+|killed by signal \d+ \([\w ]+\)|still running")


def is_bare_exit(text: str) -> bool:
    """Whether ``text`` says only how a process ended, as :func:`describe_exit` words it
    ("exit code 1", "killed by signal 9 (SIGKILL)"), and nothing of why; a Windows status
    with its meaning names a cause."""
    return _BARE_EXIT.fullmatch(text.strip()) is not None


def code_text(code: int) -> str:
    """ "code 1" / "signal 9 (SIGKILL)" / "code 0xC0000135 (STATUS_DLL_NOT_FOUND: …)"."""
    status = ntstatus(code)
    if status is not None:
        name, meaning = NTSTATUS.get(status, ("", ""))
        if name:
            return f"code 0x{status:08X} ({name}: {meaning})"
        return f"code 0x{status:08X} (a Windows error status)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"signal {-code} ({name})"
    return f"code {code}"
