"""The node's HTTP API (FastAPI): the table in DESIGN "The node's HTTP API", plus backends,
config and a graceful restart so the app can drive everything through the node.

Errors are always ``{"error": {"message", "type"[, "field"]}}`` with a 4xx/5xx status; a bad
song request is refused here, before anything reaches an engine. Long actions (model pull,
backend install/update) and song events stream as Server-Sent Events:
``event: NAME\\ndata: JSON\\n\\n``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__, config
from ..song_request import RequestError, validate
from .guard import BodyStalled, BodyTooLarge
from ..song import Song
from .queue import ALL, CANCELLED, FAILED, SongQueue
from .runner import SKETCH, Runner, model_name

log = logging.getLogger(__name__)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_S = 15.0
HARDWARE_TTL_S = 60.0
STREAM_CHECK_S = 0.5
LEMONADE_FORMATS = {"wav": "wav16", "wav16": "wav16", "wav24": "wav24", "wav32": "wav32",
                    "flac": "flac", "mp3": "mp3"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request",
                 field: str | None = None, **extra: Any):
        super().__init__(message)
        self.status, self.message, self.type, self.field, self.extra = (
            status, message, type_, field, extra)

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.field, **self.extra)


def error_response(status: int, message: str, type_: str, field: str | None = None,
                   **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"message": message, "type": type_}
    if field:
        body["field"] = field
    body.update(extra)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class NodeState:
    """What the API handlers share: the queue, the runner, shutdown hooks."""

    def __init__(self, queue: SongQueue, runner: Runner):
        self.queue = queue
        self.runner = runner
        self.backend_action: str | None = None    # the one backend install/use/update running
        self._hardware: tuple[float, Any] | None = None
        self.started = time.time()
        self.shutting_down = asyncio.Event()
        self.restart_requested = False
        self.request_exit: Callable[[], None] = lambda: None
        self.exiting: Callable[[], bool] = lambda: False   # the server is stopping
        self._hardware_lock = asyncio.Lock()

    async def hardware(self) -> Any:
        """The hardware probe (it starts nvidia-smi and vulkaninfo): at most once every
        :data:`HARDWARE_TTL_S`, and afresh after a backend action."""
        async with self._hardware_lock:
            if self._hardware is None or time.monotonic() - self._hardware[0] > HARDWARE_TTL_S:
                from .. import hardware
                found = await asyncio.to_thread(hardware.probe_from_env)
                self._hardware = (time.monotonic(), found)
            return self._hardware[1]

    def backend_stream(self, what: str, work) -> StreamingResponse:
        """Run one backend action (install, use, update) as an SSE stream; a second one while
        it runs is a 409 naming the first. The action ends with its stream, however that
        ends (an abandoned stream is released when it is collected)."""
        if self.backend_action is not None:
            raise ApiError(409, f"{self.backend_action} is running; one backend action at a "
                                f"time (try again when it ends)", "busy",
                           running=self.backend_action)
        self.backend_action = what
        released = False
        log.info("backend %s started", what)

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.backend_action = None
                self._hardware = None          # an install can change what the probe sees

        async def stream():
            ended = "ended before it finished (the client went away)"
            try:
                async for chunk in progress_stream(work):
                    if chunk.startswith(b"event: done"):
                        ended = "done"
                    elif chunk.startswith(b"event: error"):
                        ended = "failed: " + _sse_message(chunk)
                    yield chunk
            finally:
                log.info("backend %s %s", what, ended)
                release()

        body = stream()
        weakref.finalize(body, release)
        return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)

    def check_room(self, cap: int) -> None:
        """429 when ``cap`` songs are already waiting or running."""
        waiting = self.queue.waiting_count()
        if waiting >= cap:
            raise ApiError(429, f"the queue is full: {waiting} songs are waiting or running "
                                f"(node.max_queue = {cap}); try again when some have finished",
                           "queue_full", cap=cap)


def create_app(state_factory: Callable[[], Awaitable[NodeState]] | None = None,
               on_ready: Callable[[NodeState], None] | None = None) -> FastAPI:
    """The node app. ``state_factory`` builds the queue and runner on startup.

    Who may call it (Host, Origin, the token, body types and sizes) is decided in front of
    it, by :class:`.guard.Guard` (see :func:`.server.serve`)."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        node = await (state_factory or default_state)()
        app.state.node = node
        if on_ready is not None:
            on_ready(node)
        node.runner.start()
        try:
            yield
        finally:
            node.shutting_down.set()
            await node.runner.stop()

    # no /docs: its page would load JavaScript from a CDN into the node's origin
    app = FastAPI(title="Cantor node", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None)

    @app.exception_handler(ApiError)
    async def _api_error(_request, exc: ApiError):
        return exc.response()

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_request, exc: BodyTooLarge):
        return error_response(413, str(exc), "too_large")

    @app.exception_handler(BodyStalled)
    async def _stalled(_request, exc: BodyStalled):
        return error_response(408, str(exc), "timeout")

    @app.exception_handler(RequestValidationError)
    async def _validation(_request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        return error_response(422, f"{field}: {first.get('msg', 'invalid')}",
                              "invalid_request", field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request, exc: StarletteHTTPException):
        kind = "not_found" if exc.status_code == 404 else "invalid_request"
        return error_response(exc.status_code, str(exc.detail), kind)

    @app.exception_handler(Exception)
    async def _crash(_request, exc: Exception):
        log.exception("unhandled error")
        return error_response(500, f"internal error: {exc}", "internal_error")

    _routes(app)
    return app


async def default_state() -> NodeState:
    from ..paths import paths

    from . import leftovers

    p = paths().ensure()
    await asyncio.to_thread(leftovers.end_leftovers)
    queue = SongQueue(p.queue_file)
    stopped = queue.load()
    if stopped:
        log.warning("%d song(s) were running when the node stopped; marked failed",
                    len(stopped))
    return NodeState(queue, Runner(queue))


def node(request: Request) -> NodeState:
    return request.app.state.node


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


def library_models(include_catalogue: bool = False) -> list[dict[str, Any]]:
    """The library as the API shows it: the built-in sketch model first, then every model
    with files here (``include_catalogue``: also the ones that can be pulled)."""
    from ..models.library import list_models
    return [_model_json(m) for m in list_models(include_catalogue=include_catalogue)]


def _model_json(m: Any) -> dict[str, Any]:
    if isinstance(m, dict):
        return m
    if hasattr(m, "to_dict"):
        return m.to_dict()
    if hasattr(m, "__dataclass_fields__"):
        from dataclasses import asdict
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(m).items()}
    return {"name": str(m)}


def installed_names(acestep_only: bool = False) -> list[str]:
    from ..models.library import READY
    return [m["name"] for m in library_models() if m.get("state") == READY
            and not (acestep_only and m["name"] == SKETCH)]


def check_model(name: str) -> None:
    """404 naming the installed models when ``name`` cannot run here."""
    if name == SKETCH:
        return
    from ..models.library import resolve
    try:
        resolve(name)
        return
    except Exception as exc:
        reason = str(exc)
    names = installed_names()
    raise ApiError(404, f"model {name!r} is not installed ({reason}); installed: "
                        f"{', '.join(names)}", "model_not_found", "model", installed=names)


NO_MODEL_YET = ("no ACE-Step model is installed yet, so this song is made by the built-in "
                "Sketch (procedural, no AI). For ACE-Step: `cantor pull acestep-v15-turbo` "
                "(or Library → Download in the app); to choose the Sketch on purpose: "
                "--model sketch")


def _validated(body: Any, cfg: config.Config) -> tuple[dict[str, Any], str | None]:
    """The checked request, and a note for the user when the node chose for them: a song
    that names no model on a machine without any ACE-Step model is made by the Sketch."""
    try:
        req = validate(body, default_format=cfg.get("songs.format"))
    except RequestError as exc:
        raise ApiError(422, exc.message if exc.message.startswith(exc.field)
                       else f"{exc.field}: {exc.message}", field=exc.field) from None
    data = req.to_dict()
    note = None
    data["model"] = model_name(data, cfg)
    if req.model is None and data["model"] != SKETCH and not installed_names(acestep_only=True):
        data["model"], note = SKETCH, NO_MODEL_YET
    check_model(data["model"])
    from .adapter_routes import check_song_adapter
    check_song_adapter(data)
    return data, note


def check_sources(data: dict[str, Any], songs: dict[str, Song]) -> None:
    """What an edit names exists and fits: its source (a finished take, or an upload), its
    region inside the source, its extension within 10 minutes, a base model for the tasks
    that need one. 4xx naming the field; nothing reaches an engine otherwise."""
    from ..song_request import BASE_TASKS, DURATION_RANGE
    from . import sources

    found: dict[str, sources.Source] = {}
    for field in ("source", "reference", "codes_from"):
        if data.get(field):
            try:
                found[field] = sources.resolve(field, data[field], songs)
            except sources.SourceError as exc:
                raise ApiError(404 if "no song" in exc.message or "no upload" in exc.message
                               else 422, str(exc), "not_found" if "no " in exc.message
                               else "invalid_request", exc.field) from None
    source = found.get("source")
    region = data.get("region")
    if source is not None and region and region["end"] > source.duration + 0.05:
        raise ApiError(422, f"region: ends at {region['end']:g} s, past the end of the source "
                            f"({source.duration:.1f} s)", field="region")
    extend = data.get("extend")
    if source is not None and extend:
        total = source.duration + extend.get("before", 0) + extend.get("after", 0)
        if total > DURATION_RANGE[1]:
            raise ApiError(422, f"extend: the song would be {total:.0f} s long; at most "
                                f"{DURATION_RANGE[1]:.0f} s (10 minutes)", field="extend")
    codes = found.get("codes_from")
    if codes is not None and not codes.codes:
        raise ApiError(422, f"codes_from: {codes.name} has no audio codes (a song made "
                            f"without the language model, or by the Sketch before it kept "
                            f"them)", field="codes_from")
    model = data.get("model") or ""
    if data.get("task") in BASE_TASKS and model != SKETCH and "base" not in model:
        base = next((m for m in library_models(include_catalogue=True)
                     if m["name"] == "acestep-v15-base-Q8_0"), None)
        size = ""
        if base and base.get("download_bytes"):
            from ..units import human_size
            size = f" ({human_size(base['download_bytes'])})"
        raise ApiError(422, f"model: {data['task']} needs a base model (it renders noise on "
                            f"{model or 'this model'}): `cantor pull acestep-v15-base`{size}, "
                            f"then model acestep-v15-base-Q8_0", field="model")


def _helper_model(model: Any, cfg: config.Config) -> str:
    """The model for a helper job (understand, inspire, format): the one asked, else the
    default, else the Sketch on a machine without an ACE-Step model; it must be installed."""
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ApiError(422, "model: must be a model name", field="model")
    if model is None:
        model = cfg.get("models.default")
        if not installed_names(acestep_only=True):
            model = SKETCH
    check_model(model)
    return model


def _song(n: NodeState, song_id: str) -> Song:
    song = n.queue.get(song_id)
    if song is None:
        raise ApiError(404, f"no song with id {song_id!r}", "not_found", "id")
    return song


async def event_stream(n: NodeState, song: Song | None, request: Request) -> AsyncIterator[bytes]:
    """One song's events (its current state first, ending with its final event), or with
    ``song`` None every song's, for as long as the client stays (the node-wide stream)."""
    key = ALL if song is None else song.id
    q = n.queue.hub.subscribe(key)
    try:
        if song is not None:
            for event in n.queue.snapshot_events(song):
                yield sse(*event.to_sse())
                if event.is_final:
                    return
        else:
            yield sse("hello", {"songs": len(n.queue.songs)})
        quiet = 0.0
        while True:
            try:
                event = await asyncio.wait_for(q.get(), STREAM_CHECK_S)
            except asyncio.TimeoutError:
                # a stopping node ends its streams at once instead of holding shutdown up
                if n.exiting() or n.shutting_down.is_set() or await request.is_disconnected():
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
        n.queue.hub.unsubscribe(key, q)


TERMINAL_EVENTS = ("done", "error")


async def progress_stream(work: Callable[[Callable[[str, Any], None]], Awaitable[Any]],
                          done_event: str = "done") -> AsyncIterator[bytes]:
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
                return          # one terminal event per stream, and nothing after it
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
            emit(done_event, _jsonable(result) if result is not None else {})
        except asyncio.CancelledError:
            emit("error", {"message": "cancelled", "type": "cancelled"})
            raise
        except Exception as exc:
            emit("error", {"message": str(exc) or type(exc).__name__,
                           "type": type(exc).__name__})
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


def _sse_message(chunk: bytes) -> str:
    """The message of one ``error`` SSE event (for the log)."""
    _, _, data = chunk.decode("utf-8", "replace").partition("\ndata: ")
    try:
        return str(json.loads(data).get("message") or data.strip())
    except (ValueError, AttributeError):
        return data.strip()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict
        return _jsonable(asdict(value))
    return str(value)


def _event_json(event: Any) -> tuple[str, Any]:
    """A progress object from a pull/install callback → an SSE event name and data."""
    if isinstance(event, tuple) and len(event) == 2 and isinstance(event[0], str):
        return event[0], _jsonable(event[1])
    data = _jsonable(event)
    name = "progress"
    if isinstance(data, dict):
        name = str(data.get("event") or data.get("type") or data.get("kind") or "progress")
    return name, data


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    """OpenAPI request body for handlers that read the JSON themselves (so every error,
    including a malformed body, gets the node's own error shape)."""
    return {"requestBody": {"required": required,
                            "content": {"application/json": {"schema": schema}}}}


ERROR_SCHEMA = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"],
    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                   "field": {"type": "string"}}}}}
ERRORS = {code: {"description": what, "content": {"application/json": {"schema": ERROR_SCHEMA}}}
          for code, what in ((400, "bad request"), (401, "token required"),
                             (403, "host, origin or setting not allowed"), (404, "not found"),
                             (409, "not in a state that allows it"),
                             (413, "body too large"), (415, "body is not JSON"),
                             (422, "a field is not allowed (named in error.field)"),
                             (429, "the queue is full"), (500, "failed"),
                             (502, "the engine failed"))}
_AUTO = [{"type": "null"}, {"type": "string", "pattern": "^\\s*([Aa][Uu][Tt][Oo])?\\s*$"}]


def _or_auto(schema: dict[str, Any]) -> dict[str, Any]:
    """A field the node or the engine may choose: null, "" or "auto" (song_request._auto)."""
    return {"anyOf": [schema, *_AUTO]}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: null is the same as leaving it out."""
    return {"anyOf": [schema, {"type": "null"}]}


def song_schema() -> dict[str, Any]:
    """The song request's JSON schema, from the song request's own constants."""
    from .. import song_request as r

    def number(lo, hi, integer=False):
        return {"type": "integer" if integer else "number", "minimum": lo, "maximum": hi}

    ref = {"type": "object", "description": '{"song": id, "take": n} or {"upload": id}',
           "properties": {"song": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
                          "take": number(1, r.BATCH_RANGE[1], True),
                          "upload": {"type": "string", "pattern": "^[0-9a-f]{16}$"}}}
    span = {"type": "object", "properties": {
        "start": number(0, r.DURATION_RANGE[1]), "end": number(0, r.DURATION_RANGE[1])}}
    props: dict[str, Any] = {
        "caption": {"type": "string", "minLength": 1, "maxLength": r.CAPTION_MAX},
        "lyrics": {"type": "string", "maxLength": r.LYRICS_MAX,
                   "description": "text, or [Instrumental] (the default)"},
        "duration": number(*r.DURATION_RANGE),
        "bpm": number(*r.BPM_RANGE, True),
        "key": {"type": "string", "example": "F# minor"},
        "time_signature": {"type": "integer", "enum": list(r.TIME_SIGNATURES)},
        "language": {"type": "string", "enum": list(r.LANGUAGES)},
        "seed": number(-1, r.SEED_MAX, True),
        "model": {"type": "string", "example": "sketch"},
        "format": {"type": "string", "enum": list(config.SONG_FORMATS)},
        "batch": number(*r.BATCH_RANGE, True),
        "task": {"type": "string", "enum": list(r.TASKS)},
        "source": ref, "reference": ref, "codes_from": ref,
        "region": span,
        "extend": {"type": "object", "properties": {
            "before": number(0, r.DURATION_RANGE[1]),
            "after": number(0, r.DURATION_RANGE[1])}},
        "strength": number(0, 1), "noise": number(0, 1),
        "faithful": {"type": "boolean"},
        "track": {"type": "string", "example": "drums"},
        "adapter": {"type": "string"},
        "adapter_scale": number(*r.ADAPTER_SCALE_RANGE),
        "steps": number(*r.STEPS_RANGE, True), "guidance": number(*r.GUIDANCE_RANGE),
        "shift": number(*r.SHIFT_RANGE),
        "solver": {"type": "string", "enum": list(r.SOLVERS)},
        "lm_temperature": number(*r.LM_TEMPERATURE_RANGE),
        "lm_cfg": number(*r.LM_CFG_RANGE), "lm_top_p": number(0, 1),
        "lm_top_k": number(*r.LM_TOP_K_RANGE, True),
        "lm_negative_prompt": {"type": "string", "maxLength": r.NEGATIVE_MAX},
        "lock_caption": {"type": "boolean"}}
    # what the node lets be chosen for you (null, "" or "auto"), and null for "not given"
    auto = ("duration", "bpm", "key", "time_signature", "language")
    props["time_signature"] = {"anyOf": [props["time_signature"], {
        "type": "string", "pattern": "^\\s*[2346](\\.0*)?\\s*/", "example": "3/4"}]}
    props["format"] = {"anyOf": [props["format"], {"type": "string", "pattern": "^\\s*$"}],
                       "description": "null or \"\": the node's songs.format"}
    props = {k: v if k == "caption" else _or_auto(v) if k in auto else _or_null(v)
             for k, v in props.items()}
    return {"type": "object", "required": ["caption"], "additionalProperties": False,
            "properties": props}


SONG_SCHEMA = song_schema()
_SONG = SONG_SCHEMA["properties"]
GENERATION_SCHEMA: dict[str, Any] = {       # null leaves a field out (lemonade_request)
    "type": "object", "required": ["prompt"], "additionalProperties": False,
    "properties": {
        "model": _SONG["model"], "prompt": {"type": "string", "minLength": 1},
        "lyrics": _SONG["lyrics"], "vocal_language": _SONG["language"],
        "duration": _SONG["duration"], "steps": _SONG["steps"], "seed": _SONG["seed"],
        "response_format": _or_null({"type": "string", "enum": list(LEMONADE_FORMATS)}),
        "bpm": _SONG["bpm"], "key": _SONG["key"], "time_signature": _SONG["time_signature"]}}
LM_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["mode", "caption"], "additionalProperties": False,
    "properties": {"mode": {"type": "string", "enum": ["inspire", "format"]},
                   "caption": {"type": "string", "minLength": 1, "maxLength": 2000},
                   "lyrics": {"type": "string", "maxLength": 20000},
                   "model": {"type": "string"}}}
UNDERSTAND_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["source"], "additionalProperties": False,
    "properties": {"source": {"type": "object"}, "model": {"type": "string"}}}
TITLE_MAX = 200
SONG_PATCH_SCHEMA: dict[str, Any] = {
    "type": "object", "minProperties": 1, "additionalProperties": False,
    "properties": {"title": {"type": "string", "maxLength": TITLE_MAX},
                   "favourite": {"type": "boolean"}}}
PULL_SCHEMA = {"type": "object", "required": ["name"],
               "properties": {"name": {"type": "string", "minLength": 1}}}
BACKEND_SCHEMA = {"type": "object", "required": ["backend"], "properties": {
    "family": {"type": "string", "enum": list(config.FAMILIES)},
    "backend": {"type": "string", "enum": ["auto", *config.BACKENDS]}}}
FAMILY_SCHEMA = {"type": "object", "properties": {
    "family": {"type": "string", "enum": list(config.FAMILIES)}}}
CONFIG_SCHEMA = {"type": "object", "minProperties": 1,
                 "description": "settings to change, by dotted key; null removes one",
                 "example": {"node.keep_loaded": True}}
SSE = {200: {"description": "Server-Sent Events", "content": {"text/event-stream": {}}}}


# -- what each route answers (documented so a client, and the API fuzz, can check it) -------

def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": list(required),
            "properties": {**required, **(optional or {})}}


def _ok(schema: dict[str, Any], what: str = "done", status: int = 200) -> dict[int, Any]:
    return {status: {"description": what, "content": {"application/json": {"schema": schema}}}}


_STR, _INT, _NUM, _BOOL = ({"type": t} for t in ("string", "integer", "number", "boolean"))
_OBJ, _LIST = {"type": "object"}, {"type": "array"}
GUARDED = {code: ERRORS[code] for code in (401, 403, 422)}   # every route but health
TAKE_JSON = _obj({"n": _INT, "audio": _STR, "sidecar": _STR, "format": _STR,
                  "seed": {"type": ["integer", "null"]}, "duration": {"type": ["number", "null"]},
                  "sample_rate": {"type": ["integer", "null"]},
                  "channels": {"type": ["integer", "null"]},
                  "bytes": {"type": ["integer", "null"]}, "bpm": {"type": ["number", "null"]},
                  "key": {"type": ["string", "null"]},
                  "time_signature": {"type": ["integer", "null"]}, "facts_from": _OBJ})
SONG_JSON = _obj({
    "id": {"type": "string", "pattern": "^[0-9a-f]{16}$"}, "request": _OBJ,
    "state": {"enum": ["queued", "running", "done", "failed", "cancelled"]},
    "stage": {"enum": ["lm", "synth", "saving", None]},
    "progress": {"type": "number", "minimum": 0, "maximum": 1},
    "eta": {"type": ["number", "null"]}, "error": {"type": ["string", "null"]},
    "takes": {"type": "array", "items": TAKE_JSON}, "created": _NUM,
    "started": {"type": ["number", "null"]}, "finished": {"type": ["number", "null"]},
    "engine": {"type": ["object", "null"]}, "attempts": _INT,
    "position": {"type": ["integer", "null"]}, "title": _STR, "favourite": _BOOL})
SONG_STATE = _obj({"id": _STR, "state": SONG_JSON["properties"]["state"]})
MODEL_JSON = _obj({"name": _STR, "family": _STR, "display_name": _STR, "state": _STR,
                   "files": _LIST, "size_bytes": _INT, "download_bytes": _INT,
                   "builtin": _BOOL, "imported": _BOOL})
UPLOAD_JSON = _obj({"id": _STR, "name": _STR, "format": _STR, "duration": _NUM,
                    "sample_rate": _INT, "channels": _INT, "bytes": _INT, "created": _NUM})
HEALTH_JSON = _obj({"status": {"const": "ok"}, "version": _STR, "home": _STR})
SYSTEM_JSON = _obj({"version": _STR, "keep_loaded": _BOOL, "uptime": _NUM,
                    "restarting": _BOOL, "hardware": _OBJ, "families": _OBJ,
                    "loaded": {"type": "array", "items": _obj(
                        {"engine": _STR, "running": _BOOL, "pid": {"type": ["integer", "null"]},
                         "song": {"type": ["string", "null"]}})}})
CONFIG_JSON = _obj({"values": _OBJ, "path": _STR},
                   {"options": _LIST, "error": {"type": ["string", "null"]}})


def _routes(app: FastAPI) -> None:
    from .library_routes import router as library_router   # import, upload, HF token
    app.include_router(library_router)
    from .adapter_routes import router as adapter_router   # LoRA adapters
    app.include_router(adapter_router)

    @app.get("/v1/health", responses={**_ok(HEALTH_JSON, "a node is up"), 403: ERRORS[403]})
    async def health(request: Request):
        """Open to all (no token): says that a node is up, and which home it serves (an
        opaque key) so that a client never takes another home's node for its own."""
        from .. import access
        return {"status": "ok", "version": __version__, "home": access.home_key()}

    @app.get("/v1/system", responses={**_ok(SYSTEM_JSON, "hardware, backends, engines"),
                                      **GUARDED})
    async def system(request: Request):
        """Hardware with evidence, each family's backends with state, the pinned and the
        default backend, keep_loaded, and what each engine has loaded now."""
        n = node(request)
        cfg = _cfg()
        out: dict[str, Any] = {"version": __version__, "keep_loaded": cfg.get("node.keep_loaded"),
                               "loaded": n.runner.loaded(), "families": {},
                               "uptime": round(time.time() - n.started, 1),
                               "restarting": n.restart_requested}
        from .. import backends

        hw = await n.hardware()
        out["hardware"] = _jsonable(hw)
        for family in config.FAMILIES:
            try:
                st = await asyncio.to_thread(backends.status, family, hw)
                out["families"][family] = st.to_dict()
            except Exception as exc:
                out["families"][family] = {"error": str(exc),
                                           "pinned": cfg.pinned_backend(family)}
        return out

    # -- models --------------------------------------------------------------------------

    @app.get("/v1/models", responses={**_ok(_obj({"models": {"type": "array", "items": MODEL_JSON},
                                                   "default": {"type": ["string", "null"]}}),
                                              "the library"), **GUARDED})
    async def models(all: bool = False):
        """``?all=true`` also lists the catalogue models that are not downloaded (the hub's
        list, asked again when the saved one is old)."""
        if all:
            from ..models.catalogue import fresh
            await fresh()
        return {"models": await asyncio.to_thread(library_models, all),
                "default": _cfg().get("models.default")}

    @app.post("/v1/models/pull", openapi_extra=_json_body(PULL_SCHEMA),
              responses={**SSE, **ERRORS})
    async def pull(request: Request):
        body = await json_body(request)
        name = body.get("name") or body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise ApiError(422, "name: give the model to pull", field="name")
        if name == SKETCH:
            raise ApiError(400, "the sketch model is built in; nothing to pull", field="name")
        from ..models.library import find
        from ..models.pull import pull as pull_model

        try:
            await asyncio.to_thread(find, name.strip())
        except ValueError as exc:          # UnknownModel: not an ACE-Step model name
            raise ApiError(404, f"name: {exc}", "model_not_found", "name") from None

        async def work(emit):
            log.info("download of %s started", name.strip())
            try:
                result = await pull_model(name.strip(),
                                          on_event=lambda ev: emit(str(ev.type), ev.to_json()))
            except asyncio.CancelledError:
                log.info("download of %s stopped (its .part files are kept)", name.strip())
                raise
            except Exception as exc:
                log.warning("download of %s failed: %s", name.strip(), exc)
                raise
            log.info("download of %s done", name.strip())
            return result

        return StreamingResponse(progress_stream(work), media_type="text/event-stream",
                                 headers=SSE_HEADERS)

    @app.delete("/v1/models/{name}", responses={**_ok(_obj({"removed": _STR, "result": _OBJ})),
                                                **ERRORS})
    async def delete_model(request: Request, name: str):
        if name == SKETCH:
            raise ApiError(400, "the sketch model is built in and cannot be removed",
                           field="name")
        cfg = _cfg()
        running = [s.id for s in node(request).queue.running()
                   if model_name(s.request, cfg) == name]
        if running:
            raise ApiError(409, f"model {name!r} is in use: song {running[0]} is running on "
                                f"it; cancel it or wait until it ends", "in_use", "name",
                           songs=running)
        from ..models.library import LibraryError, remove
        try:
            result = await asyncio.to_thread(remove, name)
        except PermissionError as exc:     # Windows: an engine or another program has it open
            raise ApiError(409, f"model {name!r} is in use: {exc.filename or 'a file'} is open "
                                f"in another program (an engine?); stop it and try again",
                           "in_use", "name") from None
        except (ValueError, LibraryError, LookupError, FileNotFoundError) as exc:
            raise ApiError(404, f"model {name!r} is not installed: {exc}", "model_not_found",
                           "name", installed=installed_names()) from None
        return {"removed": name, "result": _jsonable(result)}

    # -- songs ---------------------------------------------------------------------------

    @app.post("/v1/songs", status_code=202, openapi_extra=_json_body(SONG_SCHEMA),
              responses={**_ok(_obj({"id": _STR, "state": _STR, "model": _STR},
                                    {"note": _STR}), "queued", 202), **ERRORS})
    async def submit(request: Request):
        n = node(request)
        body = await json_body(request)
        cfg = _cfg()
        data, note = await asyncio.to_thread(_validated, body, cfg)  # lists the model folder
        await asyncio.to_thread(check_sources, data, n.queue.songs)
        n.check_room(cfg.get("node.max_queue"))
        song = n.queue.add(data)
        n.runner.wake()
        await n.queue.flush()          # on disk before the 202: it survives a crash
        answer = {"id": song.id, "state": str(song.state), "model": data["model"]}
        if note:
            answer["note"] = note
        return JSONResponse(answer, status_code=202)

    @app.get("/v1/songs", responses={**_ok(_obj({"songs": {"type": "array", "items": SONG_JSON}}),
                                             "newest first"), **GUARDED})
    async def list_songs(request: Request, state: str | None = None, limit: int = 500):
        n = node(request)
        songs = n.queue.newest_first()
        if state:
            songs = [s for s in songs if s.state == state]
        return {"songs": [n.queue.public(s) for s in songs[: max(limit, 0)]]}

    @app.get("/v1/songs/{song_id}", responses={**_ok(SONG_JSON, "the song"), **ERRORS})
    async def get_song(request: Request, song_id: str):
        n = node(request)
        return n.queue.public(_song(n, song_id))

    # -- uploads -------------------------------------------------------------------------

    @app.post("/v1/uploads", status_code=201, openapi_extra={"requestBody": {
        "required": True, "content": {"audio/*": {"schema": {"type": "string",
                                                            "format": "binary"}},
                                      "application/octet-stream": {"schema": {
                                          "type": "string", "format": "binary"}}}}},
              responses={**_ok(UPLOAD_JSON, "kept: the upload's id and facts", 201), **ERRORS})
    async def upload(request: Request, name: str = "upload"):
        """Audio to edit or to learn from (WAV, FLAC, MP3, AIFF or OGG, at most 10 minutes),
        as the raw body; ``name`` is the file's name for people. 422 naming the problem when
        it is not such audio, with nothing kept."""
        from . import uploads
        upload_id, part = uploads.new_part()
        try:
            with open(part, "wb") as out:
                async for chunk in request.stream():
                    if chunk:
                        await asyncio.to_thread(out.write, chunk)
            kept = await asyncio.to_thread(uploads.keep, upload_id, part, name)
        except uploads.UploadError as exc:
            raise ApiError(422, f"body: {exc}", "not_audio", "body") from None
        finally:
            part.unlink(missing_ok=True)
        log.info("upload %s kept: %s, %s, %.1f s", kept.id, kept.name, kept.format,
                 kept.duration)
        return JSONResponse(kept.to_json(), status_code=201)

    @app.get("/v1/uploads/{upload_id}", responses={**_ok(UPLOAD_JSON, "the upload"), **ERRORS})
    async def get_upload(upload_id: str):
        from . import uploads
        try:
            return (await asyncio.to_thread(uploads.get, upload_id)).to_json()
        except (uploads.UploadError, LookupError) as exc:
            raise ApiError(404, str(exc), "not_found", "upload_id") from None

    @app.delete("/v1/uploads/{upload_id}",
                responses={**_ok(_obj({"id": _STR, "removed": {"const": True}})), **ERRORS})
    async def delete_upload(upload_id: str):
        from . import uploads
        try:
            if not await asyncio.to_thread(uploads.remove, upload_id):
                raise LookupError(f"no upload with id {upload_id!r}")
        except (uploads.UploadError, LookupError) as exc:
            raise ApiError(404, str(exc), "not_found", "upload_id") from None
        return {"id": upload_id, "removed": True}

    @app.post("/v1/lm", openapi_extra=_json_body(LM_SCHEMA), responses={
        **_ok(_obj({"mode": _STR, "model": _STR, "caption": _STR},
                   {"lyrics": {"type": ["string", "null"]}}),
              "what the language model wrote"), **ERRORS})
    async def lm_help(request: Request):
        """The language model's help for the form: ``inspire`` writes a caption and lyrics
        from a short idea (in ``caption``); ``format`` tidies the caption and lyrics given.
        Returns caption, lyrics and what it filled in (bpm, key, duration …)."""
        n = node(request)
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ApiError(422, "body: must be a JSON object", field="body")
        unknown = sorted(set(body) - {"mode", "caption", "lyrics", "model"})
        if unknown:
            raise ApiError(422, f"{unknown[0]}: unknown field; known: mode, caption, lyrics, "
                                f"model", field=unknown[0])
        mode = body.get("mode")
        if mode not in ("inspire", "format"):
            raise ApiError(422, "mode: inspire (an idea → caption and lyrics) or format "
                                "(tidy them)", field="mode")
        caption, lyrics = body.get("caption") or "", body.get("lyrics") or ""
        for name, value, cap in (("caption", caption, 2000), ("lyrics", lyrics, 20000)):
            if not isinstance(value, str) or len(value) > cap:
                raise ApiError(422, f"{name}: text of at most {cap} characters", field=name)
        if not caption.strip():
            raise ApiError(422, "caption: write the idea (inspire) or the caption (format)",
                           field="caption")
        model = await asyncio.to_thread(_helper_model, body.get("model"), _cfg())
        from ..engine.client import EngineError
        from .runner import PlanError
        try:
            return {"mode": mode, "model": model,
                    **await n.runner.lm(mode, caption, lyrics, model)}
        except (EngineError, PlanError) as exc:
            raise ApiError(502, f"the language model could not help: {exc}",
                           "engine_failed") from None

    @app.post("/v1/understand", openapi_extra=_json_body(UNDERSTAND_SCHEMA),
              responses={**_ok(_obj({"source": _OBJ, "model": _STR}), "what the engine heard"),
                         **ERRORS})
    async def understand(request: Request):
        """Read caption, lyrics, BPM, key, time signature, duration and language out of a
        take (``{"source": {"song": id, "take": n}}``) or an upload (``{"source":
        {"upload": id}}``), with ``model`` (default: the default model; the Sketch on a
        machine without an ACE-Step model)."""
        n = node(request)
        body = await json_body(request)
        if not isinstance(body, dict) or set(body) - {"source", "model"} or "source" not in body:
            raise ApiError(422, "body: give {\"source\": {\"song\": ID, \"take\": N}} or "
                                "{\"source\": {\"upload\": ID}}, and a model if you like",
                           field="body")
        from ..song_request import check_ref
        try:
            ref = check_ref("source", body["source"])
        except RequestError as exc:
            raise ApiError(422, str(exc), field=exc.field) from None
        model = await asyncio.to_thread(_helper_model, body.get("model"), _cfg())
        await asyncio.to_thread(check_sources, {"source": ref}, n.queue.songs)
        from ..engine.client import EngineError
        from .runner import PlanError
        try:
            heard = await n.runner.understand(ref, model)
        except (EngineError, PlanError) as exc:
            raise ApiError(502, f"the engine could not read the audio: {exc}",
                           "engine_failed") from None
        return {"source": ref, "model": model, **heard}

    @app.get("/v1/events", responses={**SSE, **GUARDED})
    async def all_events(request: Request):
        """Every song's events, whoever asked for it: ``added``, ``changed``, ``removed``
        (the whole song, or its id) besides each song's own; starts with ``hello``."""
        return StreamingResponse(event_stream(node(request), None, request),
                                 media_type="text/event-stream", headers=SSE_HEADERS)

    @app.patch("/v1/songs/{song_id}", openapi_extra=_json_body(SONG_PATCH_SCHEMA),
               responses={**_ok(SONG_JSON, "the song, changed"), **ERRORS})
    async def change_song(request: Request, song_id: str):
        """Rename a song (``title``; "" gives it back its caption) or mark it a favourite."""
        n = node(request)
        song = _song(n, song_id)
        body = await json_body(request)
        if not isinstance(body, dict) or not body:
            raise ApiError(422, "body: give title and/or favourite", field="body")
        for key in body:
            if key not in ("title", "favourite"):
                raise ApiError(422, f"{key}: unknown field; known: title, favourite", field=key)
        title = body.get("title")
        if title is not None and (not isinstance(title, str) or len(title) > TITLE_MAX
                                  or "\n" in title):
            raise ApiError(422, f"title: must be one line of at most {TITLE_MAX} characters",
                           field="title")
        favourite = body.get("favourite")
        if favourite is not None and not isinstance(favourite, bool):
            raise ApiError(422, "favourite: must be true or false", field="favourite")
        n.queue.change(song, title=None if title is None else title.strip(), favourite=favourite)
        await n.queue.flush()
        return n.queue.public(song)

    @app.get("/v1/songs/{song_id}/events", responses={**SSE, **ERRORS})
    async def events(request: Request, song_id: str):
        n = node(request)
        song = _song(n, song_id)
        return StreamingResponse(event_stream(n, song, request),
                                 media_type="text/event-stream", headers=SSE_HEADERS)

    @app.get("/v1/songs/{song_id}/audio", responses={
        200: {"description": "the audio file", "content": {"audio/wav": {}, "audio/flac": {},
                                                            "audio/mpeg": {}}},
        410: ERRORS[404], **ERRORS})
    async def audio(request: Request, song_id: str, take: int = 1):
        n = node(request)
        song = _song(n, song_id)
        if song.state != "done" or not song.takes:
            raise ApiError(409, f"song {song_id} has no audio (it is {song.state})",
                           "not_ready", "id")
        found = song.take(take)
        if found is None:
            raise ApiError(422, f"take: must be from 1 to {len(song.takes)}", field="take")
        path = Path(found.audio)
        if not path.is_file():
            raise ApiError(410, f"the audio file {path} is gone", "gone", "id")
        from .songs import CONTENT_TYPES
        return FileResponse(path, media_type=CONTENT_TYPES.get(path.suffix, "application/octet-stream"),
                            filename=path.name)

    @app.post("/v1/songs/{song_id}/cancel", responses={**_ok(SONG_STATE, "cancelled"), **ERRORS})
    async def cancel(request: Request, song_id: str):
        n = node(request)
        song = _song(n, song_id)
        if not n.runner.cancel(song):
            raise ApiError(409, f"song {song_id} already ended ({song.state})", "not_cancellable",
                           "id", state=song.state)
        return {"id": song.id, "state": song.state}

    @app.delete("/v1/songs/{song_id}", responses={**_ok(_obj({
        "id": _STR, "forgotten": {"const": True}, "files_deleted": {"type": "array", "items": _STR},
        "files_kept": {"type": "array", "items": _STR}}), "forgotten"), **ERRORS})
    async def delete_song(request: Request, song_id: str, delete_files: bool = False):
        """Forget a done, failed or cancelled song (409 while it is queued or running:
        cancel it first); ``delete_files=true`` also deletes its audio files and sidecars."""
        n = node(request)
        song = _song(n, song_id)
        if not song.is_finished:
            raise ApiError(409, f"song {song_id} is {song.state}; cancel it first",
                           "not_finished", "id", state=song.state)
        removed: dict[str, list[str]] = {"deleted": [], "kept": []}
        if delete_files and song.takes:
            from .songs import delete_takes
            removed = await asyncio.to_thread(delete_takes, song.id, song.takes)
        from . import sources
        await asyncio.to_thread(sources.forget_latents, song.id)
        n.queue.forget(song)           # only once its files are gone: no one sees it half done
        await n.queue.flush()          # gone from the file before the answer
        return {"id": song.id, "forgotten": True, "files_deleted": removed["deleted"],
                "files_kept": removed["kept"]}

    @app.post("/v1/songs/{song_id}/retry", status_code=202,
              responses={**_ok(SONG_STATE, "queued again", 202), **ERRORS})
    async def retry(request: Request, song_id: str):
        n = node(request)
        song = _song(n, song_id)
        if song.state not in (FAILED, CANCELLED):
            raise ApiError(409, f"only a failed or cancelled song can be retried; this one is "
                                f"{song.state}", "not_retryable", "id", state=song.state)
        cfg = _cfg()
        await asyncio.to_thread(check_model, song.request.get("model") or cfg.get("models.default"))
        n.check_room(cfg.get("node.max_queue"))
        n.queue.retry(song)
        n.runner.wake()
        await n.queue.flush()
        return JSONResponse({"id": song.id, "state": str(song.state)}, status_code=202)

    # -- Lemonade / OpenAI style ---------------------------------------------------------

    @app.post("/v1/audio/generations", openapi_extra=_json_body(GENERATION_SCHEMA),
              responses={200: {"description": "the audio bytes",
                               "content": {"audio/wav": {}, "audio/flac": {}, "audio/mpeg": {}}},
                         **ERRORS})
    async def generations(request: Request):
        n = node(request)
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ApiError(422, "body: must be a JSON object", field="body")
        data = lemonade_request(body)
        try:
            validated, _note = await asyncio.to_thread(_validated, data, _cfg())
        except ApiError as exc:
            if exc.field in LEMONADE_NAMES:
                old, exc.field = exc.field, LEMONADE_NAMES[exc.field]
                exc.message = exc.message.replace(f"{old}:", f"{exc.field}:", 1)
            raise
        n.check_room(_cfg().get("node.max_queue"))
        song = n.queue.add(validated)
        n.runner.wake()
        q = n.queue.hub.subscribe(song.id)
        try:
            while not song.is_finished:
                try:
                    await asyncio.wait_for(q.get(), 1.0)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        n.runner.cancel(song)
                        raise ApiError(499, "client went away", "cancelled")
        finally:
            n.queue.hub.unsubscribe(song.id, q)
        if song.state == "done":
            path = Path(song.takes[0].audio)
            from .songs import CONTENT_TYPES
            # streamed from the file by a worker thread: a long wav32 is hundreds of MB,
            # which read_bytes() would have read on the node's event loop
            return FileResponse(path, media_type=CONTENT_TYPES.get(path.suffix,
                                                                   "application/octet-stream"),
                                headers={"X-Cantor-Song": song.id})
        if song.state == "cancelled":
            raise ApiError(409, "the song was cancelled", "cancelled", id=song.id)
        raise ApiError(500, song.error or "the song failed", "generation_failed", id=song.id)

    # -- backends ------------------------------------------------------------------------

    @app.get("/v1/backends", responses={**_ok(_obj({"backends": _OBJ})), **GUARDED})
    async def backends_status(request: Request):
        from .. import backends
        hw = await node(request).hardware()
        out = {}
        for family in config.FAMILIES:
            st = await asyncio.to_thread(backends.status, family, hw)
            out[family] = st.to_dict()
        return {"backends": out}

    @app.post("/v1/backends/use", openapi_extra=_json_body(BACKEND_SCHEMA),
              responses={**SSE, **ERRORS})
    async def backends_use(request: Request):
        """Fetch and trial-load a backend, then pin it ("auto" removes the pin). SSE."""
        n = node(request)
        body = await json_body(request)
        _family, backend = _family_backend(body, allow_auto=True)
        from .. import backends

        async def work(emit):
            builds = await backends.use(backend, on_event=lambda ev: emit(*_event_json(ev)))
            return {"backend": backend, "builds": builds,
                    "note": "a running engine keeps its build until the node restarts"}

        return n.backend_stream(f"use {backend}", work)

    @app.post("/v1/backends/install", openapi_extra=_json_body(FAMILY_SCHEMA, required=False),
              responses={**SSE, **ERRORS})
    async def backends_install(request: Request):
        """Install the best backend that works here (trial-loaded), like --install. SSE."""
        n = node(request)
        body = await json_body(request, required=False)
        family = (body or {}).get("family", "acestep") if isinstance(body, dict) else None
        if family not in config.FAMILIES:
            raise ApiError(422, f"family: {family!r} is not a family; one of "
                                f"{', '.join(config.FAMILIES)}", field="family")
        from .. import backends

        async def work(emit):
            return await backends.install(family, on_event=lambda ev: emit(*_event_json(ev)))

        return n.backend_stream(f"install {family}", work)

    @app.post("/v1/backends/update", responses={**SSE, **ERRORS})
    async def backends_update(request: Request):
        from .. import backends

        async def work(emit):
            return await backends.update(on_event=lambda ev: emit(*_event_json(ev)))

        return node(request).backend_stream("update", work)

    # -- config --------------------------------------------------------------------------

    @app.get("/v1/config", responses={**_ok(CONFIG_JSON, "the settings"), **GUARDED})
    async def get_config():
        cfg, err = config.load_or_defaults()
        return {"values": cfg.as_dict(), "options": config.describe(), "path": str(cfg.path),
                "error": str(err) if err else None}

    @app.patch("/v1/config", openapi_extra=_json_body(CONFIG_SCHEMA),
               responses={**_ok(CONFIG_JSON, "the settings, changed"), **ERRORS})
    async def patch_config(request: Request):
        body = await json_body(request)
        if not isinstance(body, dict) or not body:
            raise ApiError(422, "body: give an object of settings to change, "
                                "e.g. {\"node.keep_loaded\": true}", field="body")
        for key, value in list(body.items()):
            opt = config.OPTIONS.get(key)
            if opt is not None and opt.kind is int and isinstance(value, float) \
                    and value.is_integer():
                body[key] = int(value)      # JSON has one number type: 8000.0 is 8000
            if opt is not None and opt.local_only:
                raise ApiError(403, f"{key} can be changed only on the node's own machine: "
                                    f"`cantor config set {key} VALUE` there, or edit its "
                                    f"node.toml", "local_only_setting", key)
        try:
            cfg = await asyncio.to_thread(config.update, body)
        except config.ConfigError as exc:
            raise ApiError(422, str(exc), field=exc.key or "body") from None
        return {"values": cfg.as_dict(), "path": str(cfg.path)}

    # -- node ----------------------------------------------------------------------------

    @app.post("/v1/node/restart", status_code=202,
              responses={**_ok(_obj({"status": {"const": "restarting"}, "after": _LIST}),
                               "restarting once the running songs end", 202), **GUARDED})
    async def restart(request: Request):
        """Restart the node once the running songs end (``cantor upgrade`` uses this)."""
        n = node(request)
        n.restart_requested = True
        n.runner.draining = True

        async def when_idle():
            await n.runner.idle.wait()
            n.request_exit()

        asyncio.get_running_loop().create_task(when_idle())
        return JSONResponse({"status": "restarting",
                             "after": [s.id for s in n.queue.running()]}, status_code=202)


    @app.post("/v1/node/shutdown", status_code=202, responses={
        **_ok(_obj({"status": {"const": "stopping"}, "running": _LIST}),
              "stopping: songs end, engines stop, it exits", 202), **GUARDED})
    async def shutdown(request: Request):
        """Stop the node now (the app's Quit): running songs end as "node stopped", engines
        stop and their records are cleared, then the process exits."""
        n = node(request)
        running = [s.id for s in n.queue.running()]
        asyncio.get_running_loop().call_later(0.05, n.request_exit)   # after this answer
        return JSONResponse({"status": "stopping", "running": running}, status_code=202)


def _family_backend(body: Any, *, allow_auto: bool) -> tuple[str, str]:
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    family = body.get("family", "acestep")
    if family not in config.FAMILIES:
        raise ApiError(422, f"family: {family!r} is not a family; one of "
                            f"{', '.join(config.FAMILIES)}", field="family")
    backend = body.get("backend")
    allowed = (("auto",) if allow_auto else ()) + config.BACKENDS
    if backend not in allowed:
        raise ApiError(422, f"backend: {backend!r} is not a backend; one of "
                            f"{', '.join(allowed)}", field="backend")
    return family, backend


LEMONADE_NAMES = {"caption": "prompt", "language": "vocal_language", "format": "response_format"}


def lemonade_request(body: dict[str, Any]) -> dict[str, Any]:
    """Lemonade's fields → a song request (unknown fields are refused by name; the song
    request's own rules check the values, with Lemonade's names in the errors)."""
    mapping = {"model": "model", "prompt": "caption", "lyrics": "lyrics",
               "vocal_language": "language", "duration": "duration", "seed": "seed",
               "response_format": "format", "bpm": "bpm", "key": "key",
               "time_signature": "time_signature", "steps": "steps"}
    out: dict[str, Any] = {}
    for k, v in body.items():
        if k not in mapping:
            raise ApiError(422, f"{k}: unknown field; known: {', '.join(mapping)}", field=k)
        if v is not None:
            out[mapping[k]] = v
    if "caption" not in out:
        raise ApiError(422, "prompt: is required: describe the song", field="prompt")
    fmt = out.get("format")
    if fmt is not None:
        if not isinstance(fmt, str) or fmt not in LEMONADE_FORMATS:
            raise ApiError(422, f"response_format: {fmt!r} is not a format; one of "
                                f"{', '.join(LEMONADE_FORMATS)}", field="response_format")
        out["format"] = LEMONADE_FORMATS[fmt]
    return out


def _cfg() -> config.Config:
    from .runner import current_config

    cfg, err = current_config()
    if err is not None:
        raise ApiError(500, f"node.toml cannot be read: {err}", "config_error")
    return cfg
