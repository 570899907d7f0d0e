"""The node's routes for styles (:mod:`..styles`): kept by the node so every app and the CLI
see the same ones.

- ``GET /v1/styles``: every style, each with what this node lacks for it (``missing``);
- ``POST /v1/styles`` ``{"name", "fields"?, "seed"?, "from"?, "reference"?, "replace"?}``:
  keep a style — from a song's recipe (``from``: ``{"song", "take"}``) and/or the fields
  given; its reference sound (a take or an upload; the song's own reference when it comes
  ``from`` a song) copied for the style;
- ``DELETE /v1/styles/{name}``, ``POST /v1/styles/{name}/rename`` ``{"name"}``;
- ``GET /v1/styles/{name}/file``: the style as one file (a zip with its sound);
  ``POST /v1/styles/import`` that file as the body.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...files import write_stream
from ...song import style as recipe
from ...song.request import RequestError, check_ref
from .. import sources, styles, uploads
from ..http_common import FILE_BODY, ApiError, json_body
from ..schemas import ERRORS, LIST, OBJ, STR, binary_request, json_request, obj, ok
from ..state import node
from .models import installed_names

router = APIRouter()

STYLE_JSON = obj(
    {"name": STR, "fields": OBJ, "seed": {"type": ["integer", "string"]}, "missing": LIST},
    {"reference": {"type": ["object", "null"]}, "reference_name": STR},
)
SAVE_FIELDS = ("name", "fields", "seed", "from", "reference", "replace")
NAME_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": recipe.NAME_MAX,
    "pattern": recipe.NAME_PATTERN,
}
SAVE_SCHEMA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": NAME_SCHEMA,
        "fields": {
            "type": "object",
            "description": "song settings a style keeps, each checked as a song request's",
            "additionalProperties": False,
            "properties": {name: {} for name in recipe.RECIPE_FIELDS},
        },
        "seed": {
            "oneOf": [
                {"const": recipe.RANDOM},
                {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
            ]
        },
        "from": {"type": "object", "description": '{"song": id, "take": n}'},
        "reference": {
            "type": ["object", "null"],
            "description": '{"song": id, "take": n} or {"upload": id}',
        },
        "replace": {"type": "boolean"},
    },
}
RENAME_SCHEMA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": NAME_SCHEMA},
}
IMPORT_PATH = "/v1/styles/import"


def _refused(exc: recipe.StyleError) -> ApiError:
    return ApiError(422, str(exc), "invalid_request", exc.field)


def _shown(style: recipe.Style) -> dict[str, Any]:
    from ...models import adapters

    installed = set(installed_names())
    missing = styles.missing(style, installed, set(adapters.store().names()))
    return {**style.to_json(), "missing": missing}


@router.get("/v1/styles", responses={**ok(obj({"styles": LIST}), "every style"), **ERRORS})
async def list_styles():
    def listing() -> list[dict[str, Any]]:
        return [_shown(s) for s in styles.every()]

    return {"styles": await asyncio.to_thread(listing)}


@router.post(
    "/v1/styles",
    status_code=201,
    openapi_extra=json_request(SAVE_SCHEMA),
    responses={**ok(STYLE_JSON, "kept", 201), **ERRORS},
)
async def save_style(request: Request):
    """Keep a style: from a song's recipe, the fields given, or both (the fields win)."""
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    for key in body:
        if key not in SAVE_FIELDS:
            known = ", ".join(SAVE_FIELDS)
            raise ApiError(422, f"{key}: unknown field; known: {known}", field=key)
    replace = body.get("replace", True)
    if not isinstance(replace, bool):
        raise ApiError(422, "replace: true or false", field="replace")
    songs = node(request).queue.songs

    def keep() -> dict[str, Any]:
        fields: dict[str, Any] = {}
        reference = body.get("reference")
        if body.get("from") is not None:
            try:
                ref = check_ref("from", body["from"], uploads=False)
            except RequestError as exc:
                raise ApiError(422, str(exc), "invalid_request", "from") from None
            song = songs.get(ref["song"])
            if song is None:
                raise ApiError(404, f"from: no song {ref['song']}", "not_found", "from")
            fields = recipe.from_request(song.request)
            if "reference" not in body:
                reference = song.request.get("reference")
        given = body.get("fields") or {}
        if not isinstance(given, dict):
            raise ApiError(422, "fields: must be an object of song settings", field="fields")
        fields.update(given)
        try:
            style = recipe.Style.from_json(
                {"name": body.get("name"), "fields": fields, "seed": body.get("seed", "random")}
            )
        except recipe.StyleError as exc:
            raise _refused(exc) from None
        if reference is not None:
            try:
                ref = check_ref("reference", reference)
                style.reference, style.reference_name = styles.reference_copy(ref, songs)
            except RequestError as exc:
                raise ApiError(422, str(exc), "invalid_request", "reference") from None
            except sources.SourceError as exc:
                raise ApiError(404, str(exc), "not_found", "reference") from None
        try:
            return _shown(styles.save(style, replace=replace))
        except FileExistsError as exc:
            raise ApiError(409, f"name: {exc}", "conflict", "name") from None

    return JSONResponse(await asyncio.to_thread(keep), status_code=201)


def _named(name: str) -> recipe.Style:
    try:
        return styles.get(name)
    except recipe.StyleError as exc:
        raise _refused(exc) from None
    except styles.StyleNotFound as exc:
        raise ApiError(404, f"name: {exc}", "not_found", "name") from None


@router.delete(
    "/v1/styles/{name}",
    responses={**ok(obj({"name": STR, "removed": {"const": True}})), **ERRORS},
)
async def delete_style(name: str):
    await asyncio.to_thread(_named, name)
    gone = await asyncio.to_thread(styles.remove, name)
    return {"name": gone.name, "removed": True}


@router.post(
    "/v1/styles/{name}/rename",
    openapi_extra=json_request(RENAME_SCHEMA),
    responses={**ok(STYLE_JSON, "renamed"), **ERRORS},
)
async def rename_style(request: Request, name: str):
    body = await json_body(request)
    new = body.get("name") if isinstance(body, dict) else None
    if not isinstance(body, dict) or set(body) != {"name"} or not isinstance(new, str):
        raise ApiError(422, 'name: give the new name as {"name": …}', field="name")
    await asyncio.to_thread(_named, name)
    try:
        renamed = await asyncio.to_thread(styles.rename, name, new)
    except recipe.StyleError as exc:
        raise _refused(exc) from None
    except FileExistsError as exc:
        raise ApiError(409, f"name: {exc}", "conflict", "name") from None
    return await asyncio.to_thread(_shown, renamed)


@router.get(
    "/v1/styles/{name}/file",
    responses={
        200: {"description": "the style as one file", "content": {"application/zip": {}}},
        **ERRORS,
    },
)
async def export_style(name: str):
    style = await asyncio.to_thread(_named, name)
    try:
        data = await asyncio.to_thread(styles.export_bytes, style.name)
    except (uploads.UploadError, LookupError) as exc:
        raise ApiError(409, f"reference: {exc}", "conflict", "reference") from None
    safe = "".join(c if c.isalnum() or c in " -_" else "_" for c in style.name).strip() or "style"
    return Response(
        data,
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{safe}.cantor-style"'},
    )


@router.post(
    IMPORT_PATH,
    status_code=201,
    openapi_extra=binary_request(FILE_BODY),
    responses={**ok(STYLE_JSON, "kept", 201), **ERRORS},
)
async def import_style(request: Request, replace: bool = False):
    """A style file (``GET /v1/styles/{name}/file``) as the body; 409 when its name is
    taken and ``replace`` is not set."""
    _id, part = uploads.new_part()
    try:
        await write_stream(part, request.stream())
        data = await asyncio.to_thread(part.read_bytes)
    finally:
        part.unlink(missing_ok=True)
    try:
        style = await asyncio.to_thread(styles.import_bytes, data, replace=replace)
    except recipe.StyleError as exc:
        raise _refused(exc) from None
    except FileExistsError as exc:
        raise ApiError(409, f"name: {exc}", "conflict", "name") from None
    return JSONResponse(await asyncio.to_thread(_shown, style), status_code=201)
