"""Background priority for the node the app (or ``cantor sing``) starts.

A song renders on every core the engine can use, and a model download hashes every byte;
on a machine with few cores the window (and a DAW beside it) would wait for a CPU behind
them. The node the app starts therefore runs below normal priority, and its engines with
it: on POSIX a niceness of :data:`BACKGROUND_NICE` (children inherit it), on Windows the
below-normal priority class (which the processes it starts inherit). With nothing else
running it still has every core; only when the CPUs are contended do the app and the
user's other programs come first. A node started by hand (a studio's server) keeps the
normal priority.
"""

from __future__ import annotations

import os
from typing import Any

BACKGROUND_NICE = 10  # POSIX niceness: below every normal program, above `nice -n 19` batch work


def run_in_background(*, ps: Any = None, os_name: str | None = None) -> str:
    """Lower this process's CPU priority (never raise it); what it is now, in words."""
    if ps is None:
        import psutil

        ps = psutil
    me = ps.Process()
    if (os_name or os.name) == "nt":
        me.nice(ps.BELOW_NORMAL_PRIORITY_CLASS)
        return "below normal priority"
    now = int(me.nice())
    if now < BACKGROUND_NICE:
        me.nice(BACKGROUND_NICE)
    return f"niceness {max(now, BACKGROUND_NICE)}"
