"""A model pull's progress: one typed event from the node's downloader to the Library page.

Import-light on purpose (no httpx, no hub, no Qt): the node emits :class:`PullEvent`, the
SSE stream carries :meth:`PullEvent.to_json`, the client rebuilds the same dataclass with
:meth:`PullEvent.from_sse`, and the app's link adds its own outcomes (``failed`` when the
node cannot be reached, ``paused`` when the user stopped the transfer) in the same
vocabulary, so the page reads fields and never guesses keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Mapping


class PullStep(StrEnum):
    CATALOGUE = "catalogue"  # asking the hub for the file list (``message``)
    PLAN = "plan"  # ``files`` [{name, kind, size, to_get, state}], ``total``
    FILE_START = "file_start"  # ``file``, ``file_total``
    PROGRESS = "progress"  # ``file_received``/``file_total``, ``received``/``total``,
    #                            ``speed`` (bytes/s), ``eta`` (s for the whole pull, or None)
    FILE_DONE = "file_done"  # ``verified``: False when only the size could be checked
    ENGINE = "engine"  # the engine step (``message``, ``engine`` as a dict)
    DONE = "done"  # the model is ready; ``engine_ready``/``engine_error``
    FAILED = "failed"  # the pull stopped: ``message`` (for the user), ``error_type``
    PAUSED = "paused"  # the client stopped reading; the ``.part`` files are kept


TERMINAL = frozenset({PullStep.DONE, PullStep.FAILED, PullStep.PAUSED})
"""A pull says nothing after one of these."""

ERROR_EVENT = "error"
"""The node's streams end a failure with this generic event (``{message, type}``); it is
read as a ``failed`` PullEvent."""


@dataclass
class PullEvent:
    """One step of a pull (see :class:`PullStep` for what each type carries).

    ``done`` is the only terminal event of a pull that worked. ``engine_ready``: True with
    ``backend`` and ``version`` when an engine is installed for the model; False with
    ``engine_error`` when the engine step failed (the model is still complete and usable once
    an engine is installed); None when the engine step was not asked for.
    """

    type: PullStep
    model: str
    message: str = ""
    file: str | None = None
    file_received: int = 0
    file_total: int | None = None
    received: int = 0
    total: int = 0
    speed: float = 0.0
    eta: float | None = None
    approximate: bool = False
    verified: bool | None = None
    files: list[dict] = field(default_factory=list)
    engine: dict | None = None
    engine_ready: bool | None = None
    engine_error: str | None = None
    backend: str | None = None
    version: str | None = None
    error_type: str | None = None

    def __post_init__(self) -> None:
        self.type = PullStep(self.type)  # ValueError for a type nobody knows

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL

    @property
    def fraction(self) -> float | None:
        """Bytes of the whole pull so far, 0..1 (None before the total is known)."""
        return min(1.0, self.received / self.total) if self.total > 0 else None

    def to_json(self) -> dict[str, Any]:
        """The SSE data: ``type`` and ``model`` always, the other fields when not default."""
        out: dict[str, Any] = {"type": str(self.type), "model": self.model}
        for f in fields(self):
            if f.name in out:
                continue
            value = getattr(self, f.name)
            default = f.default_factory() if callable(f.default_factory) else f.default
            if value != default:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], model: str = "") -> "PullEvent":
        """Rebuild from :meth:`to_json` (unknown keys are ignored: a newer node may add
        some); ValueError when ``type`` is missing or unknown."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a pull event must be an object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("model", model)
        if "type" not in values:
            raise ValueError("a pull event without a type")
        return cls(**values)

    @classmethod
    def from_sse(cls, event: str, data: Any, model: str = "") -> "PullEvent":
        """One SSE message of ``POST /v1/models/pull`` (its event name and decoded data)."""
        if event == ERROR_EVENT:
            data = data if isinstance(data, Mapping) else {"message": str(data)}
            return cls(
                PullStep.FAILED,
                str(data.get("model") or model),
                message=str(data.get("message") or "the download failed"),
                error_type=data.get("type") if isinstance(data.get("type"), str) else None,
            )
        if not isinstance(data, Mapping):
            data = {"message": str(data)}
        return cls.from_json({**data, "type": event}, model=model)

    @classmethod
    def failed(cls, model: str, message: str, error_type: str | None = None) -> "PullEvent":
        return cls(PullStep.FAILED, model, message=message, error_type=error_type)

    @classmethod
    def paused(cls, model: str) -> "PullEvent":
        return cls(PullStep.PAUSED, model, message="paused; the partly downloaded files are kept")
