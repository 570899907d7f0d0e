"""One member of a pool asking another: a take's audio from the member that made it, a song
handed to the member that holds what it edits, a forgotten song's files deleted where they
are. Over httpx (the one HTTP client), with the pool's token — every member's token — and
through the other member's door like any client (Host, token, JSON bodies)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from .. import __version__, access
from .http_common import ApiError

log = logging.getLogger(__name__)

TIMEOUT = httpx.Timeout(30.0, connect=5.0)
PASSED_HEADERS = ("content-type", "content-length", "content-disposition", "last-modified", "etag")


def _client(url: str) -> httpx.AsyncClient:
    token = access.node_token(create=False)
    return httpx.AsyncClient(
        base_url=url,
        headers={**access.bearer(token), "User-Agent": f"cantor-node/{__version__}"},
        timeout=TIMEOUT,
        trust_env=False,  # a studio's proxy settings are not for the studio's own network
        follow_redirects=False,
    )


def _unreachable(member: dict[str, Any], exc: Exception) -> ApiError:
    name = member.get("name") or member.get("id")
    return ApiError(
        502,
        f"the pool's member {name} ({member.get('url')}) did not answer: {exc}",
        "member_unreachable",
    )


async def stream(member: dict[str, Any], path: str, params: dict[str, Any]) -> StreamingResponse:
    """``GET path`` on ``member``, its answer passed on as it streams in."""
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
