"""`cantor upgrade`: update the engine builds, then restart a running node after its
current song so it picks the new build up.

With a node running, the update goes through the node (``POST /v1/backends/update``, which
owns the engines) and the node is then asked to restart once idle
(``POST /v1/node/restart``). Without one, the update runs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "upgrade",
        help="update engine builds and restart the node when idle",
        description="Update the engine builds (like `cantor backends --update`), "
        "then restart a running node after its current song.",
    )
    p.add_argument(
        "--no-restart",
        action="store_true",
        help="update only; the node picks the new build up at its next restart",
    )
    from .node_session import add_node_option

    add_node_option(p)
    p.set_defaults(func=run)


def _describe(event, data) -> str:
    if isinstance(data, dict):
        text = data.get("message") or data.get("detail") or data.get("state") or ""
        what = " ".join(str(data[k]) for k in ("family", "backend", "version") if data.get(k))
        return " ".join(p for p in (event, what, str(text)) if p)
    return f"{event} {data}"


async def upgrade(restart: bool = True, node_url: str | None = None) -> int:
    from ..client.node_process import answers
    from ..client.nodeclient import (
        OURS,
        STRANGER,
        NodeClient,
        NodeError,
        local_url,
        stranger_words,
        which_node,
    )
    from .node_session import given_token

    url = (node_url or local_url()).rstrip("/")
    if node_url and not await answers(url):
        print(f"cantor upgrade: no node answers at {url}", file=sys.stderr)
        return 1
    found = OURS if node_url else await which_node(url)  # --node: the one asked for
    if found == STRANGER:
        print(f"cantor upgrade: {stranger_words(url)}; it is left alone", file=sys.stderr)
    if found == OURS:
        async with NodeClient(url, given_token()) as node:
            try:
                # (nodeclient names its async generator an AsyncIterator; helper httpx
                # rewrites it: drop this ignore when mypy says it is unused)
                async with contextlib.aclosing(node.update_backends()) as events:  # type: ignore[type-var]
                    async for event, data in events:
                        if event == "error":  # said once, as the command's error
                            print(f"cantor upgrade: {data.get('message')}", file=sys.stderr)
                            return 1
                        print(_describe(event, data), file=sys.stderr)
                if restart:
                    answer = await node.restart()
                    after = answer.get("after") or []
                    print(
                        "the node restarts " + ("after its current song" if after else "now"),
                        file=sys.stderr,
                    )
            except NodeError as exc:
                print(f"cantor upgrade: {exc.message}", file=sys.stderr)
                return 1
        return 0
    from ..install import backends

    def on_event(ev: backends.BackendEvent) -> None:
        print(_describe(*ev.to_sse()), file=sys.stderr)

    try:
        await backends.update(on_event=on_event)
    except Exception as exc:
        print(f"cantor upgrade: {exc}", file=sys.stderr)
        return 1
    print("no node is running; the next one starts with the updated builds", file=sys.stderr)
    return 0


def run(args) -> int:
    return asyncio.run(upgrade(restart=not args.no_restart, node_url=args.node))
