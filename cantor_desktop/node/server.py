"""Starting the node: its token, its door (:mod:`.guard`), then uvicorn.

Every request carries the node's token, loopback included (:mod:`cantor_desktop.auth.access`
makes and keeps it); without one the node refuses to start. The open-file limit is raised
as far as the system allows; the connections it allows are shared out by
:mod:`.connections` (a request's head must arrive within :data:`HEADER_TIMEOUT_S`; when they
run out, those serving no owner's request give way) and the Guard (the owner's requests
have a capacity of their own). uvicorn is used through its public settings only: an idle
keep-alive connection is closed after :data:`KEEP_ALIVE_S`, a request head is at most
:data:`MAX_HEAD_BYTES`, and uvicorn's own ``limit_concurrency`` is off (it counts everyone
alike, the owner included: 1,030 tokenless connections kept every owner's request at 503).
"""

from __future__ import annotations

import logging
import sys
from typing import Callable

from ..auth import access
from ..system import gc_settle
from ..auth.access import TokenError
from . import memory
from .connections import HEAD_TIMEOUT_S, Connections

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = HEAD_TIMEOUT_S
KEEP_ALIVE_S = 5
MAX_HEAD_BYTES = 16 * 2**10
WANTED_OPEN_FILES = 8192

__all__ = ["TokenError", "serve", "raise_open_file_limit"]


def raise_open_file_limit(wanted: int = WANTED_OPEN_FILES) -> int | None:
    """Raise this process's soft limit on open files towards ``wanted`` (macOS starts at
    256); returns the limit in force, or None where there is no such limit (Windows)."""
    if sys.platform == "win32":
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


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
        node.token = token

    from .state import default_state

    app = create_app(state_factory=lambda: default_state((host, port)), on_ready=on_ready)
    connections = Connections.for_open_files(limit)
    guarded = Guard(
        app,
        token=lambda: token,
        declared_hosts=lambda: current_config()[0].get("node.allowed_hosts"),
        connections=connections,
    )
    uv_config = uvicorn.Config(
        guarded,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        http=connections.protocol(),
        limit_concurrency=None,
        backlog=connections.backlog,
    )

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                gc_settle.settle()  # start-up made what the node keeps (see gc_settle)
            if self.started and on_listening is not None:
                on_listening()

    server = _Server(uv_config)
    holder["server"] = server
    log.info(
        "node listening on %s:%s (token required; open files %s, connections %d, backlog %d)",
        host,
        port,
        limit,
        connections.most,
        connections.backlog,
    )
    server.run()
    node = getattr(app.state, "node", None)
    if not server.started:
        refused = getattr(app.state, "startup_error", None)
        if refused is not None:
            raise OSError(f"the node did not start: {refused}")
        raise OSError(f"the node could not listen on {host}:{port} (see {_log_hint()})")
    return bool(node is not None and node.restart_requested)


def _log_hint() -> str:
    from ..system.paths import paths

    return str(paths().node_log)
