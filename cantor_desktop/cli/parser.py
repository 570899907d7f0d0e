"""The command line's parser: argparse's, with one choice per subcommand — ``intermixed``.

``sub.add_parser("extend", intermixed=True, …)`` lets a subcommand's positionals follow its
options (``repaint ID --from 5 --to 8 "jazzy"``), an optional CAPTION too, which plain
argparse would have matched empty before the options. It is argparse's own
``parse_known_intermixed_args``, chosen through the public ``parser_class`` of
``add_subparsers``."""

from __future__ import annotations

import argparse
from typing import Any


class CommandParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, intermixed: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.intermixed = intermixed
        self._intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        if not self.intermixed or self._intermixing:  # the passes intermixed parsing makes
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
