"""The node's routes for audio the user hands it to edit or to learn from (``/v1/uploads``):
kept by :mod:`.uploads` once it is whole and checked, named by an id a song request gives
as its ``source``, ``reference`` or what ``/v1/understand`` reads."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ...files import write_stream
from .. import uploads
from ..http_common import ApiError
from ..schemas import ERRORS, STR, UPLOAD_JSON, binary_request, obj, ok

log = logging.getLogger(__name__)
router = APIRouter()


@router.post(
    "/v1/uploads",
    status_code=201,
    openapi_extra=binary_request(*uploads.CONTENT_TYPES),
    responses={**ok(UPLOAD_JSON, "kept: the upload's id and facts", 201), **ERRORS},
)
async def upload(request: Request, name: str = "upload"):
    """Audio to edit or to learn from (WAV, FLAC, MP3, AIFF or OGG, at most 10 minutes),
    as the raw body; ``name`` is the file's name for people. 422 naming the problem when
    it is not such audio, with nothing kept."""
    upload_id, part = uploads.new_part()
    try:
        await write_stream(part, request.stream())
        kept = await asyncio.to_thread(uploads.keep, upload_id, part, name)
    except uploads.UploadError as exc:
        raise ApiError(422, f"body: {exc}", "not_audio", "body") from None
    finally:
        part.unlink(missing_ok=True)
    log.info("upload %s kept: %s, %s, %.1f s", kept.id, kept.name, kept.format, kept.duration)
    return JSONResponse(kept.to_json(), status_code=201)


@router.get("/v1/uploads/{upload_id}", responses={**ok(UPLOAD_JSON, "the upload"), **ERRORS})
async def get_upload(upload_id: str):
    try:
        return (await asyncio.to_thread(uploads.get, upload_id)).to_json()
    except (uploads.UploadError, LookupError) as exc:
        raise ApiError(404, str(exc), "not_found", "upload_id") from None


@router.delete(
    "/v1/uploads/{upload_id}",
    responses={**ok(obj({"id": STR, "removed": {"const": True}})), **ERRORS},
)
async def delete_upload(upload_id: str):
    try:
        if not await asyncio.to_thread(uploads.remove, upload_id):
            raise LookupError(f"no upload with id {upload_id!r}")
    except (uploads.UploadError, LookupError) as exc:
        raise ApiError(404, str(exc), "not_found", "upload_id") from None
    return {"id": upload_id, "removed": True}
