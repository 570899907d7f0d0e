"""The node's routes for the helper jobs the Compose form and the CLI ask of an engine:
the language model's ``inspire`` and ``format`` (``POST /v1/lm``), and reading a take or an
upload back into caption, lyrics, tempo, key … (``POST /v1/understand``)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from ... import config
from ...song.request import CAPTION_MAX, LYRICS_MAX, RequestError, check_ref
from ..http_common import ApiError, json_body
from .models import check_model, installed_names
from ..engine_plan import SKETCH, PlanError
from ..schemas import ERRORS, LM_SCHEMA, OBJ, STR, UNDERSTAND_SCHEMA, json_request, obj, ok
from ..song_checks import check_sources
from ..state import node, node_config

router = APIRouter()


def helper_model(model: Any, cfg: config.Config) -> str:
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


@router.post(
    "/v1/lm",
    openapi_extra=json_request(LM_SCHEMA),
    responses={
        **ok(
            obj(
                {"mode": STR, "model": STR, "caption": STR},
                {"lyrics": {"type": ["string", "null"]}},
            ),
            "what the language model wrote",
        ),
        **ERRORS,
    },
)
async def lm_help(request: Request):
    """The language model's help for the form: ``inspire`` writes a caption and lyrics
    from a short idea (in ``caption``); ``format`` tidies the caption and lyrics given.
    Returns caption, lyrics and what it filled in (bpm, key, duration …)."""
    node_state = node(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(422, "body: must be a JSON object", field="body")
    unknown = sorted(set(body) - {"mode", "caption", "lyrics", "model"})
    if unknown:
        raise ApiError(
            422,
            f"{unknown[0]}: unknown field; known: mode, caption, lyrics, model",
            field=unknown[0],
        )
    mode = body.get("mode")
    if mode not in ("inspire", "format"):
        raise ApiError(
            422, "mode: inspire (an idea → caption and lyrics) or format (tidy them)", field="mode"
        )
    # absent is empty; present must be text (null is not, as the document says)
    caption, lyrics = body.get("caption", ""), body.get("lyrics", "")
    for name, value, cap in (("caption", caption, CAPTION_MAX), ("lyrics", lyrics, LYRICS_MAX)):
        if not isinstance(value, str) or len(value) > cap:
            raise ApiError(422, f"{name}: text of at most {cap} characters", field=name)
    if not caption.strip():
        raise ApiError(
            422, "caption: write the idea (inspire) or the caption (format)", field="caption"
        )
    model = await asyncio.to_thread(helper_model, body.get("model"), node_config())
    from ...engine.client import EngineError  # httpx: loaded when an engine is asked

    try:
        return {
            "mode": mode,
            "model": model,
            **await node_state.runner.lm(mode, caption, lyrics, model),
        }
    except (EngineError, PlanError) as exc:
        raise ApiError(502, f"the language model could not help: {exc}", "engine_failed") from None


@router.post(
    "/v1/understand",
    openapi_extra=json_request(UNDERSTAND_SCHEMA),
    responses={**ok(obj({"source": OBJ, "model": STR}), "what the engine heard"), **ERRORS},
)
async def understand(request: Request):
    """Read caption, lyrics, BPM, key, time signature, duration and language out of a
    take (``{"source": {"song": id, "take": n}}``) or an upload (``{"source":
    {"upload": id}}``), with ``model`` (default: the default model; the Sketch on a
    machine without an ACE-Step model)."""
    node_state = node(request)
    body = await json_body(request)
    if not isinstance(body, dict) or set(body) - {"source", "model"} or "source" not in body:
        raise ApiError(
            422,
            'body: give {"source": {"song": ID, "take": N}} or '
            '{"source": {"upload": ID}}, and a model if you like',
            field="body",
        )
    try:
        ref = check_ref("source", body["source"])
    except RequestError as exc:
        raise ApiError(422, str(exc), field=exc.field) from None
    model = await asyncio.to_thread(helper_model, body.get("model"), node_config())
    await asyncio.to_thread(check_sources, {"source": ref}, node_state.queue.songs)
    from ...engine.client import EngineError

    try:
        heard = await node_state.runner.understand(ref, model)
    except (EngineError, PlanError) as exc:
        raise ApiError(
            502, f"the engine could not read the audio: {exc}", "engine_failed"
        ) from None
    return {"source": ref, "model": model, **heard}
