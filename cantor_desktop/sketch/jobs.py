"""A Sketch job and its status as a small state machine: ``running`` (queued jobs say
running too, like ace-server) ends ``done``, ``failed`` or ``cancelled``, once. The worker
finishing a job and a cancel arriving from the server race for that one change; whichever
comes second is refused by :meth:`Job.end` and changes nothing."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.RUNNING: frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED}),
    JobStatus.DONE: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


class JobFailed(Exception):
    """The job ends ``failed``; the reason has already been logged."""


class Cancelled(Exception):
    """The job was cancelled while it ran; it stops where it is."""


@dataclass
class Incoming:
    """A source or reference as it arrived with a multipart job: a latent ``[T, 64]``
    (``src_latents``, ``ref_latents``) or audio decoded to 48 kHz stereo."""

    latent: Any = None
    audio: Any = None


@dataclass
class Job:
    id: str
    kind: str  # "lm", "synth", "understand", "encode", "decode"
    requests: list[dict]
    status: JobStatus = JobStatus.RUNNING
    result: list[bytes] = field(default_factory=list)  # the body, in pieces
    content_type: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)
    source: Incoming | None = None
    reference: Incoming | None = None

    @property
    def result_size(self) -> int:
        return sum(len(p) for p in self.result)

    @property
    def given(self) -> Incoming:
        """The source the job works on: the server sends one with every encode, decode,
        understand and edit job."""
        if self.source is None:
            raise JobFailed
        return self.source

    def end(self, to: JobStatus, result: list[bytes] | None = None, content_type: str = "") -> bool:
        """Move to ``to`` when the table allows it (under the engine's lock); False, with
        nothing changed, when the job had ended already. A ``done`` job's result is in place
        before its status says so (the server reads the status without the lock)."""
        if to not in TRANSITIONS[JobStatus(self.status)]:
            return False
        if result is not None:
            self.result, self.content_type = result, content_type
        self.status = to
        if to is JobStatus.CANCELLED:
            self.cancel.set()
        return True
