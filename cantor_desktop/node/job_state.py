"""A song's run on the node (:class:`.song_job.SongJob`) as one state machine: its steps
and which one may follow which, in one place.

plan → engine → sources → sing → save → done, and from any step failed or cancelled. An
engine found dead when the song's first job was sent is started again: sing → engine →
sing, the same two steps once more (the sources are in hand already). :class:`JobMachine`
refuses a change the table does not allow, and remembers when each step began: the song's
timings are read from it.
"""

from __future__ import annotations

import time
from enum import StrEnum


class JobState(StrEnum):
    PLAN = "plan"  # the model, its engine build and files; the adapter
    ENGINE = "engine"  # the engine started (or found running)
    SOURCES = "sources"  # an edit's sources resolved; the engine's request written
    SING = "sing"  # the engine's jobs: the LM (with lyrics), then the synth
    SAVE = "save"  # the takes, their sidecars and their latents written
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


_ENDS = frozenset({JobState.FAILED, JobState.CANCELLED})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PLAN: frozenset({JobState.ENGINE}) | _ENDS,
    JobState.ENGINE: frozenset({JobState.SOURCES, JobState.SING}) | _ENDS,
    JobState.SOURCES: frozenset({JobState.SING}) | _ENDS,
    JobState.SING: frozenset({JobState.SAVE, JobState.ENGINE}) | _ENDS,
    JobState.SAVE: frozenset({JobState.DONE}) | _ENDS,
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class IllegalMove(RuntimeError):
    """A change of state the table does not allow."""


class JobMachine:
    """The job's state and every state it has been in, with the monotonic time it began."""

    def __init__(self) -> None:
        self.history: list[tuple[JobState, float]] = [(JobState.PLAN, time.monotonic())]

    @property
    def state(self) -> JobState:
        return self.history[-1][0]

    def move(self, to: JobState) -> None:
        """Apply a change the table allows; raise :class:`IllegalMove` for any other."""
        if to not in TRANSITIONS[self.state]:
            raise IllegalMove(f"a song's job cannot go from {self.state} to {to}")
        self.history.append((to, time.monotonic()))

    def visits(self, state: JobState) -> int:
        """How often the job has entered ``state``."""
        return sum(1 for s, _ in self.history if s is state)

    def seconds(self, start: JobState, until: JobState) -> float:
        """From the first time ``start`` began to the first time ``until`` began after it."""
        began = next(n for n, (s, _) in enumerate(self.history) if s is start)
        end = next(t for s, t in self.history[began + 1 :] if s is until)
        return end - self.history[began][1]
