"""The node's routes for its machine and its engine builds: what it has and runs
(``GET /v1/system``, ``GET /v1/backends``) and the long backend actions, one at a time, as
Server-Sent Events (``POST /v1/backends/use``, ``/install``, ``/update``; see
:meth:`.state.NodeState.backend_stream`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Request

from ... import __version__, config
from ..http_common import ApiError, json_body, jsonable
from ..schemas import (
    BACKEND_SCHEMA,
    ERRORS,
    FAMILY_SCHEMA,
    GUARDED,
    OBJ,
    SSE,
    SYSTEM_JSON,
    json_request,
    obj,
    ok,
)
from ..state import node, node_config

router = APIRouter()


def _family(family: Any) -> str:
    if family not in config.FAMILIES:
        raise ApiError(
            422,
            f"family: {family!r} is not a family; one of {', '.join(config.FAMILIES)}",
            field="family",
        )
    return family


def _family_backend(body: Any, *, allow_auto: bool) -> tuple[str, str]:
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    family = _family(body.get("family", "acestep"))
    backend = body.get("backend")
    allowed = (("auto",) if allow_auto else ()) + config.BACKENDS
    if backend not in allowed:
        raise ApiError(
            422,
            f"backend: {backend!r} is not a backend; one of {', '.join(allowed)}",
            field="backend",
        )
    return family, backend


@router.get("/v1/system", responses={**ok(SYSTEM_JSON, "hardware, backends, engines"), **GUARDED})
async def system(request: Request):
    """Hardware with evidence, each family's backends with state, the pinned and the
    default backend, keep_loaded, and what each engine has loaded now."""
    node_state = node(request)
    cfg = node_config()
    out: dict[str, Any] = {
        "version": __version__,
        "keep_loaded": cfg.get("node.keep_loaded"),
        "loaded": node_state.runner.loaded(),
        "families": {},
        "uptime": round(time.time() - node_state.started, 1),
        "restarting": node_state.restart_requested,
        "pool": node_state.pool.describe() if node_state.pool is not None else None,
    }
    from ...install import backends

    hw = await node_state.hardware()
    out["hardware"] = jsonable(hw)
    for family in config.FAMILIES:
        try:
            st = await asyncio.to_thread(backends.status, family, hw)
            out["families"][family] = st.to_dict()
        except Exception as exc:
            out["families"][family] = {"error": str(exc), "pinned": cfg.pinned_backend(family)}
    return out


@router.get("/v1/backends", responses={**ok(obj({"backends": OBJ})), **GUARDED})
async def backends_status(request: Request):
    from ...install import backends

    hw = await node(request).hardware()
    out = {}
    for family in config.FAMILIES:
        st = await asyncio.to_thread(backends.status, family, hw)
        out[family] = st.to_dict()
    return {"backends": out}


@router.post(
    "/v1/backends/use", openapi_extra=json_request(BACKEND_SCHEMA), responses={**SSE, **ERRORS}
)
async def backends_use(request: Request):
    """Fetch and trial-load a backend, then pin it ("auto" removes the pin). SSE."""
    node_state = node(request)
    body = await json_body(request)
    _family_name, backend = _family_backend(body, allow_auto=True)
    from ...install import backends

    async def work(emit):
        builds = await backends.use(backend, on_event=lambda ev: emit(*ev.to_sse()))
        return {
            "backend": backend,
            "builds": builds,
            "note": "a running engine keeps its build until the node restarts",
        }

    return node_state.backend_stream(f"use {backend}", work)


@router.post(
    "/v1/backends/install",
    openapi_extra=json_request(FAMILY_SCHEMA, required=False),
    responses={**SSE, **ERRORS},
)
async def backends_install(request: Request):
    """Install the best backend that works here (trial-loaded), like --install. SSE."""
    node_state = node(request)
    body = await json_body(request, required=False)
    family = _family((body or {}).get("family", "acestep") if isinstance(body, dict) else None)
    from ...install import backends

    async def work(emit):
        return await backends.install(family, on_event=lambda ev: emit(*ev.to_sse()))

    return node_state.backend_stream(f"install {family}", work)


@router.post("/v1/backends/update", responses={**SSE, **ERRORS})
async def backends_update(request: Request):
    from ...install import backends

    async def work(emit):
        return await backends.update(on_event=lambda ev: emit(*ev.to_sse()))

    return node(request).backend_stream("update", work)
