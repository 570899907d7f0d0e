"""`cantor`: entry point. Each subcommand lives in its own module with ``register(sub)``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .. import __version__
from .exit_codes import EXIT_USAGE
from .parser import CommandParser

# subcommand modules under cantor_desktop.cli; each defines register(subparsers)
COMMAND_MODULES = [
    "config_cmd",
    "sketch_cmd",
    "node_cmd",
    "sing_cmd",
    "songs_cmd",  # editing what was made: songs, repaint, extend, understand,
    "repaint_cmd",  # stems, layer, complete (and sing --cover)
    "extend_cmd",
    "understand_cmd",
    "stems_cmd",
    "layer_cmd",
    "complete_cmd",
    "export_cmd",
    "upgrade_cmd",
    "backends_cmd",
    "pull_cmd",
    "models_cmd",
    "adapters_cmd",
    "styles_cmd",
    "login_cmd",
    "pool_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="cantor", description="Make songs with ACE-Step on your own machine."
    )
    parser.add_argument("--version", action="version", version=f"cantor {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(sub)
    for command, subparser in sub.choices.items():
        if command != "sketch-server":  # the sketch engine keeps ace-server's own options
            subparser.add_argument(
                "-v",
                "--verbose",
                action="store_true",
                default=argparse.SUPPRESS,
                help="log details to stderr",
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..system import logs
    from ..system.paths import paths
    from ..system.stdio import utf8_output

    utf8_output()  # a caption or an arrow printed to a file or a pipe (Windows: cp1252)

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    logs.setup(paths().cli_log, stderr_level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
