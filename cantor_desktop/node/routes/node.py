"""The node's routes about itself: whether it is up (``GET /v1/health``, the one route open
to all), its settings (``GET|PATCH /v1/config``, node.toml on its machine) and ending it
(``POST /v1/node/restart`` once the running songs end, ``/v1/node/shutdown`` now)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ... import __version__, config
from ...auth import proof
from ..http_common import ApiError, json_body
from ..schemas import (
    CONFIG_JSON,
    CONFIG_SCHEMA,
    ERRORS,
    GUARDED,
    HEALTH_JSON,
    LIST,
    json_request,
    obj,
    ok,
)
from ..state import node, node_token

router = APIRouter()


@router.get(
    "/v1/health",
    responses={**ok(HEALTH_JSON, "a node is up"), 403: ERRORS[403], 422: ERRORS[422]},
)
async def health(
    request: Request,
    challenge: str | None = Query(
        None,
        pattern=f"^{proof.CHALLENGE.pattern}$",
        description="64 hex digits: the answer carries the node's proof of its token",
    ),
):
    """Open to all (no token): says that a node is up. With a ``challenge``, the answer
    also proves that this node holds the token (:mod:`cantor_desktop.auth.proof`): ``proof`` is
    the MAC of the challenge and ``port`` under the token, and in a pool ``member_proof``
    the MAC of the challenge and the address this node advertises to the pool. It tells
    nothing else: no home, no user, no path."""
    body: dict = {"status": "ok", "version": __version__}
    token = node_token(request)
    if challenge is not None and token:
        port = int((request.scope.get("server") or (None, 0))[1] or 0)
        body["port"] = port
        body["proof"] = proof.answer(token, challenge, port)
        pool = node(request).pool
        if pool is not None:
            body["member_proof"] = proof.member_answer(
                token, challenge, pool.me["id"], pool.me["url"]
            )
    return body


@router.get("/v1/config", responses={**ok(CONFIG_JSON, "the settings"), **GUARDED})
async def get_config():
    cfg, err = config.load_or_defaults()
    return {
        "values": cfg.as_dict(),
        "options": config.describe(),
        "path": str(cfg.path),
        "error": str(err) if err else None,
    }


@router.patch(
    "/v1/config",
    openapi_extra=json_request(CONFIG_SCHEMA),
    responses={**ok(CONFIG_JSON, "the settings, changed"), **ERRORS},
)
async def patch_config(request: Request):
    body = await json_body(request)
    if not isinstance(body, dict) or not body:
        raise ApiError(
            422,
            'body: give an object of settings to change, e.g. {"node.keep_loaded": true}',
            field="body",
        )
    for key, value in list(body.items()):
        opt = config.OPTIONS.get(key)
        if opt is not None and opt.kind is int and isinstance(value, float) and value.is_integer():
            body[key] = int(value)  # JSON has one number type: 8000.0 is 8000
        if opt is not None and opt.local_only:
            raise ApiError(
                403,
                f"{key} can be changed only on the node's own machine: "
                f"`cantor config set {key} VALUE` there, or edit its "
                f"node.toml",
                "local_only_setting",
                key,
            )
    try:
        cfg = await asyncio.to_thread(config.update, body)
    except config.ConfigError as exc:
        raise ApiError(422, str(exc), field=exc.key or "body") from None
    return {"values": cfg.as_dict(), "path": str(cfg.path)}


@router.post(
    "/v1/node/restart",
    status_code=202,
    responses={
        **ok(
            obj({"status": {"const": "restarting"}, "after": LIST}),
            "restarting once the running songs end",
            202,
        ),
        **GUARDED,
    },
)
async def restart(request: Request):
    """Restart the node once the running songs end (``cantor upgrade`` uses this)."""
    node_state = node(request)
    node_state.restart_requested = True
    node_state.runner.draining = True

    async def when_idle():
        await node_state.runner.idle.wait()
        node_state.request_exit()

    asyncio.get_running_loop().create_task(when_idle())
    return JSONResponse(
        {"status": "restarting", "after": [s.id for s in node_state.queue.running()]},
        status_code=202,
    )


@router.post(
    "/v1/node/shutdown",
    status_code=202,
    responses={
        **ok(
            obj({"status": {"const": "stopping"}, "running": LIST}),
            "stopping: songs end, engines stop, it exits",
            202,
        ),
        **GUARDED,
    },
)
async def shutdown(request: Request):
    """Stop the node now (the app's Quit): running songs end as "node stopped", engines
    stop and their records are cleared, then the process exits."""
    node_state = node(request)
    running = [s.id for s in node_state.queue.running()]
    asyncio.get_running_loop().call_later(0.05, node_state.request_exit)  # after this answer
    return JSONResponse({"status": "stopping", "running": running}, status_code=202)
