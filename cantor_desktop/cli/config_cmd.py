"""`cantor config path | get KEY | set KEY VALUE | show`."""

from __future__ import annotations

import json
import sys

from .. import config


def register(sub) -> None:
    p = sub.add_parser(
        "config",
        help="read or change node.toml",
        description="Read or change node.toml (validated like the app).",
    )
    csub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    csub.add_parser("path", help="print where node.toml lives")
    g = csub.add_parser("get", help="print one setting")
    g.add_argument("key")
    s = csub.add_parser("set", help="change one setting")
    s.add_argument("key")
    s.add_argument("value")
    u = csub.add_parser("unset", help="remove a setting (back to its default)")
    u.add_argument("key")
    csub.add_parser("show", help="every setting with its value and what is allowed")
    p.set_defaults(func=run)


def _print_value(value) -> None:
    print(json.dumps(value) if isinstance(value, bool) else value)


def run(args) -> int:
    try:
        if args.action == "path":
            print(config.load_or_defaults()[0].path)
            return 0
        if args.action == "set":
            config.set_from_text(args.key, args.value)
            _print_value(config.load().get(args.key))
            return 0
        if args.action == "unset":
            config.option(args.key)
            config.update({args.key: None})
            return 0
        cfg = config.load()
        if args.action == "get":
            _print_value(cfg.get(config.option(args.key).key))
            return 0
        for item in config.describe():
            value = cfg.get(item["key"])
            print(f"{item['key']} = {json.dumps(value)}    # {item['allowed']}")
        return 0
    except config.ConfigError as exc:
        print(f"cantor config: {exc}", file=sys.stderr)
        return 2
