"""`cantor node [--host H] [--port P]` runs the node; `cantor node token` prints its token."""

from __future__ import annotations

import logging
import os
import sys


def register(sub) -> None:
    p = sub.add_parser("node", help="run the node (the HTTP API the app and CLI use)",
                       description="Run the Cantor node: the song queue and engines behind an "
                                   "HTTP API. Every request needs the node's token; the app and "
                                   "the CLI on this machine find it themselves, and `cantor "
                                   "node token` prints it for another machine.")
    p.add_argument("action", nargs="?", choices=("serve", "token"), default="serve",
                   help="serve (default) or token")
    p.add_argument("--host", help="address to listen on (default: node.host in node.toml)")
    p.add_argument("--port", type=int, help="port (default: node.port in node.toml)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import access, config

    if args.action == "token":
        try:
            print(access.node_token(create=True))
        except access.TokenError as exc:
            print(f"cantor node token: {exc}", file=sys.stderr)
            return 1
        return 0

    try:
        cfg = config.load()
    except config.ConfigError as exc:
        print(f"cantor node: {exc}", file=sys.stderr)
        return 2
    host = args.host or cfg.get("node.host")
    port = args.port if args.port is not None else cfg.get("node.port")
    try:
        if args.host is not None:
            config.option("node.host").validate(host)
        config.option("node.port").validate(port)
    except config.ConfigError as exc:
        print(f"cantor node: {exc}", file=sys.stderr)
        return 2
    return serve_forever(host, port)


def serve_forever(host: str, port: int) -> int:
    from .. import logs
    from ..access import TokenError
    from ..node.server import serve
    from ..paths import paths
    from ..selfexec import self_argv

    logs.setup(paths().node_log, stderr_level=logging.WARNING)

    def listening() -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"cantor node: listening on http://{shown}:{port} (clients on this machine find "
              f"its token; elsewhere give them `cantor node token`) (log: {paths().node_log}); "
              f"Ctrl-C stops it", file=sys.stderr, flush=True)

    try:
        restart = serve(host, port, on_listening=listening)
    except TokenError as exc:
        print(f"cantor node: refusing to listen without a token: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cantor node: {exc}", file=sys.stderr)
        return 1
    if restart:
        logging.getLogger(__name__).info("restarting the node (upgrade)")
        argv = self_argv("node") + ["--host", host, "--port", str(port)]
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
    return 0
