"""The node's routes for songs: queue one (checked here, before anything reaches an
engine), list, read, rename, play, cancel, retry and forget them, and follow their events
as Server-Sent Events (one song's, or every song's on ``/v1/events``)."""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ...song.record import Song
from ..http_common import ApiError, json_body, sse, sse_response, take_audio
from .models import check_model
from ..queue import ALL, CANCELLED, FAILED
from ..schemas import (
    ERRORS,
    GUARDED,
    SONG_JSON,
    SONG_PATCH_SCHEMA,
    SONG_SCHEMA,
    SONG_STATE,
    SSE,
    STR,
    TITLE_MAX,
    json_request,
    obj,
    ok,
)
from ..song_checks import check_sources, validated
from ..song_files import CONTENT_TYPES
from ..state import NodeState, node, node_config

KEEPALIVE_S = 15.0
STREAM_CHECK_S = 0.5
AUDIO = {"description": "the audio file", "content": {t: {} for t in CONTENT_TYPES.values()}}

router = APIRouter()
log = logging.getLogger(__name__)


def song_of(node_state: NodeState, song_id: str) -> Song:
    song = node_state.queue.get(song_id)
    if song is None:
        raise ApiError(404, f"no song with id {song_id!r}", "not_found", "id")
    return song


async def event_stream(
    node_state: NodeState, song: Song | None, request: Request
) -> AsyncIterator[bytes]:
    """One song's events (its current state first, ending with its final event), or with
    ``song`` None every song's, for as long as the client stays (the node-wide stream)."""
    key = ALL if song is None else song.id
    q = node_state.queue.hub.subscribe(key)
    try:
        if song is not None:
            for event in node_state.queue.snapshot_events(song):
                yield sse(*event.to_sse())
                if event.is_final:
                    return
        else:
            yield sse("hello", {"songs": len(node_state.queue.songs)})
        quiet = 0.0
        while True:
            try:
                event = await asyncio.wait_for(q.get(), STREAM_CHECK_S)
            except asyncio.TimeoutError:
                # a stopping node ends its streams at once instead of holding shutdown up
                if (
                    node_state.exiting()
                    or node_state.shutting_down.is_set()
                    or await request.is_disconnected()
                ):
                    return
                quiet += STREAM_CHECK_S
                if quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield b": keep-alive\n\n"
                continue
            quiet = 0.0
            yield sse(*event.to_sse())
            if song is not None and event.is_final:
                return
    finally:
        node_state.queue.hub.unsubscribe(key, q)


async def _members_now(pool) -> None:
    """The pool's members read from Redis now rather than at the next heartbeat: a song
    for a member (or a model) that joined a moment ago is not refused. Redis failing here
    leaves the last heartbeat's view, which the refusal then names."""
    try:
        await pool.members.beat()
    except Exception:  # noqa: BLE001 - the heartbeat reports the link's trouble itself
        log.debug("pool: members not read again", exc_info=True)


@router.post(
    "/v1/songs",
    status_code=202,
    openapi_extra=json_request(SONG_SCHEMA),
    responses={
        **ok(obj({"id": STR, "state": STR, "model": STR}, {"note": STR}), "queued", 202),
        **ERRORS,
    },
)
async def submit(request: Request, node_id: str | None = Query(None, alias="node")):
    """Queue a song. In a pool ``?node=ID`` (or a member's name) sends it to one member;
    without it any member that can make it takes it."""
    node_state = node(request)
    body = await json_body(request)
    cfg = node_config()
    pool = node_state.pool
    lane = None
    if pool is not None:
        pool.link.check_up()
        target = None
        if node_id:
            from ..pool.membership import MemberRefused

            try:
                target = await pool.member_named(node_id)
                if target is None:  # one that joined since this node's last heartbeat?
                    await _members_now(pool)
                    target = await pool.member_named(node_id)
            except MemberRefused as exc:
                raise ApiError(409, str(exc), "member_unproven", "node") from None
            if target is None:
                raise ApiError(
                    422, f"node: no member of the pool is called {node_id!r}", field="node"
                )
        models = pool.members.pool_models()
        wanted = body.get("model") if isinstance(body, dict) else None
        if isinstance(wanted, str) and wanted not in models:  # a member that joined since?
            await _members_now(pool)
            models = pool.members.pool_models()
        if target is not None:
            member = pool.members.member(target) or {}
            models = {m: [member.get("name") or target] for m in member.get("models") or ()}
        data, note = await asyncio.to_thread(validated, body, cfg, models)
        holder = pool.holder_of(data)
        if target is None and holder is not None and holder != pool.me["id"]:
            # an edit of a take that lives on another member: that member queues it
            member = pool.members.member(holder)
            if member is None or not pool.members.is_alive(holder):
                name = (member or {}).get("name") or holder
                raise ApiError(
                    409,
                    f"the take this song edits is on {name}, which is not in the pool now",
                    "member_away",
                    "source",
                )
            from ..pool import peers as pool_peers

            return await pool_peers.send(
                member, "POST", "/v1/songs", params={"node": holder}, body=body
            )
        if target is None or target == pool.me["id"]:
            await asyncio.to_thread(check_sources, data, node_state.queue.songs)
        lane = pool.lane_for(data, target)
    else:
        data, note = await asyncio.to_thread(validated, body, cfg)  # lists the model folder
        await asyncio.to_thread(check_sources, data, node_state.queue.songs)
    node_state.check_room(cfg.get("node.max_queue"))
    song = await node_state.queue.submit(data, lane)  # saved before the 202: it survives a crash
    node_state.runner.wake()
    answer = {"id": song.id, "state": str(song.state), "model": data["model"]}
    if note:
        answer["note"] = note
    return JSONResponse(answer, status_code=202)


@router.get(
    "/v1/songs",
    responses={
        **ok(obj({"songs": {"type": "array", "items": SONG_JSON}}), "newest first"),
        **GUARDED,
    },
)
async def list_songs(request: Request, state: str | None = None, limit: int = 500):
    node_state = node(request)
    songs = node_state.queue.newest_first()
    if state:
        songs = [s for s in songs if s.state == state]
    return {"songs": [node_state.queue.public(s) for s in songs[: max(limit, 0)]]}


@router.get("/v1/songs/{song_id}", responses={**ok(SONG_JSON, "the song"), **ERRORS})
async def get_song(request: Request, song_id: str):
    node_state = node(request)
    return node_state.queue.public(song_of(node_state, song_id))


@router.get("/v1/events", responses={**SSE, **GUARDED})
async def all_events(request: Request):
    """Every song's events, whoever asked for it: ``added``, ``changed``, ``removed``
    (the whole song, or its id) besides each song's own; starts with ``hello``."""
    return sse_response(event_stream(node(request), None, request))


@router.patch(
    "/v1/songs/{song_id}",
    openapi_extra=json_request(SONG_PATCH_SCHEMA),
    responses={**ok(SONG_JSON, "the song, changed"), **ERRORS},
)
async def change_song(request: Request, song_id: str):
    """Rename a song (``title``; "" gives it back its caption) or mark it a favourite."""
    node_state = node(request)
    song = song_of(node_state, song_id)
    body = await json_body(request)
    if not isinstance(body, dict) or not body:
        raise ApiError(422, "body: give title and/or favourite", field="body")
    for key in body:
        if key not in ("title", "favourite"):
            raise ApiError(422, f"{key}: unknown field; known: title, favourite", field=key)
    title = body.get("title")  # a field left out is left as it is; null is refused
    if "title" in body and (not isinstance(title, str) or len(title) > TITLE_MAX or "\n" in title):
        raise ApiError(
            422, f"title: must be one line of at most {TITLE_MAX} characters", field="title"
        )
    favourite = body.get("favourite")
    if "favourite" in body and not isinstance(favourite, bool):
        raise ApiError(422, "favourite: must be true or false", field="favourite")
    node_state.queue.change(
        song, title=None if title is None else title.strip(), favourite=favourite
    )
    await node_state.queue.flush()
    return node_state.queue.public(song)


@router.get("/v1/songs/{song_id}/events", responses={**SSE, **ERRORS})
async def events(request: Request, song_id: str):
    node_state = node(request)
    song = song_of(node_state, song_id)
    return sse_response(event_stream(node_state, song, request))


@router.get("/v1/songs/{song_id}/audio", responses={200: AUDIO, 410: ERRORS[404], **ERRORS})
async def audio(request: Request, song_id: str, take: int = 1):
    node_state = node(request)
    song = song_of(node_state, song_id)
    if song.state != "done" or not song.takes:
        raise ApiError(409, f"song {song_id} has no audio (it is {song.state})", "not_ready", "id")
    found = song.take(take)
    if found is None:
        raise ApiError(422, f"take: must be from 1 to {len(song.takes)}", field="take")
    elsewhere = _maker_elsewhere(node_state, song)
    if elsewhere is not None:
        from ..pool import peers as pool_peers

        return await pool_peers.stream(elsewhere, f"/v1/songs/{song.id}/audio", {"take": take})
    return await asyncio.to_thread(take_audio, found.audio, filename=found.file_name)


def _maker_elsewhere(node_state: NodeState, song: Song) -> dict | None:
    """In a pool: the member that made ``song`` when its takes are on that member only
    (not here, not on the shared folder); ApiError when that member is away."""
    if node_state.pool is None or not song.node or song.node.get("shared"):
        return None
    maker = song.node.get("id")
    if not maker or maker == node_state.pool.me["id"]:
        return None
    member = node_state.pool.members.member(maker)
    if member is None or not node_state.pool.members.is_alive(maker):
        name = song.node.get("name") or maker
        raise ApiError(
            503,
            f"the takes of song {song.id} are on {name}, which is not in the pool now",
            "member_away",
            "id",
        )
    return member


@router.post("/v1/songs/{song_id}/cancel", responses={**ok(SONG_STATE, "cancelled"), **ERRORS})
async def cancel(request: Request, song_id: str):
    node_state = node(request)
    song = song_of(node_state, song_id)
    if not node_state.runner.cancel(song):
        raise ApiError(
            409,
            f"song {song_id} already ended ({song.state})",
            "not_cancellable",
            "id",
            state=song.state,
        )
    return {"id": song.id, "state": song.state}


@router.delete(
    "/v1/songs/{song_id}",
    responses={
        **ok(
            obj(
                {
                    "id": STR,
                    "forgotten": {"const": True},
                    "files_deleted": {"type": "array", "items": STR},
                    "files_kept": {"type": "array", "items": STR},
                }
            ),
            "forgotten",
        ),
        **ERRORS,
    },
)
async def delete_song(request: Request, song_id: str, delete_files: bool = False):
    """Forget a done, failed or cancelled song (409 while it is queued or running:
    cancel it first); ``delete_files=true`` also deletes its audio files and sidecars."""
    node_state = node(request)
    song = song_of(node_state, song_id)
    if not song.is_finished:
        raise ApiError(
            409,
            f"song {song_id} is {song.state}; cancel it first",
            "not_finished",
            "id",
            state=song.state,
        )
    if delete_files and song.takes:
        elsewhere = _maker_elsewhere(node_state, song)
        if elsewhere is not None:  # the files are on their maker: it deletes them
            from ..pool import peers as pool_peers

            return await pool_peers.send(
                elsewhere, "DELETE", f"/v1/songs/{song.id}", params={"delete_files": "true"}
            )
    removed: dict[str, list[str]] = {"deleted": [], "kept": []}
    if delete_files and song.takes:
        from ..song_files import delete_takes

        removed = await asyncio.to_thread(delete_takes, song.id, song.takes)
    from .. import sources

    await asyncio.to_thread(sources.forget_latents, song.id)
    node_state.queue.forget(song)  # only once its files are gone: no one sees it half done
    await node_state.queue.flush()  # gone from the file before the answer
    return {
        "id": song.id,
        "forgotten": True,
        "files_deleted": removed["deleted"],
        "files_kept": removed["kept"],
    }


@router.post(
    "/v1/songs/{song_id}/retry",
    status_code=202,
    responses={**ok(SONG_STATE, "queued again", 202), **ERRORS},
)
async def retry(request: Request, song_id: str):
    node_state = node(request)
    song = song_of(node_state, song_id)
    if song.state not in (FAILED, CANCELLED):
        raise ApiError(
            409,
            f"only a failed or cancelled song can be retried; this one is {song.state}",
            "not_retryable",
            "id",
            state=song.state,
        )
    cfg = node_config()
    if node_state.pool is None:
        await asyncio.to_thread(check_model, song.request.get("model") or cfg.get("models.default"))
    node_state.check_room(cfg.get("node.max_queue"))
    node_state.queue.retry(song)
    node_state.runner.wake()
    await node_state.queue.flush()
    return JSONResponse({"id": song.id, "state": str(song.state)}, status_code=202)
