"""The node's routes for model files the user brings and for the Hugging Face token, done
where the models live (the node's machine):

- ``POST /v1/models/import`` ``{"path"}``: adopt a ``.gguf`` file already on the node's
  machine (for a client on that machine: a path means nothing elsewhere);
- ``POST /v1/models/upload?name=FILE.gguf``: the file's bytes (``application/octet-stream``,
  capped by the guard's :class:`~.guard.BodyRule`), kept in the library folder once whole
  and checked;
- ``POST /v1/models/find`` ``{"folders"?}``: ACE-Step files other tools downloaded on the
  node's machine (:mod:`...models.finder`); ``POST /v1/models/adopt`` ``{"paths", "folders"?,
  "copy"?}``: those files checked against the catalogue's sha256 and linked (or copied) into
  the library;
- ``DELETE /v1/models/{name}/parts``: discard what a failed or stopped download left;
- ``GET|PUT|DELETE /v1/hub/token``: the Hugging Face token in the node's keyring; GET says
  only whether one is set, never the token.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ...system import secrets
from ...models import finder, hub, importer
from ...models.catalogue import SKETCH, UnknownModel
from ...models.library import LibraryError
from ..http_common import (
    FILE_BODY,
    ApiError,
    content_length,
    json_body,
    path_body,
    refuse_a_path_from_elsewhere,
)
from ..schemas import (
    ERRORS,
    GUARDED,
    LIST,
    OBJ,
    STR,
    binary_request,
    json_request,
    obj,
    ok,
    path_request,
)

UPLOAD_PATH = "/v1/models/upload"

IMPORT_SCHEMA = path_request("an absolute path on the node's machine")
TOKEN_SCHEMA = {
    "type": "object",
    "required": ["token"],
    "additionalProperties": False,
    "properties": {"token": {"type": "string", "minLength": 8, "maxLength": 512}},
}

MOST_PATHS = 64
PATHS = {
    "type": "array",
    "maxItems": MOST_PATHS,
    "items": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "^[^\\x00]*$"},
}
FIND_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {"folders": PATHS}}
ADOPT_SCHEMA = {
    "type": "object",
    "required": ["paths"],
    "additionalProperties": False,
    "properties": {
        "paths": {**PATHS, "minItems": 1},
        "folders": PATHS,
        "copy": {"type": "boolean"},
    },
}

router = APIRouter()
IMPORTED = obj({"imported": OBJ})
FOUND = obj({"found": LIST})
ADOPTED = obj({"adopted": LIST})
TOKEN_STATUS = obj(
    {"set": {"type": "boolean"}, "source": {"type": ["string", "null"]}, "note": STR}
)


def _refused(exc: importer.ImportRefused) -> ApiError:
    return ApiError(exc.status, str(exc), "import_refused", exc.field)


@router.post(
    "/v1/models/import",
    openapi_extra=json_request(IMPORT_SCHEMA),
    responses={**ok(IMPORTED, "adopted where it is"), **ERRORS},
)
async def import_model(request: Request):
    """Adopt a GGUF file on the node's machine where it is (nothing moved or copied)."""
    path = (await path_body(request, ("path",), "a .gguf file"))["path"]
    refuse_a_path_from_elsewhere(request, f"upload the file (POST {UPLOAD_PATH})")
    try:
        imported = await asyncio.to_thread(importer.import_local, path)
    except importer.ImportRefused as exc:
        raise _refused(exc) from None
    return {"imported": imported.to_json()}


def _paths(body: dict[str, Any], field: str, *, required: bool = False) -> list[str]:
    value = body.get(field)
    if value is None and not required:
        return []
    if (
        not isinstance(value, list)
        or (required and not value)
        or len(value) > MOST_PATHS
        or not all(isinstance(v, str) and 0 < len(v) <= 4096 and "\x00" not in v for v in value)
    ):
        raise ApiError(422, f"{field}: give a list of paths on the node's machine", field=field)
    return value


async def _folders_body(request: Request, schema: dict[str, Any]) -> dict[str, Any]:
    body = await json_body(request, required=bool(schema.get("required")))
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    for key in body:
        if key not in schema["properties"]:
            known = ", ".join(schema["properties"])
            raise ApiError(422, f"{key}: unknown field; known: {known}", field=key)
    return body


@router.post(
    "/v1/models/find",
    openapi_extra=json_request(FIND_SCHEMA, required=False),
    responses={**ok(FOUND, "files found"), **ERRORS},
)
async def find_models(request: Request):
    """ACE-Step files other tools keep on the node's machine (nothing is read but names)."""
    body = await _folders_body(request, FIND_SCHEMA)
    folders = _paths(body, "folders")
    found = await asyncio.to_thread(finder.find, folders)
    return {"found": [f.to_json() for f in found]}


@router.post(
    "/v1/models/adopt",
    openapi_extra=json_request(ADOPT_SCHEMA),
    responses={**ok(ADOPTED, "each file linked, copied or refused"), **ERRORS},
)
async def adopt_models(request: Request):
    """Files :func:`find_models` offered, checked against the catalogue's sha256 and taken
    into the library (a hard link; a copy only when ``copy`` and no link can be made)."""
    body = await _folders_body(request, ADOPT_SCHEMA)
    paths = _paths(body, "paths", required=True)
    folders = _paths(body, "folders")
    copy = body.get("copy", False)
    if not isinstance(copy, bool):
        raise ApiError(422, "copy: true or false", field="copy")
    try:
        done = await asyncio.to_thread(finder.adopt, paths, folders=folders, copy=copy)
    except finder.AdoptRefused as exc:
        raise ApiError(422, f"paths: {exc}", "import_refused", "paths") from None
    return {"adopted": [a.to_json() for a in done]}


@router.post(
    UPLOAD_PATH,
    status_code=201,
    openapi_extra=binary_request(FILE_BODY),
    responses={**ok(IMPORTED, "kept in the node's library folder", 201), **ERRORS},
)
async def upload_model(request: Request, name: str):
    """A GGUF file sent from another machine: kept as ``name`` in the library folder once
    whole and checked (a GGUF header with an ACE-Step architecture)."""
    try:
        imported = await importer.receive_upload(name, request.stream(), content_length(request))
    except importer.ImportRefused as exc:
        raise _refused(exc) from None
    return JSONResponse({"imported": imported.to_json()}, status_code=201)


@router.delete(
    "/v1/models/{name}/parts",
    responses={
        **ok(obj({"name": STR, "deleted": LIST, "freed_bytes": {"type": "integer"}})),
        **ERRORS,
    },
)
async def discard_parts(name: str):
    """Delete the ``.part`` files a failed or stopped download of ``name`` left."""
    from ...models import pull

    if name == SKETCH:
        raise ApiError(
            400, "the sketch model is built in: nothing is downloaded for it", field="name"
        )
    try:
        result = await asyncio.to_thread(pull.discard, name)
    except UnknownModel as exc:
        raise ApiError(404, f"name: {exc}", "model_not_found", "name") from None
    except pull.PullRunning as exc:
        raise ApiError(409, str(exc), "downloading", "name") from None
    except LibraryError as exc:
        raise ApiError(409, str(exc), "not_downloaded", "name") from None
    return {"name": result.name, "deleted": result.deleted, "freed_bytes": result.freed_bytes}


async def _keyring(call) -> Any:
    try:
        return await asyncio.to_thread(call)
    except secrets.NoKeyringError as exc:
        raise ApiError(
            409, f"the node's machine cannot keep the token: {exc}", "no_keyring"
        ) from None


@router.get("/v1/hub/token", responses={**ok(TOKEN_STATUS, "set or not"), **GUARDED})
async def token_status():
    """Whether a Hugging Face token is set on the node's machine — never the token."""
    return await asyncio.to_thread(hub.token_status)


@router.put(
    "/v1/hub/token",
    openapi_extra=json_request(TOKEN_SCHEMA),
    responses={**ok(TOKEN_STATUS, "kept"), **ERRORS},
)
async def store_token(request: Request):
    """Keep a Hugging Face token in the node's keyring (for gated models)."""
    body = await json_body(request)
    if not isinstance(body, dict) or set(body) != {"token"}:
        raise ApiError(422, 'token: give {"token": "hf_…"} and nothing else', field="token")
    try:
        await _keyring(lambda: hub.store_token(body["token"]))
    except ValueError as exc:
        raise ApiError(422, str(exc), field="token") from None
    return await asyncio.to_thread(hub.token_status)


@router.delete(
    "/v1/hub/token",
    responses={**ok(obj({**TOKEN_STATUS["properties"], "removed": {"type": "boolean"}})), **ERRORS},
)
async def forget_token():
    removed = await _keyring(hub.forget_token)
    return {**await asyncio.to_thread(hub.token_status), "removed": bool(removed)}
