"""An engine process's life as one state machine: the states, and which change leads where,
in one place. :class:`.supervisor.EngineSupervisor` moves through it; :class:`EngineLife`
refuses a change the table does not allow (a supervisor that could do so has a bug).
"""

from __future__ import annotations

from enum import StrEnum


class EngineState(StrEnum):
    STOPPED = "stopped"  # never started
    STARTING = "starting"  # launched; its /health has not answered 200 yet
    READY = "ready"  # answers /health: songs may be sent to it
    STOPPING = "stopping"  # asked to end (SIGTERM, or a kill): its exit is expected
    EXITED = "exited"  # ended after it was asked to (or stopped after it had ended)
    FAILED = "failed"  # did not come up: it exited at start, or could not be run at all
    CRASHED = "crashed"  # ended on its own after it was ready

    @property
    def ended_on_its_own(self) -> bool:
        """How it ended is part of a failed job's reason (nobody asked it to end)."""
        return self in (EngineState.FAILED, EngineState.CRASHED)


TRANSITIONS: dict[EngineState, frozenset[EngineState]] = {
    EngineState.STOPPED: frozenset({EngineState.STARTING}),
    EngineState.STARTING: frozenset({EngineState.READY, EngineState.FAILED, EngineState.STOPPING}),
    EngineState.READY: frozenset({EngineState.STOPPING, EngineState.CRASHED}),
    EngineState.STOPPING: frozenset({EngineState.EXITED}),
    EngineState.EXITED: frozenset({EngineState.STARTING, EngineState.EXITED}),
    EngineState.FAILED: frozenset({EngineState.STARTING, EngineState.EXITED}),
    EngineState.CRASHED: frozenset({EngineState.STARTING, EngineState.EXITED}),
}
"""What may follow each state. A stop of an engine that had already ended leaves it
``exited`` (its exit no longer explains anything); an exit while it was starting is a
failed start, while it was ready a crash, while it was stopping the end that was asked for."""

ON_EXIT: dict[EngineState, EngineState] = {
    EngineState.STARTING: EngineState.FAILED,
    EngineState.READY: EngineState.CRASHED,
    EngineState.STOPPING: EngineState.EXITED,
}
"""Where the process's own exit leads, from the state it was in."""


class IllegalMove(RuntimeError):
    """A change of state the table does not allow."""


class EngineLife:
    """The current state; :meth:`move` applies a change the table allows."""

    def __init__(self) -> None:
        self.state = EngineState.STOPPED

    def move(self, to: EngineState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalMove(f"an engine cannot go from {self.state} to {to}")
        self.state = to
