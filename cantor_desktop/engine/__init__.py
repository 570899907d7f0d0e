"""Engines: the ace-server protocol client, the process supervisor and the progress parser."""

from .client import (
    EngineClient,
    EngineError,
    EngineUnreachable,
    JobCancelled,
    JobFailed,
    Track,
    engine_format,
    engine_request,
)
from .progress import LineClassifier, ProgressEvent, ProgressParser, is_error_line
from .supervisor import EngineStartError, EngineSupervisor

__all__ = [
    "EngineClient",
    "EngineError",
    "EngineUnreachable",
    "JobCancelled",
    "JobFailed",
    "Track",
    "engine_format",
    "engine_request",
    "EngineStartError",
    "EngineSupervisor",
    "LineClassifier",
    "ProgressEvent",
    "ProgressParser",
    "is_error_line",
]
