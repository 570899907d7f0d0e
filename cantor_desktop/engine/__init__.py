"""Engines: the ace-server protocol client, the process supervisor and the progress parser."""

from .client import (EngineClient, EngineError, JobCancelled, JobFailed, Track, engine_format,
                     engine_request)
from .progress import ProgressEvent, ProgressParser, is_error_line
from .supervisor import EngineStartError, EngineSupervisor

__all__ = ["EngineClient", "EngineError", "JobCancelled", "JobFailed", "Track", "engine_format",
           "engine_request", "EngineStartError", "EngineSupervisor", "ProgressEvent",
           "ProgressParser", "is_error_line"]
