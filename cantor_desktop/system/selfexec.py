"""How Cantor starts its own child processes (the node, the sketch engine, the CLI).

Unfrozen, a child is ``python -m cantor_desktop <command>``; in the PyInstaller build the one
executable runs itself with a mode switch, so nothing needs a Python on the user's machine.
Always an argument list, never a shell string.
"""

from __future__ import annotations

import sys

MODES = ("node", "sketch-server", "cli")


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def self_argv(mode: str) -> list[str]:
    """The argv prefix that runs Cantor in ``mode``; append the mode's own arguments.

    ``self_argv("node") + ["--port", "7823"]`` starts a node;
    ``self_argv("sketch-server") + ["--models", d, "--port", p]`` starts the sketch engine;
    ``self_argv("cli") + ["pull", "sketch"]`` runs any CLI command.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if is_frozen():
        return [sys.executable, "--mode", mode]
    base = [sys.executable, "-m", "cantor_desktop"]
    return base if mode == "cli" else base + [mode]
