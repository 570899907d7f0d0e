"""Background priority for the node the app (or ``cantor sing``) starts.

A song renders on every core the engine can use, and a model download hashes every byte;
on a machine with few cores the window (and a DAW beside it) would wait for a CPU behind
them. The node the app starts therefore runs below normal priority, and its engines with
it: on Windows the below-normal priority class (which the processes it starts inherit); on
POSIX a niceness of :data:`BACKGROUND_NICE`. Linux with autogroup scheduling (the default on
desktops) shares the CPUs between sessions first and weighs niceness only inside one, and
the node and each engine start sessions of their own (spawn.py): each session's autogroup
is given the same niceness (``/proc/<pid>/autogroup``), the node's own at once and each
engine's as it starts (:func:`follow`). With nothing else running the node still has every
core; only when the CPUs are contended do the app and the user's other programs come first.
A node started by hand (a studio's server) keeps the normal priority.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BACKGROUND_NICE = 10  # POSIX niceness: below every normal program, above `nice -n 19` batch work

_background = False  # this process was put in the background: its children follow


def run_in_background(*, ps: Any = None, os_name: str | None = None, proc: str = "/proc") -> str:
    """Lower this process's CPU priority (never raise it); what it is now, in words."""
    global _background
    if ps is None:
        import psutil

        ps = psutil
    me = ps.Process()
    _background = True
    if (os_name or os.name) == "nt":
        if me.nice() not in (ps.IDLE_PRIORITY_CLASS, ps.BELOW_NORMAL_PRIORITY_CLASS):
            me.nice(ps.BELOW_NORMAL_PRIORITY_CLASS)
        return "below normal priority"
    now = int(me.nice())
    if now < BACKGROUND_NICE:
        me.nice(BACKGROUND_NICE)
    _lower_autogroup("self", proc)
    return f"niceness {max(now, BACKGROUND_NICE)}"


def follow(pid: int, *, proc: str = "/proc") -> None:
    """A child this background process started in a session of its own (an engine, a trial
    load): its autogroup at the background level too (Linux; nothing elsewhere)."""
    if _background:
        _lower_autogroup(str(pid), proc)


def _lower_autogroup(who: str, proc: str) -> None:
    path = Path(proc, who, "autogroup")
    try:
        current = path.read_text("ascii").split("nice")[-1].strip()
        if int(current) < BACKGROUND_NICE:
            path.write_text(str(BACKGROUND_NICE), "ascii")
    except (OSError, ValueError):  # no autogroup scheduling here, or not ours to change
        pass
