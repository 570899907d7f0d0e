"""``GET /v1/pool``: the pool this node is a member of — every member (alive or gone), its
backend and engines, the models it can make, what it is making — its lanes (songs waiting,
songs taken and by whom) and its songs by state. 404 on a node that is not in a pool.
``?brief=true``: only the pool's state as this node sees it (reachable or not, why, how many
members are alive), without asking Redis — what an app polls while it shows no member;
``?songs=false``: without the songs by state (a look at every song's record), what an app
showing the members polls."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from ..http_common import ApiError
from ..schemas import ERRORS, OBJ, ok
from ..state import node

router = APIRouter()


@router.get("/v1/pool", responses={**ok(OBJ, "the pool"), **ERRORS})
async def pool_status(request: Request, brief: bool = Query(False), songs: bool = Query(True)):
    node_state = node(request)
    if node_state.pool is None:
        raise ApiError(
            404,
            "this node is not in a pool (start it with `cantor node --pool URL`, or "
            "`cantor pool join URL`)",
            "not_in_pool",
        )
    return node_state.pool.describe() if brief else await node_state.pool.status(songs)
