"""The node a CLI command talks to, in one place: ``--node URL`` (another machine's, its
token in CANTOR_NODE_TOKEN), else this home's running node, else a private node started for
the command and stopped after it."""

from __future__ import annotations

import contextlib
import os
from typing import AsyncIterator


class NodeUnavailable(Exception):
    """No node can be had for the command; the message says why."""


def add_node_option(p) -> None:
    """``--node URL``: drive another machine's node (its token in CANTOR_NODE_TOKEN)."""
    p.add_argument(
        "--node",
        metavar="URL",
        default=os.environ.get("CANTOR_NODE_URL") or None,
        help="use the node at URL (e.g. http://studio:7823) instead of this "
        "machine's; give its token (`cantor node token` there) in "
        "CANTOR_NODE_TOKEN. Default: CANTOR_NODE_URL, else this machine's",
    )


def given_token() -> str | None:
    """The token the user gave for a node (CANTOR_NODE_TOKEN); None lets the client find this
    home's own."""
    from ..auth.access import TOKEN_ENV

    return os.environ.get(TOKEN_ENV, "").strip() or None


@contextlib.asynccontextmanager
async def node_client(command: str, node_url: str | None = None) -> AsyncIterator:
    """``async with node_client("sing", args.node) as node:`` — a NodeClient of the node this
    command uses; a private node started for it says why (on stderr) and is stopped after.
    NodeUnavailable when none can be had."""
    from ..client.node_process import NodeStartError, ensure_node
    from ..client.nodeclient import NodeClient

    private = None
    if node_url:
        url = node_url.rstrip("/")
    else:
        try:
            url, private = await ensure_node()
        except NodeStartError as exc:
            raise NodeUnavailable(str(exc)) from None
    try:
        async with NodeClient(url, token=private.token if private else given_token()) as node:
            yield node
    finally:
        if private is not None:
            await private.stop()
