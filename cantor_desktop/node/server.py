"""Starting the node: the token rule for non-loopback addresses, then uvicorn.

Bound to loopback the node needs no token. Bound to any other address every request must
carry ``Authorization: Bearer TOKEN``; the token is generated on first use and kept in the OS
keyring under "node-token" (``CANTOR_NODE_TOKEN`` overrides it, for machines without a
keyring). Without a token the node refuses to start.
"""

from __future__ import annotations

import logging
import os
import secrets as _random
from typing import Callable

from ..config import is_loopback_host

log = logging.getLogger(__name__)

TOKEN_NAME = "node-token"
TOKEN_ENV = "CANTOR_NODE_TOKEN"


class TokenError(RuntimeError):
    """No token can be had: the node must not listen beyond loopback."""


def node_token(*, create: bool) -> str | None:
    """The node's bearer token: the environment's, else the keyring's (made when asked)."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    from ..secrets import NoKeyringError, get_secret, set_secret

    try:
        token = get_secret(TOKEN_NAME)
        if token or not create:
            return token
        token = _random.token_urlsafe(32)
        set_secret(TOKEN_NAME, token)
        return token
    except NoKeyringError as exc:
        raise TokenError(f"{exc}; or set {TOKEN_ENV}") from None


def token_for(host: str) -> str | None:
    """None on loopback; otherwise the token, or TokenError."""
    if is_loopback_host(host):
        return None
    token = node_token(create=True)
    if not token:
        raise TokenError("no node token is available")
    return token


def serve(host: str, port: int, on_listening: Callable[[bool], None] | None = None) -> bool:
    """Run the node until it is stopped; True when it should restart (an upgrade asked).

    ``on_listening(token_required)`` is called once the socket is bound and the node answers.
    """
    import uvicorn

    from .api import create_app

    token = token_for(host)
    logging.getLogger("httpx").setLevel(logging.WARNING)   # one line per engine poll is noise
    holder: dict[str, uvicorn.Server] = {}

    def request_exit() -> None:
        server = holder.get("server")
        if server is not None:
            server.should_exit = True

    def exiting() -> bool:
        server = holder.get("server")
        return bool(server is not None and server.should_exit)

    def on_ready(node) -> None:
        node.request_exit = request_exit
        node.exiting = exiting

    app = create_app(token=token, on_ready=on_ready)
    uv_config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                               lifespan="on", timeout_graceful_shutdown=3,
                               timeout_keep_alive=30)
    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_listening is not None:
                on_listening(bool(token))

    server = _Server(uv_config)
    holder["server"] = server
    log.info("node listening on %s:%s%s", host, port, " (token required)" if token else "")
    server.run()
    node = getattr(app.state, "node", None)
    if not server.started:
        raise OSError(f"the node could not listen on {host}:{port} (see {_log_hint()})")
    return bool(node is not None and node.restart_requested)


def _log_hint() -> str:
    from ..paths import paths
    return str(paths().node_log)
