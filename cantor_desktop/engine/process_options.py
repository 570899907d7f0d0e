"""How an engine process is started so that it never outlives the process that owns it.

An engine runs in its own session (a Ctrl-C in the terminal reaches the node, which stops
the engine in order, not both at once). On Linux the kernel also sends it SIGTERM when its
owner dies — even by kill -9 — so no orphaned engine keeps a port and gigabytes of weights.
Elsewhere the node ends leftovers it recorded at its next start (node/leftovers.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Mapping

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook asking the kernel for SIGTERM when the parent dies (Linux only).
    libc is resolved here, in the parent, so the forked child only makes one system call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    term = int(signal.SIGTERM)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, term, 0, 0, 0)

    return hook


_HOOK = _die_with_parent()


def engine_process_kwargs() -> dict[str, Any]:
    """Keyword arguments for subprocess.Popen / asyncio.create_subprocess_exec."""
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    kwargs: dict[str, Any] = {"start_new_session": True}
    if _HOOK is not None:
        kwargs["preexec_fn"] = _HOOK
    return kwargs


SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
"""An environment variable whose name holds one of these is never handed to an engine
(CANTOR_NODE_TOKEN, HF_TOKEN, AWS_SECRET_ACCESS_KEY, …)."""


def engine_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment an engine starts with: ours without any secret (an engine is another
    project's program and needs no token of the node's or the user's), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not any(word in k.upper() for word in SECRET_WORDS)}
    env.update(extra or {})
    return env
