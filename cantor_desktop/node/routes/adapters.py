"""The node's routes for LoRA adapters (kept in its models folder, ``models/adapters``):

- ``GET /v1/adapters``: the installed ones, with what each was made for;
- ``POST /v1/adapters`` ``{"path"[, "name"]}``: copy in a ``.safetensors`` file or a PEFT
  folder on the node's machine (for a client on that machine, as model import by path);
- ``POST /v1/adapters/upload?name=NAME``: a ``.safetensors`` sent from another machine
  (``application/octet-stream``, capped by the guard's :class:`~.guard.BodyRule`);
- ``DELETE /v1/adapters/{name}``: 409 while a queued or running song names it.

An adapter added while the node runs is used from the next song on: the runner restarts an
engine between songs when the adapters changed since it started (ace-server scans
``--adapters`` only at start). :func:`check_song_adapter` is the song request's check.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ...models import adapters
from ..http_common import (
    FILE_BODY,
    ApiError,
    content_length,
    path_body,
    refuse_a_path_from_elsewhere,
)
from ..schemas import ERRORS, binary_request, json_request, path_request
from ..state import node

UPLOAD_PATH = "/v1/adapters/upload"
ADD_SCHEMA = path_request(
    "a .safetensors file or a PEFT folder, as an absolute path on the node's machine",
    name={"type": "string", "description": "default: the file's or folder's name"},
)

router = APIRouter()


def _refused(exc: adapters.AdapterError) -> ApiError:
    extra: dict[str, Any] = {}
    if isinstance(exc, adapters.MadeForAnotherModel):
        extra["made_for"] = exc.made_for
    if isinstance(exc, adapters.UnknownAdapter):
        extra["installed"] = exc.installed
    kind = (
        "made_for_another_model"
        if isinstance(exc, adapters.MadeForAnotherModel)
        else "adapter_not_found"
        if isinstance(exc, adapters.UnknownAdapter)
        else "adapter_refused"
    )
    return ApiError(exc.status, str(exc), kind, exc.field, **extra)


def listing() -> dict[str, Any]:
    store = adapters.store()
    return {"adapters": [a.to_json() for a in store.list()], "folder": str(store.folder)}


@router.get("/v1/adapters")
async def list_adapters():
    """The installed adapters: name (what a song's ``adapter`` names), size, format, what
    they were made for (``made_for``, ``dit``: 2B or XL), rank and alpha."""
    return await asyncio.to_thread(listing)


@router.post(
    "/v1/adapters",
    status_code=201,
    openapi_extra=json_request(ADD_SCHEMA),
    responses={201: {"description": "added"}, **ERRORS},
)
async def add_adapter(request: Request):
    """Copy a ``.safetensors`` adapter or a PEFT folder on the node's machine into its
    adapters folder (checked first: one made for another model is refused, saying why)."""
    body = await path_body(
        request, ("path", "name"), "a .safetensors file or a PEFT adapter folder"
    )
    path, name = body["path"], body.get("name")
    if name is not None and not isinstance(name, str):
        raise ApiError(422, "name: must be text", field="name")
    refuse_a_path_from_elsewhere(request, f"upload the .safetensors file (POST {UPLOAD_PATH})")
    try:
        added = await asyncio.to_thread(adapters.store().add, path, name)
    except adapters.AdapterError as exc:
        raise _refused(exc) from None
    return JSONResponse({"added": added.to_json()}, status_code=201)


@router.post(
    UPLOAD_PATH,
    status_code=201,
    openapi_extra=binary_request(FILE_BODY),
    responses={201: {"description": "added"}, **ERRORS},
)
async def upload_adapter(request: Request, name: str):
    """A ``.safetensors`` adapter sent from another machine, kept as ``name`` once whole and
    checked. (A PEFT folder is added by path on its own machine.)"""
    try:
        added = await adapters.store().receive(name, request.stream(), content_length(request))
    except adapters.AdapterError as exc:
        raise _refused(exc) from None
    return JSONResponse({"added": added.to_json()}, status_code=201)


@router.delete("/v1/adapters/{name}", responses=ERRORS)
async def remove_adapter(request: Request, name: str):
    """Delete an adapter; 409 while a queued or running song names it."""
    queue = node(request).queue
    using = [
        s.id
        for s in [*queue.queued(), *queue.running()]
        if s.request.get("adapter") in _names_of(name)
    ]
    if using:
        raise ApiError(
            409,
            f"adapter {name!r} is in use by {len(using)} song(s) queued or "
            f"running ({', '.join(using)}); remove it when they have ended "
            f"(or cancel them)",
            "in_use",
            "name",
            songs=using,
        )
    try:
        freed = await asyncio.to_thread(adapters.store().remove, name)
    except adapters.AdapterError as exc:
        raise _refused(exc) from None
    return {"removed": name, "freed_bytes": freed}


def _names_of(name: str) -> set[str]:
    """Both names a song may give one adapter (``x`` and ``x.safetensors``)."""
    if name.endswith(adapters.SUFFIX):
        return {name, name[: -len(adapters.SUFFIX)]}
    return {name, name + adapters.SUFFIX}


def check_song_adapter(data: dict[str, Any]) -> None:
    """A song's ``adapter`` is installed here, and fits its model (an XL adapter on a 2B
    DiT, or the other way round, would change nothing): else a 422 naming the field and
    the installed adapters."""
    name = data.get("adapter")
    if not name:
        return
    try:
        adapter = adapters.store().get(name)
    except adapters.UnknownAdapter as exc:
        raise ApiError(
            422, f"adapter: {exc}", "adapter_not_found", "adapter", installed=exc.installed
        ) from None
    if adapter.problem:
        raise ApiError(422, f"adapter: {name} cannot be used: {adapter.problem}", field="adapter")
    model = str(data.get("model") or "")
    if adapter.dit and model and model != "sketch":
        xl = "xl" in model.lower()
        if (adapter.dit == "XL") != xl:
            raise ApiError(
                422,
                f"adapter: {name} was made for the {adapter.dit} DiT and "
                f"{model} is {'an XL' if xl else 'a 2B'} model; it would "
                f"change nothing (choose {'an' if adapter.dit == 'XL' else 'a'} "
                f"{adapter.dit} model)",
                field="adapter",
            )
