"""Engines a dead node left behind.

An engine is tied to its node (:mod:`cantor_desktop.system.procs`), but where the tie cannot hold —
macOS, where ace-server cannot watch a pipe; a Windows that refused the job object — a node
killed outright leaves its engine running, with its port and gigabytes of weights. The node
records each engine it starts in ``paths().node_engines_file`` (pid, models folder, and the
executable it runs); the next node ends:

- the recorded processes that still run the same program (image path and a command line
  naming that models folder), so a recycled pid is never touched;
- any other engine of this home that lost its node: a process whose command line has
  ``--models`` one of this home's model folders, whose image is an engine of this home (or
  Cantor's own sketch engine), and whose parent is no longer a Cantor node.

An engine whose node is alive (another node of the same home) is never touched.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from ..system import procs
from ..files import write_atomic
from ..system.paths import paths

log = logging.getLogger(__name__)


def _file() -> Path:
    return paths().node_engines_file


def record(engines: dict[str, dict]) -> None:
    """Save ``{key: {"pid": int, "models_dir": str}}`` for the engines running now; the
    executable of each is looked up and saved with it."""
    out = {}
    for key, item in engines.items():
        item = dict(item)
        if "exe" not in item and item.get("pid"):
            exe = procs.image_path(int(item["pid"]))
            if exe:
                item["exe"] = exe
        out[key] = item
    write_atomic(_file(), json.dumps(out, indent=1).encode("utf-8"))


def is_node_command(argv: list[str] | None) -> bool:
    """A Cantor node's command line (``… cantor_desktop node …``, ``cantor-desktop --mode
    node …``, ``cantor node …``)."""
    if not argv or "node" not in argv:
        return False
    return any("cantor" in Path(part).name.lower() for part in argv[: argv.index("node")])


def _node_is_alive(ppid: int | None, *, ps=None) -> bool:
    if not ppid or ppid <= 1 or not procs.alive(ppid, ps=ps):
        return False
    return is_node_command(procs.command_line(ppid, ps=ps))


def _models_folders() -> list[Path]:
    p = paths()
    folders = [p.sketch_models_dir, p.probe_models_dir]
    try:
        folders += [d for d in p.models_dir.iterdir() if d.is_dir()]
    except OSError:
        pass
    return folders


def _is_engine_image(found: procs.Found, recorded_exe: str | None) -> bool:
    if recorded_exe:
        return procs.same_path(found.exe, recorded_exe)
    if procs.path_under(found.exe, paths().engines_dir):
        return True
    # the built-in sketch engine is Cantor itself in its sketch-server mode
    return "sketch-server" in found.cmdline and (
        procs.same_path(found.exe, sys.executable)
        or any("cantor" in Path(a).name.lower() for a in found.cmdline[:3])
    )


def _models_dir_of(found: procs.Found) -> str | None:
    return found.argument_after("--models")


def find_leftovers(recorded: dict[str, dict] | None = None, *, ps=None) -> list[procs.Found]:
    """The engines of this home that outlived their node (see the module's doc)."""
    recorded = recorded or {}
    by_pid = {}
    for item in recorded.values():
        try:
            by_pid[int(item["pid"])] = (str(item["models_dir"]), item.get("exe"))
        except (KeyError, TypeError, ValueError):
            continue
    folders = _models_folders()
    me = os.getpid()

    def match(found: procs.Found) -> bool:
        if found.pid == me or found.ppid == me:
            return False
        models = _models_dir_of(found)
        if not models:
            return False
        if found.pid in by_pid:
            folder, exe = by_pid[found.pid]
            if not procs.same_path(models, folder) or (exe and not procs.same_path(found.exe, exe)):
                return False  # the pid now belongs to another program
        elif not (
            any(procs.same_path(models, f) for f in folders) and _is_engine_image(found, None)
        ):
            return False
        return not _node_is_alive(found.ppid, ps=ps)

    return procs.find(match, ps=ps)


def end_leftovers(timeout: float = 3.0, *, ps=None) -> list[int]:
    """End the engines that outlived their node; returns the pids ended."""
    try:
        recorded = json.loads(_file().read_text("utf-8"))
        if not isinstance(recorded, dict):
            recorded = {}
    except (OSError, ValueError):
        recorded = {}
    found = find_leftovers(recorded, ps=ps)
    for item in found:
        log.warning(
            "ending an engine a previous node left running: pid %d (%s)",
            item.pid,
            " ".join(item.cmdline[:6]),
        )
    ended = procs.end([f.pid for f in found], grace=timeout, ps=ps) if found else []
    try:
        record({})
    except OSError:
        log.warning("cannot clear %s", _file())
    return ended
