"""``POST /v1/audio/generations``: a song the Lemonade / OpenAI way — Lemonade's field names
in, the audio bytes out once the song is made (the song request's own rules check the
values, with Lemonade's names in the errors)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from ..http_common import ApiError, json_body, take_audio
from ..schemas import ERRORS, SONG_SCHEMA, json_request, or_null
from ..song_checks import validated
from ..song_files import CONTENT_TYPES
from ..state import node, node_config

LEMONADE_FORMATS = {
    "wav": "wav16",
    "wav16": "wav16",
    "wav24": "wav24",
    "wav32": "wav32",
    "flac": "flac",
    "mp3": "mp3",
}
FIELDS = {
    "model": "model",
    "prompt": "caption",
    "lyrics": "lyrics",
    "vocal_language": "language",
    "duration": "duration",
    "seed": "seed",
    "response_format": "format",
    "bpm": "bpm",
    "key": "key",
    "time_signature": "time_signature",
    "steps": "steps",
}
"""Lemonade's name of each field → the song request's."""
LEMONADE_NAMES = {ours: theirs for theirs, ours in FIELDS.items() if theirs != ours}
"""The song request's names Lemonade calls otherwise (for its errors)."""

_SONG = SONG_SCHEMA["properties"]
GENERATION_SCHEMA: dict[str, Any] = {  # null leaves a field out (lemonade_request)
    "type": "object",
    "required": ["prompt"],
    "additionalProperties": False,
    "properties": {
        "model": _SONG["model"],
        "prompt": {"type": "string", "minLength": 1},
        "lyrics": _SONG["lyrics"],
        "vocal_language": _SONG["language"],
        "duration": _SONG["duration"],
        "steps": _SONG["steps"],
        "seed": _SONG["seed"],
        "response_format": or_null({"type": "string", "enum": list(LEMONADE_FORMATS)}),
        "bpm": _SONG["bpm"],
        "key": _SONG["key"],
        "time_signature": _SONG["time_signature"],
    },
}

router = APIRouter()


def lemonade_request(body: dict[str, Any]) -> dict[str, Any]:
    """Lemonade's fields → a song request (unknown fields are refused by name; the song
    request's own rules check the values, with Lemonade's names in the errors)."""
    out: dict[str, Any] = {}
    for k, v in body.items():
        if k not in FIELDS:
            raise ApiError(422, f"{k}: unknown field; known: {', '.join(FIELDS)}", field=k)
        if v is not None:
            out[FIELDS[k]] = v
    if "caption" not in out:
        raise ApiError(422, "prompt: is required: describe the song", field="prompt")
    fmt = out.get("format")
    if fmt is not None:
        if not isinstance(fmt, str) or fmt not in LEMONADE_FORMATS:
            raise ApiError(
                422,
                f"response_format: {fmt!r} is not a format; one of {', '.join(LEMONADE_FORMATS)}",
                field="response_format",
            )
        out["format"] = LEMONADE_FORMATS[fmt]
    return out


@router.post(
    "/v1/audio/generations",
    openapi_extra=json_request(GENERATION_SCHEMA),
    responses={
        200: {"description": "the audio bytes", "content": {t: {} for t in CONTENT_TYPES.values()}},
        **ERRORS,
    },
)
async def generations(request: Request):
    node_state = node(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    data = lemonade_request(body)
    try:
        checked, _note = await asyncio.to_thread(validated, data, node_config())
    except ApiError as exc:
        if exc.field in LEMONADE_NAMES:
            old, exc.field = exc.field, LEMONADE_NAMES[exc.field]
            exc.message = exc.message.replace(f"{old}:", f"{exc.field}:", 1)
        raise
    node_state.check_room(node_config().get("node.max_queue"))
    lane = None
    if node_state.pool is not None:  # the audio comes back from here: this member makes it
        from ...pool.redis_keys import node_lane

        lane = node_lane(node_state.pool.me["id"])
    song = await node_state.queue.submit(checked, lane)
    node_state.runner.wake()
    q = node_state.queue.hub.subscribe(song.id)
    try:
        while not song.is_finished:
            try:
                await asyncio.wait_for(q.get(), 1.0)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    node_state.runner.cancel(song)
                    raise ApiError(499, "client went away", "cancelled") from None
    finally:
        node_state.queue.hub.unsubscribe(song.id, q)
    if song.state == "done":
        return await asyncio.to_thread(
            take_audio, song.takes[0].audio, headers={"X-Cantor-Song": song.id}
        )
    if song.state == "cancelled":
        raise ApiError(409, "the song was cancelled", "cancelled", id=song.id)
    raise ApiError(500, song.error or "the song failed", "generation_failed", id=song.id)
