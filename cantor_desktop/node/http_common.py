"""What every router of the node's API shares: its error shape, reading a request's body,
and Server-Sent Events.

Errors are always ``{"error": {"message", "type"[, "field"]}}`` with a 4xx/5xx status
(:class:`ApiError`, :func:`error_response`). Long actions stream as SSE,
``event: NAME\\ndata: JSON\\n\\n`` (:func:`sse`, :func:`progress_stream`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi import Request
from pydantic import BeforeValidator
from fastapi.responses import JSONResponse, StreamingResponse


def _digits_only(value: Any) -> Any:
    """A query's whole number as digits ("10"): pydantic's lax mode would also read "+1.0"
    and "1_0" as one, which the API document (an integer) does not allow."""
    if isinstance(value, str) and not re.fullmatch(r"[0-9]{1,18}", value):
        raise ValueError("must be a whole number, written in digits")
    return value


DIGITS_ONLY = BeforeValidator(_digits_only)
"""For an integer query parameter: ``Annotated[int, Query(ge=0), DIGITS_ONLY]``."""

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
TERMINAL_EVENTS = ("done", "error")
AUDIO_CHUNK = 1 << 20
FILE_BODY = "application/octet-stream"
"""The body of a file upload (a model, an adapter); the guard's BODY_RULES cap each route."""


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request",
        field: str | None = None,
        **extra: Any,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.field, self.extra = (
            status,
            message,
            type_,
            field,
            extra,
        )

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.field, **self.extra)


def error_response(
    status: int, message: str, type_: str, field: str | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {"message": message, "type": type_}
    if field:
        body["field"] = field
    body.update(extra)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


# -- the request ---------------------------------------------------------------------------


async def json_body(request: Request, *, required: bool = True) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise ApiError(400, "the request body must be a JSON object", field="body")
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", field="body") from None
    except RecursionError:
        raise ApiError(400, "the body is nested too deeply to read", field="body") from None


def content_length(request: Request) -> int | None:
    """The length a streamed upload announces (None when it announces none)."""
    announced = request.headers.get("content-length")
    if announced is None:
        return None
    try:
        return int(announced)
    except ValueError:
        raise ApiError(400, "Content-Length is not a number", field="body") from None


async def path_body(request: Request, fields: tuple[str, ...], what: str) -> dict[str, Any]:
    """The JSON body of a request that names a file on the node's machine by ``path`` (one
    of ``fields``, the only required one): a 422 naming the field for any other field or a
    path that is not text; ``what`` is what the path should name ("a .gguf file")."""
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object with path", field="body")
    for key in body:
        if key not in fields:
            raise ApiError(422, f"{key}: unknown field; known: {', '.join(fields)}", field=key)
    path = body.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ApiError(
            422, f"path: give the absolute path of {what} on the node's machine", field="path"
        )
    return body


def refuse_a_path_from_elsewhere(request: Request, upload: str) -> None:
    """A 403 ``not_local`` when a request that names a path comes from another machine (a
    path there means nothing here): ``upload`` says what to send instead."""
    if not from_this_machine(request):
        raise ApiError(
            403,
            f"path: a path names a file on the node's machine; from another machine {upload}",
            "not_local",
            "path",
        )


def from_this_machine(request: Request) -> bool:
    """A loopback client, or one whose address is the one it reached the node on (the same
    machine through its own network address)."""
    host = request.client.host if request.client else ""
    server = (request.scope.get("server") or ("",))[0] or ""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback or host == server


# -- answers -------------------------------------------------------------------------------


def take_audio(path: str, *, filename: str | None = None, headers=None) -> StreamingResponse:
    """A take's audio file, opened as :func:`.take_files.open_take` allows (a file of a
    songs folder, never through a link) and streamed by a worker thread (a long wav32 is
    hundreds of MB), with its content type. ApiError 410 when it is gone, 403 when the
    record names a file that is not a take of this node."""
    from urllib.parse import quote

    from . import take_files
    from .song_files import CONTENT_TYPES

    try:
        fh = take_files.open_take(path)
    except take_files.OutsideSongs as exc:
        raise ApiError(
            403,
            f"the song's record names a file Cantor does not serve: {exc}",
            "outside_songs",
            "id",
        ) from None
    except FileNotFoundError:
        raise ApiError(410, f"the audio file {path} is gone", "gone", "id") from None
    size = os.fstat(fh.fileno()).st_size
    suffix = Path(path).suffix
    head = {"content-length": str(size), **(headers or {})}
    if filename is not None:
        quoted = quote(filename)
        head["content-disposition"] = (
            f"attachment; filename*=utf-8''{quoted}"
            if quoted != filename
            else f'attachment; filename="{filename}"'
        )

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while chunk := await asyncio.to_thread(fh.read, AUDIO_CHUNK):
                yield chunk
        finally:
            fh.close()

    return StreamingResponse(
        chunks(),
        media_type=CONTENT_TYPES.get(suffix, "application/octet-stream"),
        headers=head,
    )


def jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return jsonable(asdict(value))
    return str(value)


# -- Server-Sent Events --------------------------------------------------------------------


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def sse_response(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)


def sse_message(chunk: bytes) -> str:
    """The message of one ``error`` SSE event (for the log)."""
    _, _, data = chunk.decode("utf-8", "replace").partition("\ndata: ")
    try:
        return str(json.loads(data).get("message") or data.strip())
    except (ValueError, AttributeError):
        return data.strip()


async def progress_stream(
    work: Callable[[Callable[[str, Any], None]], Awaitable[Any]], done_event: str = "done"
) -> AsyncIterator[bytes]:
    """Run ``work(emit)`` and stream what it emits; its result ends the stream as ``done``,
    an exception as ``error`` (the status is already 200, so the error is an event).

    Exactly one terminal event (``done`` or ``error``) ends every stream: when the work
    emits ``done`` itself (a pull's ``done`` carries the engine outcome), that one is kept
    and its return value is not sent again; nothing is sent after the terminal event."""
    q: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()
    ended = False

    def emit(event: str, data: Any = None) -> None:
        nonlocal ended
        if event != "__end__":
            if ended:
                return  # one terminal event per stream, and nothing after it
            if event in TERMINAL_EVENTS or event == done_event:
                ended = True
        item = (event, data if data is not None else {})
        try:
            if asyncio.get_running_loop() is loop:
                q.put_nowait(item)
                return
        except RuntimeError:
            pass
        loop.call_soon_threadsafe(q.put_nowait, item)

    async def runner() -> None:
        try:
            result = await work(emit)
            emit(done_event, jsonable(result) if result is not None else {})
        except asyncio.CancelledError:
            emit("error", {"message": "cancelled", "type": "cancelled"})
            raise
        except Exception as exc:
            emit("error", {"message": str(exc) or type(exc).__name__, "type": type(exc).__name__})
        finally:
            emit("__end__")

    task = loop.create_task(runner())
    try:
        while True:
            event, data = await q.get()
            if event == "__end__":
                return
            yield sse(event, data)
    finally:
        if not task.done():
            task.cancel()
