"""The node's routes for the model library: list it, pull a model from the hub, remove one
(``GET /v1/models``, ``POST /v1/models/pull``, ``DELETE /v1/models/{name}``); and the checks
other routes make of a model name (:func:`check_model`, :func:`installed_names`).

Models the user brings (import, upload) and the Hugging Face token are
:mod:`.library_routes`'."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request

from ..http_common import ApiError, json_body, jsonable, progress_stream, sse_response
from ..engine_plan import SKETCH, model_name
from ..schemas import ERRORS, GUARDED, MODEL_JSON, OBJ, PULL_SCHEMA, SSE, STR, json_request, obj, ok
from ..state import node, node_config

log = logging.getLogger(__name__)
router = APIRouter()


def library_models(include_catalogue: bool = False) -> list[dict[str, Any]]:
    """The library as the API shows it: the built-in sketch model first, then every model
    with files here (``include_catalogue``: also the ones that can be pulled)."""
    from ...models.library import list_models

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
    from ...models.library import READY

    return [
        m["name"]
        for m in library_models()
        if m.get("state") == READY and not (acestep_only and m["name"] == SKETCH)
    ]


def check_model(name: str) -> None:
    """404 naming the installed models when ``name`` cannot run here."""
    if name == SKETCH:
        return
    from ...models.library import resolve

    try:
        resolve(name)
        return
    except Exception as exc:
        reason = str(exc)
    names = installed_names()
    raise ApiError(
        404,
        f"model {name!r} is not installed ({reason}); installed: {', '.join(names)}",
        "model_not_found",
        "model",
        installed=names,
    )


@router.get(
    "/v1/models",
    responses={
        **ok(
            obj(
                {
                    "models": {"type": "array", "items": MODEL_JSON},
                    "default": {"type": ["string", "null"]},
                }
            ),
            "the library",
        ),
        **GUARDED,
    },
)
async def models(all: bool = False):
    """``?all=true`` also lists the catalogue models that are not downloaded (the hub's
    list, asked again when the saved one is old)."""
    if all:
        from ...models.catalogue import fresh

        await fresh()
    return {
        "models": await asyncio.to_thread(library_models, all),
        "default": node_config().get("models.default"),
    }


@router.post(
    "/v1/models/pull", openapi_extra=json_request(PULL_SCHEMA), responses={**SSE, **ERRORS}
)
async def pull(request: Request):
    body = await json_body(request)
    name = body.get("name") or body.get("model") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise ApiError(422, "name: give the model to pull", field="name")
    if name == SKETCH:
        raise ApiError(400, "the sketch model is built in; nothing to pull", field="name")
    from ...models.library import find
    from ...install import backends
    from ...models.pull import pull as pull_model

    try:
        await asyncio.to_thread(find, name.strip())
    except ValueError as exc:  # UnknownModel: not an ACE-Step model name
        raise ApiError(404, f"name: {exc}", "model_not_found", "name") from None

    async def work(emit):
        log.info("download of %s started", name.strip())
        try:
            result = await pull_model(
                name.strip(),
                on_event=lambda ev: emit(str(ev.type), ev.to_json()),
                ensure_engine=backends.ensure_engine,
            )
        except asyncio.CancelledError:
            log.info("download of %s stopped (its .part files are kept)", name.strip())
            raise
        except Exception as exc:
            log.warning("download of %s failed: %s", name.strip(), exc)
            raise
        log.info("download of %s done", name.strip())
        return result

    return sse_response(progress_stream(work))


@router.delete(
    "/v1/models/{name}", responses={**ok(obj({"removed": STR, "result": OBJ})), **ERRORS}
)
async def delete_model(request: Request, name: str):
    if name == SKETCH:
        raise ApiError(400, "the sketch model is built in and cannot be removed", field="name")
    cfg = node_config()
    running = [s.id for s in node(request).queue.running() if model_name(s.request, cfg) == name]
    if running:
        raise ApiError(
            409,
            f"model {name!r} is in use: song {running[0]} is running on "
            f"it; cancel it or wait until it ends",
            "in_use",
            "name",
            songs=running,
        )
    from ...models.library import LibraryError, remove

    try:
        result = await asyncio.to_thread(remove, name)
    except PermissionError as exc:  # Windows: an engine or another program has it open
        raise ApiError(
            409,
            f"model {name!r} is in use: {exc.filename or 'a file'} is open "
            f"in another program (an engine?); stop it and try again",
            "in_use",
            "name",
        ) from None
    except (ValueError, LibraryError, LookupError, FileNotFoundError) as exc:
        raise ApiError(
            404,
            f"model {name!r} is not installed: {exc}",
            "model_not_found",
            "name",
            installed=installed_names(),
        ) from None
    return {"removed": name, "result": jsonable(result)}
