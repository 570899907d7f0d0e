"""How an engine process is started: the options of :mod:`cantor_desktop.procs` (windowless,
its own session, tied to the process that owns it), and an environment without secrets.

An engine runs in its own session or process group (a Ctrl-C in the terminal reaches the
node, which stops the engine in order, not both at once). It never outlives its owner: on
Linux the kernel kills it (SIGKILL) when the owner dies, even by kill -9; on Windows the owner
sits in a kill-on-close Job Object that its children inherit; on macOS Cantor's own engine
watches the owner's pipe and the node ends a third-party engine it left behind at its next
start (node/leftovers.py).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from .. import procs


def engine_process_kwargs() -> dict[str, Any]:
    """Keyword arguments for subprocess.Popen / asyncio.create_subprocess_exec. An engine is
    killed when its node dies (Linux's parent-death signal is SIGKILL): ace-server's SIGTERM
    lets the running job finish — minutes of a song's decode for a node that is gone."""
    return procs.child_kwargs(killed_with_owner=True)


SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
"""An environment variable whose name holds one of these is never handed to an engine
(CANTOR_NODE_TOKEN, HF_TOKEN, AWS_SECRET_ACCESS_KEY, …)."""


def engine_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment an engine starts with: ours without any secret (an engine is another
    project's program and needs no token of the node's or the user's), plus ``extra``, plus
    what ties it to this process (:func:`cantor_desktop.procs.child_environment`)."""
    env = {
        k: v for k, v in os.environ.items() if not any(word in k.upper() for word in SECRET_WORDS)
    }
    env.update(extra or {})
    return procs.child_environment(env)
