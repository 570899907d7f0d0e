"""`cantor sketch-server ARGS`: run the built-in sketch engine with ace-server's command line.

Every argument after ``sketch-server`` goes to the engine's own parser unchanged, so the
command behaves exactly like ace-server (``--help`` exits 0, an unknown option exits 1).
"""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "sketch-server",
        add_help=False,
        prefix_chars="\0",
        help="run the built-in sketch engine (Sketch — built-in, no AI model)",
        description="Run the built-in sketch engine; takes ace-server's command line.",
    )
    p.add_argument("engine_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..system.procs import watch_owner
    from ..sketch.server import main

    watch_owner()  # the node that started it ended: stop (macOS has no other tie)
    return main(list(args.engine_args))
