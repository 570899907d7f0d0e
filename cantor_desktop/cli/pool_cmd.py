"""`cantor pool join URL | leave | status`: this machine's node in a pool of nodes.

- ``join URL``: checks the pool answers (the Redis password asked without echo, or read
  from ``--password-stdin`` / ``CANTOR_POOL_PASSWORD``), makes this home's node token the
  pool's (the first member's token becomes the pool's; a later member gives it when asked,
  with ``--token-stdin`` or in ``CANTOR_POOL_TOKEN``: ``cantor node token`` on a member
  prints it), keeps the password in the OS keyring and writes ``[pool] url`` (without the
  password). The node joins at its next start. No secret is taken from the command line,
  which every user of the machine can read; a pool whose Redis is on another machine with
  no password or without TLS is joined only when the user says so (asked, or
  ``--allow-insecure``).
- ``leave``: ``[pool] url`` goes, the password is forgotten and this home gets a token of
  its own again (the pool's members can no longer call this node).
- ``status``: the pool's members (alive or gone, their models and engines, what each is
  making), its lanes (songs waiting, taken and by whom) and its songs by state.

Exit 0 done, 1 the pool refused or did not answer, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TOKEN_ENV = "CANTOR_POOL_TOKEN"


def register(sub) -> None:
    p = sub.add_parser(
        "pool",
        help="join, leave or look at a pool of nodes (one queue on Redis)",
        description="Several machines behind one song queue on Redis: each runs `cantor "
        "node`, joined with `cantor pool join redis://HOST:6379/0`. See docs/pool.md.",
    )
    actions = p.add_subparsers(dest="pool_action", metavar="ACTION", required=True)
    join = actions.add_parser("join", help="make this machine's node a member of a pool")
    join.add_argument("url", help="redis://[user@]HOST[:6379][/DB] (rediss:// for TLS)")
    join.add_argument("--token", help=argparse.SUPPRESS)  # refused: see run_join
    join.add_argument(
        "--token-stdin",
        action="store_true",
        help=f"read the pool's node token from stdin (else {TOKEN_ENV}, or asked for)",
    )
    join.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the Redis password from stdin (the first line, before the token)",
    )
    join.add_argument(
        "--allow-insecure",
        action="store_true",
        help="join even though Redis is on another machine with no password or no TLS",
    )
    join.add_argument("--name", help="this node's name in the pool (default: the machine's)")
    join.add_argument("--ca", help="a CA certificate file for a rediss:// pool")
    join.set_defaults(func=run_join)
    leave = actions.add_parser("leave", help="this machine's node leaves its pool")
    leave.set_defaults(func=run_leave)
    status = actions.add_parser("status", help="members, their queues, waiting and taken songs")
    status.add_argument("--json", action="store_true", help="the status as one JSON object")
    status.set_defaults(func=run_status)


def _err(message: str) -> None:
    print(f"cantor pool: {message}", file=sys.stderr)


def _client(address, password, ca):
    from ..pool.link import make_client

    return make_client(address, password, ca)


async def _ping(r, address, ca: str | None = None) -> str | None:
    """None when the pool answers, else why not (never the password)."""
    import redis.exceptions

    from ..pool.link import explain

    try:
        await r.ping()
    except redis.exceptions.AuthenticationError as exc:
        return f"Redis refused the credentials: {exc}"
    except redis.exceptions.ResponseError as exc:
        if "NOAUTH" in str(exc):
            return "Redis wants a password (give it when asked, or with --password-stdin)"
        return str(exc)
    except Exception as exc:
        return explain(exc, address, ca)
    return None


def _ca_problem(path: str) -> str | None:
    """None when ``path`` is a readable file of PEM certificates, else what is wrong."""
    try:
        text = Path(path).expanduser().read_text("ascii", errors="replace")
    except OSError as exc:
        return f"--ca {path}: cannot be read ({exc.strerror or exc})"
    if "-----BEGIN CERTIFICATE-----" not in text:
        return f"--ca {path}: not a PEM certificate file (no BEGIN CERTIFICATE line)"
    return None


def run_join(args) -> int:
    from .. import config
    from ..pool import address as pool_address
    from ..pool import credentials

    try:
        found = pool_address.parse(args.url)
    except pool_address.PoolAddressError as exc:
        _err(str(exc))
        return EXIT_USAGE
    if found.password is not None:
        _err(pool_address.password_on_command_line("the pool URL"))
        return EXIT_USAGE
    if args.token is not None:
        _err(
            "--token: a command line can be read by every user of this machine while the "
            f"command runs; give the token when asked, with --token-stdin or in {TOKEN_ENV}"
        )
        return EXIT_USAGE
    password = os.environ.get(credentials.PASSWORD_ENV) or None
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n") or None
    elif password is None and sys.stdin.isatty():
        password = getpass.getpass(f"Redis password for {found.shown()} (empty: none): ") or None
    args.token = sys.stdin.readline().strip() or None if args.token_stdin else None
    exposed = pool_address.exposure(found, password is not None)
    if exposed and not args.allow_insecure:
        if not sys.stdin.isatty():
            _err(
                f"the pool at {found.shown()} is open to its network: {exposed} To join it "
                "anyway, add --allow-insecure"
            )
            return EXIT_USAGE
        print(f"The pool at {found.shown()} is open to its network: {exposed}")
        if input("Join it anyway? [y/N] ").strip().lower() not in ("y", "yes"):
            _err("not joined")
            return EXIT_USAGE
        args.allow_insecure = True
    if args.ca:
        problem = _ca_problem(args.ca)
        if problem:
            _err(problem)
            return EXIT_USAGE
        args.ca = str(Path(args.ca).expanduser().resolve())  # the node may start elsewhere
        try:
            config.option("pool.ca").validate(args.ca)
        except config.ConfigError as exc:
            _err(str(exc))
            return EXIT_USAGE
    return asyncio.run(_join(args, found.with_password(None), password))


async def _join(args, address, password) -> int:
    from ..auth import access
    from .. import config
    from ..pool import credentials, redis_keys

    r = _client(address, password, args.ca)
    try:
        problem = await _ping(r, address, args.ca)
        if problem:
            _err(f"the pool at {address.shown()} did not answer: {problem}")
            return EXIT_FAILED
        check = await r.get(redis_keys.TOKEN_CHECK)
        own = access.node_token(create=True) or ""
        token: str | None
        if check is None:
            token = own
            await r.set(redis_keys.TOKEN_CHECK, credentials.token_check(token), nx=True)
            check = await r.get(redis_keys.TOKEN_CHECK)
            first = True
        else:
            first = False
            token = args.token or os.environ.get(TOKEN_ENV, "").strip() or None
            if token is None and credentials.token_matches(own, check):
                token = own
            if token is None and sys.stdin.isatty():
                token = getpass.getpass(
                    "the pool's node token (`cantor node token` on a member prints it): "
                ).strip()
            if not token:
                _err(
                    f"the pool at {address.shown()} has members already: give its token "
                    f"with --token-stdin or in {TOKEN_ENV} (`cantor node token` on a member "
                    "prints it)"
                )
                return EXIT_USAGE
        if not credentials.token_matches(token, check or ""):
            _err(f"that is not the token of the pool at {address.shown()}")
            return EXIT_FAILED
    finally:
        await r.aclose()
    where_token = access.keep_token(token) if token != own else None
    where_password = credentials.keep_password(address, password) if password else None
    changes: dict[str, object] = {
        "pool.url": address.shown(),
        "pool.allow_insecure": bool(args.allow_insecure),
    }
    if args.name:
        changes["pool.name"] = args.name
    if args.ca:
        changes["pool.ca"] = args.ca
    try:
        config.update(changes)
    except config.ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    print(f"joined the pool at {address.shown()}" + (" (its first member)" if first else ""))
    if where_token:
        print(f"this node's token is the pool's now (kept in {where_token})")
    if where_password:
        print(f"the Redis password is kept in {where_password}")
    print(
        "the node takes the pool's songs from its next start (`cantor node stop`, then "
        "`cantor node`, or restart the app)"
    )
    return EXIT_OK


def run_leave(args) -> int:
    from ..auth import access
    from .. import config
    from ..pool import address as pool_address
    from ..pool import credentials

    cfg, err = config.load_or_defaults()
    if err is not None:
        _err(str(err))
        return EXIT_USAGE
    url = cfg.get("pool.url")
    if not url:
        print("this node is not in a pool")
        return EXIT_OK
    found = pool_address.parse(url)
    credentials.forget_password(found)
    config.update({"pool.url": None})
    where = access.keep_token(access.new_token())
    print(
        f"left the pool at {found.shown()}; this node has a token of its own again (kept in "
        f"{where}): apps elsewhere need it (`cantor node token`); restart the node"
    )
    return EXIT_OK


def run_status(args) -> int:
    from .. import config
    from ..pool import address as pool_address
    from ..pool import credentials

    cfg, err = config.load_or_defaults()
    if err is not None:
        _err(str(err))
        return EXIT_USAGE
    url = os.environ.get(pool_address.POOL_ENV, "").strip() or cfg.get("pool.url")
    if not url:
        _err("this machine is not in a pool: `cantor pool join redis://HOST:6379/0`")
        return EXIT_USAGE
    try:
        found = pool_address.parse(url)
    except pool_address.PoolAddressError as exc:
        _err(str(exc))
        return EXIT_USAGE
    return asyncio.run(_status(args, found, credentials.password(found), cfg.get("pool.ca")))


async def _status(args, address, password, ca) -> int:
    from ..pool.status import gather

    r = _client(address.without_password(), password, ca or None)
    try:
        problem = await _ping(r, address, ca or None)
        if problem:
            _err(f"pool unreachable: {address.shown()}: {problem}")
            return EXIT_FAILED
        status = await gather(r)
    finally:
        await r.aclose()
    status["url"] = address.shown()
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return EXIT_OK
    print(render(status))
    return EXIT_OK


def render(status: dict) -> str:
    """The status as a few readable lines."""
    now = status.get("at") or time.time()
    lines = [f"pool {status.get('url', '')}"]
    members = status.get("members") or []
    names = {m["id"]: m.get("name") or m["id"] for m in members}
    lines.append(f"members ({sum(1 for m in members if m.get('alive'))} alive):")
    for m in members:
        seen = now - float(m.get("seen") or now)
        state = "alive" if m.get("alive") else f"gone (last seen {seen:.0f} s ago)"
        engines = ", ".join(
            f"{e.get('engine')} on {e.get('backend')}" for e in m.get("engines") or ()
        )
        lines.append(f"  {m.get('name') or m['id']} [{m['id']}] {m.get('url', '')} — {state}")
        lines.append(f"    models: {', '.join(m.get('models') or ()) or 'none'}")
        if engines:
            lines.append(f"    engines: {engines}")
        running = m.get("running") or []
        lines.append(f"    making: {', '.join(running) if running else 'nothing'}")
    lines.append("lanes:")
    for lane in status.get("lanes") or ():
        taken = ", ".join(f"{names.get(n, n)}: {c}" for n, c in lane["claimed"].items()) or "none"
        lines.append(f"  {lane['label']}: {lane['waiting']} waiting; taken — {taken}")
    counts = status.get("songs") or {}
    lines.append(
        "songs: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none yet")
    )
    for song in status.get("running") or ():
        lines.append(
            f"  running {song['id']} on {names.get(song['node'], song['node'] or '?')} "
            f"(attempt {song['attempt']}, {song['lane']})"
        )
    refused = status.get("refused_entries") or {}
    counts = {k: v for k, v in refused.items() if k != "latest" and v}
    if counts:
        lines.append(
            f"refused from Redis: {sum(counts.values())} ("
            + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
            + "): they are not used; someone who can write to the pool's Redis wrote them, "
            "or a member of another version"
        )
        for r in refused.get("latest") or ():
            lines.append(f"  {r['kind']} {r['key']}: {r['reason']}")
    return "\n".join(lines)
