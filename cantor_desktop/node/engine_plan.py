"""Which engine runs a song, decided before any engine starts: the model (the request's, else
node.toml's ``models.default``) and its engine — the built-in Sketch, or the family's
ace-server build on the pinned or automatically chosen backend — with the exact model files
the engine is asked for (:class:`EnginePlan`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import config
from ..errors import CantorError
from ..system.paths import paths

SKETCH = "sketch"


class PlanError(CantorError):
    """The song cannot be run as asked (model gone, no engine installed, …)."""


@dataclass
class EnginePlan:
    """Everything needed to run one song's engine, decided before the engine starts."""

    key: str  # "sketch" or a family: one engine process per key
    family: str
    model: str
    argv: list[str]
    env: dict[str, str]
    models_dir: Path
    backend: str
    version: str
    files: dict[str, str | None] = field(default_factory=dict)  # kind → file name

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "family": self.family,
            "model": self.model,
            "backend": self.backend,
            "version": self.version,
            "files": self.files,
            "models_dir": str(self.models_dir),
        }

    def with_files_of(self, asked: EnginePlan) -> EnginePlan:
        """This plan's engine (the build that runs) with the model and files ``asked`` for."""
        return replace(self, model=asked.model, files=asked.files)


def model_name(request: dict[str, Any], cfg: config.Config) -> str:
    return request.get("model") or cfg.get("models.default")


def engine_key(name: str) -> str:
    """Which engine a model runs on, cheaply (no engine is touched)."""
    if name == SKETCH:
        return SKETCH
    from ..models.library import resolve

    return resolve(name).family


def sketch_models_dir() -> Path:
    return paths().sketch_models_dir


def plan_sketch() -> EnginePlan:
    from ..install.backends import sketch_build
    from ..sketch import ensure_sketch_models

    folder = sketch_models_dir()
    files = ensure_sketch_models(folder)
    build = sketch_build()
    return EnginePlan(
        key=SKETCH,
        family=SKETCH,
        model=SKETCH,
        argv=list(build.argv),
        env=dict(build.env),
        models_dir=folder,
        backend=SKETCH,
        version=build.version,
        files=dict(files),
    )


def plan_model(name: str, cfg: config.Config, build=None) -> EnginePlan:
    """An installed model on its family's engine. ``build`` is the engine build to run it on
    (:func:`backends.engine_for` chooses it, trying what needs a trial); without one, the
    installed build of the pinned or automatically chosen backend, as it is. Never switches
    a pinned backend: a pinned backend that is not installed is an error."""
    from ..install import backends, engine_store
    from ..models.library import resolve

    try:
        files = resolve(name)
    except Exception as exc:
        raise PlanError(f"model {name!r} cannot be used: {exc}") from None
    family = files.family
    if build is None:
        pinned = cfg.pinned_backend(family)
        chosen = pinned or backends.default_backend(family)
        if not chosen:
            raise PlanError(
                f"no {family} engine has a build for this machine; only the "
                f"sketch engine can run here"
            )
        build = engine_store.installed(family, chosen)
        if build is None:
            how = "pinned in node.toml" if pinned else "chosen automatically"
            raise PlanError(
                f"the {chosen} engine ({how}) is not installed for {family}; "
                f"run `cantor backends --install`"
            )
    return EnginePlan(
        key=family,
        family=family,
        model=files.name,
        argv=list(build.argv),
        env=dict(build.env),
        models_dir=Path(files.models_dir),
        backend=build.backend,
        version=str(build.version),
        files={
            "dit": file_name(files.dit),
            "lm": file_name(files.lm),
            "text_enc": file_name(files.text_enc),
            "vae": file_name(files.vae),
        },
    )


def file_name(path: str | Path | None) -> str | None:
    """A model file as the engine names it: its name in the engine's ``--models`` folder."""
    return None if path is None else Path(path).name
