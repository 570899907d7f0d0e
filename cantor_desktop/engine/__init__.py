"""Engines: the ace-server protocol client, the process supervisor and the progress parser."""

from .client import (EngineClient, EngineError, JobCancelled, JobFailed, Track, engine_format,
                     engine_request)
from .progress import ProgressEvent, ProgressParser, is_error_line

__all__ = ["EngineClient", "EngineError", "JobCancelled", "JobFailed", "Track", "engine_format",
           "engine_request", "ProgressEvent", "ProgressParser", "is_error_line"]
