"""The node's HTTP API (FastAPI): songs and their events, uploads, the models and the
adapters, backends, config and a graceful restart, so that the app and the CLI drive
everything through the node.

The routes live in one router a subject (songs, uploads, helper jobs, models, the models
the user brings, adapters, backends, the node itself, Lemonade's generations); what they
share is in :mod:`.http_common` (errors, bodies, SSE), :mod:`.schemas` (what the OpenAPI
document promises) and :mod:`.state` (:class:`~.state.NodeState`). Errors are always
``{"error": {"message", "type"[, "field"]}}`` with a 4xx/5xx status; a bad song request is
refused before anything reaches an engine. Long actions (model pull, backend install/update)
and song events stream as Server-Sent Events: ``event: NAME\\ndata: JSON\\n\\n``.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Awaitable, Callable

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from .routes import (
    adapters as adapter_routes,
    backends as backend_routes,
    helpers as helper_routes,
    lemonade as lemonade_routes,
    library as library_routes,
    models as model_routes,
    node as node_routes,
    pool as pool_routes,
    songs as song_routes,
    styles as style_routes,
    uploads as upload_routes,
)
from ..pool.link import PoolUnavailable
from .guard import BodyStalled, BodyTooLarge
from .http_common import ApiError, error_response
from .state import NodeState, default_state

log = logging.getLogger(__name__)

ROUTERS = (
    library_routes,
    adapter_routes,
    node_routes,
    backend_routes,
    model_routes,
    song_routes,
    style_routes,
    upload_routes,
    helper_routes,
    lemonade_routes,
    pool_routes,
)


def create_app(
    state_factory: Callable[[], Awaitable[NodeState]] | None = None,
    on_ready: Callable[[NodeState], None] | None = None,
) -> FastAPI:
    """The node app. ``state_factory`` builds the queue and runner on startup.

    Who may call it (Host, Origin, the token, body types and sizes) is decided in front of
    it, by :class:`.guard.Guard` (see :func:`.server.serve`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            node = await (state_factory or default_state)()
        except Exception as exc:
            app.state.startup_error = exc  # the reason the node says when it exits
            raise
        app.state.node = node
        if on_ready is not None:
            on_ready(node)
        node.runner.start()
        try:
            yield
        finally:
            node.shutting_down.set()
            await node.runner.stop()
            if node.pool is not None:
                await node.pool.close()

    # no /docs: its page would load JavaScript from a CDN into the node's origin
    app = FastAPI(
        title="Cantor node", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )

    @app.exception_handler(ApiError)
    async def _api_error(_request, exc: ApiError):
        return exc.response()

    @app.exception_handler(PoolUnavailable)
    async def _pool_away(_request, exc: PoolUnavailable):
        return error_response(503, str(exc), "pool_unreachable")

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_request, exc: BodyTooLarge):
        return error_response(413, str(exc), "too_large")

    @app.exception_handler(BodyStalled)
    async def _stalled(_request, exc: BodyStalled):
        return error_response(408, str(exc), "timeout")

    @app.exception_handler(RequestValidationError)
    async def _validation(_request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        return error_response(
            422, f"{field}: {first.get('msg', 'invalid')}", "invalid_request", field
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request, exc: StarletteHTTPException):
        kind = "not_found" if exc.status_code == 404 else "invalid_request"
        return error_response(exc.status_code, str(exc.detail), kind)

    @app.exception_handler(Exception)
    async def _crash(_request, exc: Exception):
        log.exception("unhandled error")
        return error_response(500, f"internal error: {exc}", "internal_error")

    for routes in ROUTERS:
        app.include_router(routes.router)
    return app
