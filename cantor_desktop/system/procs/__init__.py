"""Process life on every OS: the one place that starts, ties, watches, stops and finds
Cantor's child processes.

- :mod:`.table`    what runs, through psutil: alive, command line, image path, descendants;
                   ending a tree (asked, then forced); finding processes by image and
                   command line. No /proc, no ``os.kill(pid, 0)``, no raw signals.
- :mod:`.spawn`    how a child starts: windowless, in its own group, tied to its owner.
- :mod:`.owner`    the tie on POSIX: Linux's parent-death signal and a pipe the child watches.
- :mod:`.windows`  Job Objects with kill-on-close, error mode, DLL search path, AppMutex.
- :mod:`.macos`    quarantine and Rosetta.
- :mod:`.priority` the node the app starts runs (with its engines) below normal priority.
- :mod:`.exits`    how a process ended, in words (NTSTATUS names); the "restart me" code.

The OS-specific calls take injectable stand-ins (``ps`` for psutil, ``kernel32``, ``run``),
so the Windows and macOS branches run in the Linux test suite against fakes.
"""

from . import macos, windows
from .exits import RESTART_EXIT_CODE, SUPERVISED_ENV, code_text, describe_exit
from .owner import OWNER_FD_ENV, watch_owner
from .priority import follow as follow_priority
from .priority import run_in_background
from .spawn import child_environment, child_kwargs, node_kwargs, probe_kwargs, tie_child
from .table import (
    Found,
    alive,
    command_line,
    descendants,
    end,
    end_tree,
    find,
    image_path,
    path_under,
    same_path,
)

__all__ = [
    "macos",
    "windows",
    "RESTART_EXIT_CODE",
    "code_text",
    "SUPERVISED_ENV",
    "OWNER_FD_ENV",
    "follow_priority",
    "run_in_background",
    "Found",
    "alive",
    "child_environment",
    "child_kwargs",
    "command_line",
    "describe_exit",
    "descendants",
    "end",
    "end_tree",
    "find",
    "image_path",
    "path_under",
    "node_kwargs",
    "probe_kwargs",
    "same_path",
    "tie_child",
    "watch_owner",
]
