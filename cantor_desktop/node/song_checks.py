"""What the node checks of a song request before it is queued, beyond the request's own
rules (:func:`cantor_desktop.song.request.validate`): the model and the adapter are here,
what an edit names exists and fits. Each refusal is an :class:`.http_common.ApiError`
naming the field, so nothing reaches an engine that it would refuse."""

from __future__ import annotations

from typing import Any

from .. import config
from ..song.record import Song
from ..song.request import BASE_TASKS, DURATION_RANGE, RequestError, validate
from .http_common import ApiError
from .routes.models import check_model, installed_names, library_models
from .engine_plan import SKETCH, model_name

NO_MODEL_YET = (
    "no ACE-Step model is installed yet, so this song is made by the built-in "
    "Sketch (procedural, no AI). For ACE-Step: `cantor pull acestep-v15-turbo` "
    "(or Library → Download in the app); to choose the Sketch on purpose: "
    "--model sketch"
)


def validated(
    body: Any, cfg: config.Config, pool_models: dict[str, list[str]] | None = None
) -> tuple[dict[str, Any], str | None]:
    """The checked request, and a note for the user when the node chose for them: a song
    that names no model on a machine without any ACE-Step model is made by the Sketch.

    ``pool_models``: in a pool, every model a live member can make (→ those members); the
    model is checked against them instead of this machine's library."""
    try:
        req = validate(body, default_format=cfg.get("songs.format"))
    except RequestError as exc:
        raise ApiError(
            422,
            exc.message if exc.message.startswith(exc.field) else f"{exc.field}: {exc.message}",
            field=exc.field,
        ) from None
    data = req.to_dict()
    note = None
    data["model"] = model_name(data, cfg)
    if pool_models is not None:
        from ..models.catalogue import canonical_model

        data["model"] = canonical_model(data["model"])
        if req.model is None and data["model"] not in pool_models:
            if not any(name != SKETCH for name in pool_models):
                data["model"], note = SKETCH, NO_MODEL_YET
        check_pool_model(data["model"], pool_models)
    else:
        if req.model is None and data["model"] != SKETCH and not installed_names(acestep_only=True):
            data["model"], note = SKETCH, NO_MODEL_YET
        check_model(data["model"])
    from .routes.adapters import check_song_adapter

    check_song_adapter(data)
    return data, note


def check_pool_model(name: str, pool_models: dict[str, list[str]]) -> None:
    """404 naming the model and what each member of the pool has, when none can make it."""
    if name in pool_models:
        return
    members: dict[str, list[str]] = {}
    for model, names in sorted(pool_models.items()):
        for member in names:
            members.setdefault(member, []).append(model)
    has = "; ".join(f"{member}: {', '.join(models)}" for member, models in sorted(members.items()))
    raise ApiError(
        404,
        f"model {name!r}: no node of the pool has it (the pool's nodes have — {has}); "
        f"`cantor pull {name}` on a member adds it",
        "model_not_found",
        "model",
        pool=members,
    )


def check_sources(data: dict[str, Any], songs: dict[str, Song]) -> None:
    """What an edit names exists and fits: its source (a finished take, or an upload), its
    region inside the source, its extension within 10 minutes, a base model for the tasks
    that need one. 4xx naming the field; nothing reaches an engine otherwise."""
    from . import sources

    found: dict[str, sources.Source] = {}
    for field in ("source", "reference", "codes_from"):
        if data.get(field):
            try:
                found[field] = sources.resolve(field, data[field], songs)
            except sources.SourceError as exc:
                raise ApiError(
                    404 if "no song" in exc.message or "no upload" in exc.message else 422,
                    str(exc),
                    "not_found" if "no " in exc.message else "invalid_request",
                    exc.field,
                ) from None
    source = found.get("source")
    region = data.get("region")
    if source is not None and region and region["end"] > source.duration + 0.05:
        raise ApiError(
            422,
            f"region: ends at {region['end']:g} s, past the end of the source "
            f"({source.duration:.1f} s)",
            field="region",
        )
    extend = data.get("extend")
    if source is not None and extend:
        total = source.duration + extend.get("before", 0) + extend.get("after", 0)
        if total > DURATION_RANGE[1]:
            raise ApiError(
                422,
                f"extend: the song would be {total:.0f} s long; at most "
                f"{DURATION_RANGE[1]:.0f} s (10 minutes)",
                field="extend",
            )
    codes = found.get("codes_from")
    if codes is not None and not codes.codes:
        raise ApiError(
            422,
            f"codes_from: {codes.name} has no audio codes (a song made "
            f"without the language model, or by the Sketch before it kept "
            f"them)",
            field="codes_from",
        )
    model = data.get("model") or ""
    if data.get("task") in BASE_TASKS and model != SKETCH and "base" not in model:
        base = next(
            (
                m
                for m in library_models(include_catalogue=True)
                if m["name"] == "acestep-v15-base-Q8_0"
            ),
            None,
        )
        size = ""
        if base and base.get("download_bytes"):
            from ..units import human_size

            size = f" ({human_size(base['download_bytes'])})"
        raise ApiError(
            422,
            f"model: {data['task']} needs a base model (it renders noise on "
            f"{model or 'this model'}): `cantor pull acestep-v15-base`{size}, "
            f"then model acestep-v15-base-Q8_0",
            field="model",
        )
