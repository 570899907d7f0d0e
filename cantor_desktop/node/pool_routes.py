"""``GET /v1/pool``: the pool this node is a member of — every member (alive or gone), its
backend and engines, the models it can make, what it is making — its lanes (songs waiting,
songs taken and by whom) and its songs by state. 404 on a node that is not in a pool."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .http_common import ApiError
from .schemas import ERRORS, OBJ, ok
from .state import node

router = APIRouter()


@router.get("/v1/pool", responses={**ok(OBJ, "the pool"), **ERRORS})
async def pool_status(request: Request):
    n = node(request)
    if n.pool is None:
        raise ApiError(
            404,
            "this node is not in a pool (start it with `cantor node --pool URL`, or "
            "`cantor pool join URL`)",
            "not_in_pool",
        )
    return await n.pool.status()
