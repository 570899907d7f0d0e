"""`cantor node [--host H] [--port P]` runs the node; `cantor node token` prints its token;
`cantor node stop` stops this home's running node (it stops its engines first)."""

from __future__ import annotations

import logging
import os
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "node",
        help="run the node (the HTTP API the app and CLI use)",
        description="Run the Cantor node: the song queue and engines behind an "
        "HTTP API. Every request needs the node's token; the app and "
        "the CLI on this machine find it themselves, and `cantor "
        "node token` prints it for another machine.",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("serve", "token", "stop"),
        default="serve",
        help="serve (default), token, or stop (this home's running node)",
    )
    p.add_argument("--host", help="address to listen on (default: node.host in node.toml)")
    p.add_argument("--port", type=int, help="port (default: node.port in node.toml)")
    p.add_argument(
        "--background",
        action="store_true",
        help="run below normal priority, and the engines with it (how the app starts its "
        "node: the window and other programs come first when the CPUs are busy)",
    )
    p.add_argument(
        "--pool",
        metavar="URL",
        help="join a pool of nodes: redis://[user@]HOST:6379/0 (default: pool.url in "
        "node.toml; see `cantor pool join`); its password from CANTOR_POOL_PASSWORD or the "
        "keyring, never the URL",
    )
    p.add_argument(
        "--allow-insecure",
        action="store_true",
        help="with --pool: join even though Redis is on another machine with no password or no TLS",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from ..auth import access
    from .. import config

    if args.action == "token":
        try:
            print(access.node_token(create=True))
        except access.TokenError as exc:
            print(f"cantor node token: {exc}", file=sys.stderr)
            return 1
        return 0

    if args.action == "stop":
        import asyncio

        return asyncio.run(stop_node(args.host, args.port))

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
    if args.pool:
        from ..pool import address as pool_address

        try:
            found = pool_address.parse(args.pool)
        except pool_address.PoolAddressError as exc:
            print(f"cantor node: {exc}", file=sys.stderr)
            return 2
        if found.password is not None:
            print(
                f"cantor node: {pool_address.password_on_command_line('--pool')}",
                file=sys.stderr,
            )
            return 2
        os.environ[pool_address.POOL_ENV] = args.pool  # the node reads it (and a restart)
        if args.allow_insecure:
            os.environ[pool_address.INSECURE_ENV] = "1"
    return serve_forever(host, port, background=args.background)


async def stop_node(host: str | None = None, port: int | None = None) -> int:
    """``cantor node stop``: :func:`..client.node_process.stop_node`, said on stderr."""
    from ..client.node_process import stop_node as stop

    code, said = await stop(host, port)
    print(f"cantor node stop: {said}", file=sys.stderr)
    return code


def serve_forever(host: str, port: int, *, background: bool = False) -> int:
    from ..system import logs, procs
    from ..auth.access import TokenError
    from ..node.server import serve
    from ..system.paths import paths
    from ..system.selfexec import self_argv

    supervised = os.environ.pop(procs.SUPERVISED_ENV, None) == "1"
    procs.watch_owner()  # started by the app: stop when the app is gone
    logs.setup(paths().node_log, stderr_level=logging.WARNING)
    if background:  # before any engine starts: they inherit it
        try:
            logging.getLogger(__name__).info("running at %s", procs.run_in_background())
        except Exception:  # noqa: BLE001 - a refused change leaves the node as it was
            logging.getLogger(__name__).warning("could not lower the priority", exc_info=True)

    def listening() -> None:
        shown = f"[{host}]" if ":" in host else host
        print(
            f"cantor node: listening on http://{shown}:{port} (clients on this machine find "
            f"its token; elsewhere give them `cantor node token`) (log: {paths().node_log}); "
            f"Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )

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
        return restart_node(argv + (["--background"] if background else []), supervised)
    return 0


def restart_node(argv: list[str], supervised: bool, *, os_name: str | None = None) -> int:
    """Start the node again after an upgrade.

    - Supervised (the app started it and watches it): exit with
      :data:`procs.RESTART_EXIT_CODE`; the app starts it again at once, and no one else does.
    - Run by hand on POSIX: ``os.execv`` — the same pid, terminal and owner pipe.
    - Run by hand on Windows, where ``execv`` would start a second process with a new pid
      and split ``C:\\Program Files\\…`` at the space: stay as a thin parent and run the node
      as its child, again each time it asks (:func:`run_restarting`).
    """
    from ..system import procs

    if supervised:
        return procs.RESTART_EXIT_CODE
    if (os_name or os.name) != "nt":
        from ..system.procs.owner import keep_across_exec

        keep_across_exec()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
    return run_restarting(argv)


def run_restarting(argv: list[str]) -> int:
    """Run ``argv`` (a node) as a child until it exits with anything but the restart code;
    returns that code. This process lets go of the node's log first (the child rotates it)
    and leaves Ctrl-C to the child, which stops gracefully and exits 0."""
    import signal
    import subprocess

    from ..system import logs, procs

    logs.release()
    # a handler, not SIG_IGN: an ignored signal would stay ignored in the child too
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    env = {**os.environ, procs.SUPERVISED_ENV: "1"}
    try:
        while True:
            code = subprocess.call(argv, env=env)
            if code != procs.RESTART_EXIT_CODE:
                return code
    finally:
        signal.signal(signal.SIGINT, previous)
