"""How Cantor starts a child: windowless, in its own group, tied to its owner.

``child_kwargs()`` are keyword arguments for ``subprocess.Popen`` and
``asyncio.create_subprocess_exec``; ``child_environment(env)`` completes the environment
that goes with them. Together:

============  =====================================================================
Windows       CREATE_NO_WINDOW (no console window, ever) | CREATE_NEW_PROCESS_GROUP;
              the starting process sits in its own kill-on-close Job Object, which its
              children inherit; error dialogs off and PyInstaller's DLL directory reset
              (both inherited); PATH without the bundle's folders.
Linux         a new session (a Ctrl-C meant for the owner does not cut a song in half);
              the parent-death signal (SIGTERM); the owner pipe.
macOS         a new session; the owner pipe (Cantor's own children watch it).
============  =====================================================================

``probe_kwargs()`` is for short tools (nvidia-smi, vulkaninfo): only the window flag.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from . import owner, windows

log = logging.getLogger(__name__)

_prepared = False
_prepare_lock = threading.Lock()


def _prepare_windows(k32: Any = None) -> None:
    """Once per process, before its first child: tie children to it, no error boxes, the
    default DLL search path."""
    global _prepared
    with _prepare_lock:
        if _prepared and k32 is None:
            return
        for step in (
            windows.tie_children_to_me,
            windows.quiet_error_mode,
            windows.default_dll_search,
        ):
            try:
                step(k32)
            except Exception:  # noqa: BLE001 - a refused call must not stop the child
                log.warning("%s failed", step.__name__, exc_info=True)
        if k32 is None:
            _prepared = True


def child_kwargs(
    *,
    os_name: str | None = None,
    kernel32: Any = None,
    owner_pipe: bool = True,
    killed_with_owner: bool = False,
) -> dict[str, Any]:
    """Popen keyword arguments for a long-lived child (an engine, a trial load, the node).
    On Linux the child is asked to stop (SIGTERM) when its owner dies, or with
    ``killed_with_owner`` killed outright (an engine, whose graceful stop would finish the
    running job first); on Windows the Job Object ends it either way."""
    if (os_name or os.name) == "nt":
        _prepare_windows(kernel32)
        return {"creationflags": windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP}
    kwargs: dict[str, Any] = {"start_new_session": True}
    hook = owner.KILLED_WITH_PARENT if killed_with_owner else owner.DIE_WITH_PARENT
    if hook is not None:
        kwargs["preexec_fn"] = hook
    fd = owner.owner_fd() if owner_pipe else None
    if fd is not None:
        kwargs["pass_fds"] = (fd,)
    return kwargs


def child_environment(
    env: dict[str, str], *, os_name: str | None = None, owner_pipe: bool = True
) -> dict[str, str]:
    """``env`` completed for a child started with :func:`child_kwargs` (changed in place and
    returned): the owner pipe's number on POSIX; on Windows PATH without the bundle."""
    env.pop(owner.OWNER_FD_ENV, None)  # never a number inherited from our own owner
    if (os_name or os.name) == "nt":
        for key in [k for k in env if k.upper() == "PATH"]:
            env[key] = windows.clean_path(env[key])
        return env
    fd = owner.owner_fd() if owner_pipe else None
    if fd is not None:
        env[owner.OWNER_FD_ENV] = str(fd)
    return env


def node_kwargs(*, os_name: str | None = None) -> dict[str, Any]:
    """Popen keyword arguments for the node the app (or ``cantor sing``) starts: as
    :func:`child_kwargs` on POSIX; on Windows only the window and group flags, the tie being
    :func:`tie_child` once it runs — the app itself stays out of any job, so a program it
    opens for the user (a player, Explorer) does not end when Cantor quits."""
    if (os_name or os.name) == "nt":
        return {"creationflags": windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP}
    return child_kwargs(os_name=os_name)


_children_job: "windows.Job | None" = None


def tie_child(pid: int, *, os_name: str | None = None, kernel32: Any = None) -> bool:
    """Windows: put a child started with :func:`node_kwargs` in a kill-on-close job this
    process holds (made on first use), so it ends when this process ends, however it ends.
    Elsewhere the tie was made at start: True."""
    global _children_job
    if (os_name or os.name) != "nt":
        return True
    with _prepare_lock:
        if _children_job is None or kernel32 is not None:
            try:
                _children_job = windows.Job(kernel32)
            except OSError as exc:
                log.warning("no job object to tie process %d to: %s", pid, exc)
                return False
        return _children_job.assign(pid)


def probe_kwargs(*, os_name: str | None = None) -> dict[str, Any]:
    """For a short tool run and waited for: no console window flashing up on Windows."""
    if (os_name or os.name) == "nt":
        return {"creationflags": windows.CREATE_NO_WINDOW}
    return {}
