"""One member of a pool asking another: a take's audio from the member that made it, a song
handed to the member that holds what it edits, a forgotten song's files deleted where they
are. Over httpx (the one HTTP client), with the pool's token — every member's token — and
through the other member's door like any client (Host, token, JSON bodies).

A member's address comes from Redis, which anyone who can write there could change: a
member sends the token only to a node that proved, first, that it holds the token and is
the member at that very address (:mod:`cantor_desktop.auth.proof`'s member proof); a proof
counts for :data:`PROOF_KEPT_S`."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from ... import __version__
from ...auth import access
from ..http_common import ApiError

log = logging.getLogger(__name__)

TIMEOUT = httpx.Timeout(30.0, connect=5.0)
PROOF_TIMEOUT = httpx.Timeout(5.0)
PASSED_HEADERS = ("content-type", "content-length", "content-disposition", "last-modified", "etag")
PROOF_KEPT_S = 30.0
_proven: dict[tuple[str, str], float] = {}  # (member id, URL) → when it last proved itself


async def check_member(member: dict[str, Any]) -> str | None:
    """None when the node at ``member``'s URL proves that it is that member: it holds the
    pool's token and answers for that id at that very address (:func:`cantor_desktop.auth.proof.
    verify_member`: the challenge to its tokenless health check, answered with a MAC under
    the token of the challenge and the address it advertises). Else why not, in words. A
    proof counts for :data:`PROOF_KEPT_S`."""
    from ...auth import proof

    url, member_id = member["url"], member["id"]
    if time.monotonic() - _proven.get((member_id, url), -PROOF_KEPT_S) < PROOF_KEPT_S:
        return None
    token = access.node_token(create=False) or ""
    challenge = proof.new_challenge()
    try:
        async with httpx.AsyncClient(
            base_url=url, timeout=PROOF_TIMEOUT, trust_env=False, follow_redirects=False
        ) as client:
            answer = await client.get("/v1/health", params={proof.QUERY: challenge})
        body = answer.json() if answer.status_code == 200 else None
    except httpx.HTTPError as exc:
        return f"it did not answer at {url}: {exc or type(exc).__name__}"
    except ValueError:
        body = None
    given = body.get("member_proof") if isinstance(body, dict) else None
    if proof.verify_member(token, challenge, member_id, url, given):
        _proven[(member_id, url)] = time.monotonic()
        return None
    _proven.pop((member_id, url), None)
    return f"what answers at {url} did not prove it is that member of the pool"


async def _prove(member: dict[str, Any]) -> None:
    """ApiError unless the node at ``member``'s URL proves it is that member
    (:func:`check_member`): nothing, the token least of all, goes to one that does not."""
    problem = await check_member(member)
    if problem is None:
        return
    name = member.get("name") or member.get("id")
    log.warning("pool: %s (%s): %s: not asked", name, member.get("url"), problem)
    raise ApiError(
        502,
        f"the pool's member {name} ({member.get('url')}) did not prove it holds the pool's "
        f"token: it was sent nothing ({problem})",
        "member_unproven",
    )


def _client(url: str) -> httpx.AsyncClient:
    token = access.node_token(create=False)
    return httpx.AsyncClient(
        base_url=url,
        headers={**access.bearer(token), "User-Agent": f"cantor-node/{__version__}"},
        timeout=TIMEOUT,
        trust_env=False,  # a studio's proxy settings are not for the studio's own network
        follow_redirects=False,
    )


def _unreachable(member: dict[str, Any], exc: Exception | str) -> ApiError:
    name = member.get("name") or member.get("id")
    return ApiError(
        502,
        f"the pool's member {name} ({member.get('url')}) did not answer: {exc}",
        "member_unreachable",
    )


async def stream(
    member: dict[str, Any], path: str, params: dict[str, Any]
) -> StreamingResponse | JSONResponse:
    """``GET path`` on ``member``, its answer passed on as it streams in."""
    await _prove(member)
    client = _client(member["url"])
    try:
        request = client.build_request("GET", path, params=params)
        answer = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise _unreachable(member, exc) from None

    async def close() -> None:
        await answer.aclose()
        await client.aclose()

    if answer.status_code != 200:
        try:
            body = (await answer.aread()).decode("utf-8", "replace")
        finally:
            await close()
        return JSONResponse(_error_body(body, answer.status_code), status_code=answer.status_code)
    headers = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_HEADERS}
    return StreamingResponse(
        answer.aiter_raw(),
        status_code=200,
        headers=headers,
        media_type=answer.headers.get("content-type"),
        background=BackgroundTask(close),
    )


async def send(
    member: dict[str, Any], method: str, path: str, *, params=None, body: Any = None
) -> JSONResponse:
    """A JSON request to ``member``; its answer (status and body) passed on."""
    await _prove(member)
    async with _client(member["url"]) as client:
        try:
            answer = await client.request(method, path, params=params, json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(member, exc) from None
    try:
        data = answer.json()
    except ValueError:
        data = _error_body(answer.text, answer.status_code)
    return JSONResponse(data, status_code=answer.status_code)


def _error_body(text: str, status: int) -> dict[str, Any]:
    import json

    try:
        found = json.loads(text)
        if isinstance(found, dict):
            return found
    except ValueError:
        pass
    return {"error": {"message": text.strip() or f"status {status}", "type": "member_error"}}
