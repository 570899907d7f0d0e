"""Starting the node: its token, its door (:mod:`.guard`), then uvicorn.

Every request carries the node's token, loopback included (:mod:`cantor_desktop.access`
makes and keeps it); without one the node refuses to start. The HTTP protocol drops a
connection whose request headers do not arrive within :data:`HEADER_TIMEOUT_S` (a
half-sent request must not hold a file descriptor forever), the number of connections
served at once is capped, and the open-file limit is raised as far as the system allows.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from .. import access
from ..access import TokenError
from . import memory

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 1024
WANTED_OPEN_FILES = 8192

__all__ = ["TokenError", "serve", "raise_open_file_limit"]


def raise_open_file_limit(wanted: int = WANTED_OPEN_FILES) -> int | None:
    """Raise this process's soft limit on open files towards ``wanted`` (macOS starts at
    256); returns the limit in force, or None where there is no such limit (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def _protocol_class():
    """uvicorn's h11 protocol, with a deadline for each request's headers."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._waiting_for_headers():
                if self._header_timer is None:
                    self._arm_header_timer()
            else:
                self._disarm_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._disarm_header_timer()  # the keep-alive timer takes over

        def connection_lost(self, exc) -> None:
            self._disarm_header_timer()
            super().connection_lost(exc)

        def _waiting_for_headers(self) -> bool:
            # bytes of a request have arrived, but not its whole head
            idle = self.cycle is None or self.cycle.response_complete
            return idle and self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

        def _arm_header_timer(self) -> None:
            self._disarm_header_timer()
            self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_late)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


def serve(host: str, port: int, on_listening: Callable[[], None] | None = None) -> bool:
    """Run the node until it is stopped; True when it should restart (an upgrade asked).

    ``on_listening()`` is called once the socket is bound and the node answers."""
    import uvicorn

    from .api import create_app
    from .guard import Guard
    from .runner import current_config

    token = access.node_token(create=True)
    if not token:
        raise TokenError("no node token could be made")
    access.report_token(token)
    limit = raise_open_file_limit()
    memory.limit_arenas()  # before uvicorn and the song threads start: see node.memory
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per engine poll is noise
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

    app = create_app(on_ready=on_ready)
    guarded = Guard(
        app,
        token=lambda: token,
        declared_hosts=lambda: current_config()[0].get("node.allowed_hosts"),
    )
    uv_config = uvicorn.Config(
        guarded,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        timeout_keep_alive=30,
        http=_protocol_class(),
        limit_concurrency=MAX_CONNECTIONS,
    )

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_listening is not None:
                on_listening()

    server = _Server(uv_config)
    holder["server"] = server
    log.info("node listening on %s:%s (token required; open files %s)", host, port, limit)
    server.run()
    node = getattr(app.state, "node", None)
    if not server.started:
        raise OSError(f"the node could not listen on {host}:{port} (see {_log_hint()})")
    return bool(node is not None and node.restart_requested)


def _log_hint() -> str:
    from ..paths import paths

    return str(paths().node_log)
