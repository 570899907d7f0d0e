"""The shapes the node's OpenAPI document promises: request bodies, answers and errors.

Handlers read their JSON themselves (so that every error, a malformed body included, gets
the node's own error shape); :func:`json_request` documents the body they read. The song
request's limits come from :mod:`cantor_desktop.song.request` and a song's states and ids
from :mod:`cantor_desktop.song.record`, so that the document cannot promise what the node refuses.
A client, and the API fuzz (tests/faults/test_api_fuzz.py), check answers against these.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from .. import config
from ..song import request as r
from ..song.record import SONG_ID, TITLE_MAX, SongState, Stage
from .uploads import UPLOAD_ID

# -- building blocks -----------------------------------------------------------------------

Responses: TypeAlias = dict[int | str, dict[str, Any]]
"""A route's ``responses`` (FastAPI's type): status → OpenAPI response object."""

STR, INT, NUM, BOOL = ({"type": t} for t in ("string", "integer", "number", "boolean"))
OBJ, LIST = {"type": "object"}, {"type": "array"}
BINARY = {"type": "string", "format": "binary"}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object with ``required`` properties (and ``optional`` ones)."""
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


def ok(schema: dict[str, Any], what: str = "done", status: int = 200) -> Responses:
    """A JSON answer with ``status``, for a route's ``responses``."""
    return {status: {"description": what, "content": {"application/json": {"schema": schema}}}}


def json_request(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    """OpenAPI request body (``openapi_extra``) for handlers that read the JSON themselves."""
    return {
        "requestBody": {"required": required, "content": {"application/json": {"schema": schema}}}
    }


def binary_request(*content_types: str) -> dict[str, Any]:
    """OpenAPI request body (``openapi_extra``) for a file sent as the raw body."""
    return {
        "requestBody": {"required": True, "content": {t: {"schema": BINARY} for t in content_types}}
    }


def path_request(description: str, **optional: dict[str, Any]) -> dict[str, Any]:
    """The body of a request that names a file on the node's machine: ``path`` (described
    by ``description``) and the ``optional`` properties, nothing else."""
    path = {"type": "string", "minLength": 1, "description": description}
    return {
        "type": "object",
        "required": ["path"],
        "additionalProperties": False,
        "properties": {"path": path, **optional},
    }


def _or_auto(schema: dict[str, Any]) -> dict[str, Any]:
    """A field the node or the engine may choose: null, "" or "auto" (song_request._auto)."""
    return {
        "anyOf": [
            schema,
            {"type": "null"},
            {"type": "string", "pattern": "^\\s*([Aa][Uu][Tt][Oo])?\\s*$"},
        ]
    }


def or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: null is the same as leaving it out."""
    return {"anyOf": [schema, {"type": "null"}]}


# -- errors --------------------------------------------------------------------------------

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "field": {"type": "string"},
            },
        }
    },
}
ERRORS: Responses = {
    code: {"description": what, "content": {"application/json": {"schema": ERROR_SCHEMA}}}
    for code, what in (
        (400, "bad request"),
        (401, "token required"),
        (403, "host, origin or setting not allowed"),
        (404, "not found"),
        (409, "not in a state that allows it"),
        (413, "body too large"),
        (415, "body is not JSON"),
        (422, "a field is not allowed (named in error.field)"),
        (429, "the queue is full"),
        (500, "failed"),
        (502, "the engine failed"),
    )
}
GUARDED: Responses = {code: ERRORS[code] for code in (401, 403, 422)}  # every route but health
SSE: Responses = {200: {"description": "Server-Sent Events", "content": {"text/event-stream": {}}}}


# -- the song request ----------------------------------------------------------------------

AUTO_FIELDS = ("duration", "bpm", "key", "time_signature", "language")
"""What the node lets be chosen for you (null, "" or "auto")."""


def _number(lo: float, hi: float, integer: bool = False) -> dict[str, Any]:
    return {"type": "integer" if integer else "number", "minimum": lo, "maximum": hi}


def song_schema() -> dict[str, Any]:
    """The song request's JSON schema, from the song request's own constants."""
    ref = {
        "type": "object",
        "description": '{"song": id, "take": n} or {"upload": id}',
        "properties": {
            "song": {"type": "string", "pattern": f"^{SONG_ID.pattern}$"},
            "take": _number(1, r.BATCH_RANGE[1], True),
            "upload": {"type": "string", "pattern": f"^{UPLOAD_ID.pattern}$"},
        },
    }
    longest = r.DURATION_RANGE[1]
    span = {
        "type": "object",
        "properties": {"start": _number(0, longest), "end": _number(0, longest)},
    }
    props: dict[str, Any] = {
        "caption": {
            "type": "string",
            "minLength": 1,
            "maxLength": r.CAPTION_MAX,
            "pattern": r.CAPTION_PATTERN,
        },
        "lyrics": {
            "type": "string",
            "maxLength": r.LYRICS_MAX,
            "description": "text, or [Instrumental] (the default)",
        },
        "duration": _number(*r.DURATION_RANGE),
        "bpm": _number(*r.BPM_RANGE, True),
        "key": {"type": "string", "example": "F# minor"},
        "time_signature": {"type": "integer", "enum": list(r.TIME_SIGNATURES)},
        "language": {"type": "string", "enum": list(r.LANGUAGES)},
        "seed": _number(-1, r.SEED_MAX, True),
        "model": {"type": "string", "example": "sketch"},
        "format": {"type": "string", "enum": list(r.SONG_FORMATS)},
        "batch": _number(*r.BATCH_RANGE, True),
        "task": {"type": "string", "enum": list(r.TASKS)},
        "source": ref,
        "reference": ref,
        "codes_from": ref,
        "region": span,
        "extend": {
            "type": "object",
            "properties": {
                "before": _number(0, longest),
                "after": _number(0, longest),
                "lyrics": {"type": "string", "maxLength": r.LYRICS_MAX},
                "context": _number(*r.CONTEXT_RANGE),
            },
        },
        "strength": _number(0, 1),
        "noise": _number(0, 1),
        "faithful": {"type": "boolean"},
        "track": {"type": "string", "example": "drums"},
        "adapter": {"type": "string"},
        "adapter_scale": _number(*r.ADAPTER_SCALE_RANGE),
        "steps": _number(*r.STEPS_RANGE, True),
        "guidance": _number(*r.GUIDANCE_RANGE),
        "shift": _number(*r.SHIFT_RANGE),
        "solver": {"type": "string", "enum": list(r.SOLVERS)},
        "lm_temperature": _number(*r.LM_TEMPERATURE_RANGE),
        "lm_cfg": _number(*r.LM_CFG_RANGE),
        "lm_top_p": _number(0, 1),
        "lm_top_k": _number(*r.LM_TOP_K_RANGE, True),
        "lm_negative_prompt": {"type": "string", "maxLength": r.NEGATIVE_MAX},
        "lock_caption": {"type": "boolean"},
    }
    beats = "".join(str(n) for n in r.TIME_SIGNATURES)
    props["time_signature"] = {
        "anyOf": [
            props["time_signature"],
            {"type": "string", "pattern": f"^\\s*[{beats}](\\.0*)?\\s*/", "example": "3/4"},
        ]
    }
    props["format"] = {
        "anyOf": [props["format"], {"type": "string", "pattern": "^\\s*$"}],
        "description": 'null or "": the node\'s songs.format',
    }
    props = {
        k: v if k == "caption" else _or_auto(v) if k in AUTO_FIELDS else or_null(v)
        for k, v in props.items()
    }
    return {
        "type": "object",
        "required": ["caption"],
        "additionalProperties": False,
        "properties": props,
    }


SONG_SCHEMA = song_schema()
LM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "caption"],
    "additionalProperties": False,
    "properties": {
        "mode": {"type": "string", "enum": ["inspire", "format"]},
        "caption": {
            "type": "string",
            "minLength": 1,
            "maxLength": r.CAPTION_MAX,
            "pattern": r.CAPTION_PATTERN,
        },
        "lyrics": {"type": "string", "maxLength": r.LYRICS_MAX},
        "model": {"type": "string"},
    },
}
UNDERSTAND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["source"],
    "additionalProperties": False,
    "properties": {"source": {"type": "object"}, "model": {"type": "string"}},
}
SONG_PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        "title": {"type": "string", "maxLength": TITLE_MAX},
        "favourite": {"type": "boolean"},
    },
}

# -- other requests ------------------------------------------------------------------------

PULL_SCHEMA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}},
}
BACKEND_SCHEMA = {
    "type": "object",
    "required": ["backend"],
    "properties": {
        "family": {"type": "string", "enum": list(config.FAMILIES)},
        "backend": {"type": "string", "enum": ["auto", *config.BACKENDS]},
    },
}
FAMILY_SCHEMA = {
    "type": "object",
    "properties": {"family": {"type": "string", "enum": list(config.FAMILIES)}},
}
CONFIG_SCHEMA = {
    "type": "object",
    "minProperties": 1,
    "description": "settings to change, by dotted key; null removes one",
    "example": {"node.keep_loaded": True},
}

# -- answers -------------------------------------------------------------------------------

TAKE_JSON = obj(
    {
        "n": INT,
        "audio": STR,
        "sidecar": STR,
        "format": STR,
        "seed": {"type": ["integer", "null"]},
        "duration": {"type": ["number", "null"]},
        "sample_rate": {"type": ["integer", "null"]},
        "channels": {"type": ["integer", "null"]},
        "bytes": {"type": ["integer", "null"]},
        "bpm": {"type": ["number", "null"]},
        "key": {"type": ["string", "null"]},
        "time_signature": {"type": ["integer", "null"]},
        "facts_from": OBJ,
        "check": OBJ,
    }
)
SONG_JSON = obj(
    {
        "id": {"type": "string", "pattern": f"^{SONG_ID.pattern}$"},
        "request": OBJ,
        "state": {"enum": [str(s) for s in SongState]},
        "stage": {"enum": [*(str(s) for s in Stage), None]},
        "progress": {"type": "number", "minimum": 0, "maximum": 1},
        "eta": {"type": ["number", "null"]},
        "error": {"type": ["string", "null"]},
        "takes": {"type": "array", "items": TAKE_JSON},
        "created": NUM,
        "started": {"type": ["number", "null"]},
        "finished": {"type": ["number", "null"]},
        "engine": {"type": ["object", "null"]},
        "attempts": INT,
        "position": {"type": ["integer", "null"]},
        "title": STR,
        "favourite": BOOL,
        "node": {"type": ["object", "null"]},
        "waiting": {"type": ["string", "null"]},
    }
)
SONG_STATE = obj({"id": STR, "state": SONG_JSON["properties"]["state"]})
MODEL_JSON = obj(
    {
        "name": STR,
        "family": STR,
        "display_name": STR,
        "state": STR,
        "files": LIST,
        "size_bytes": INT,
        "download_bytes": INT,
        "builtin": BOOL,
        "imported": BOOL,
    }
)
UPLOAD_JSON = obj(
    {
        "id": STR,
        "name": STR,
        "format": STR,
        "duration": NUM,
        "sample_rate": INT,
        "channels": INT,
        "bytes": INT,
        "created": NUM,
    }
)
HEALTH_JSON = obj(
    {"status": {"const": "ok"}, "version": STR},
    {
        "proof": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "member_proof": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "port": INT,
    },
)
SYSTEM_JSON = obj(
    {
        "version": STR,
        "keep_loaded": BOOL,
        "uptime": NUM,
        "restarting": BOOL,
        "hardware": OBJ,
        "families": OBJ,
        "loaded": {
            "type": "array",
            "items": obj(
                {
                    "engine": STR,
                    "running": BOOL,
                    "pid": {"type": ["integer", "null"]},
                    "song": {"type": ["string", "null"]},
                }
            ),
        },
    }
)
CONFIG_JSON = obj(
    {"values": OBJ, "path": STR}, {"options": LIST, "error": {"type": ["string", "null"]}}
)
