"""The app's link to its node as one state machine (no Qt): the states, and which change
leads where, in one place.

The child-node supervisor (:meth:`node_process.NodeProcess.watch`) and the app's health
checks both report in these states; :class:`LinkMachine` refuses a change the table does not
allow, so a stale report (a health answer arriving after the user pressed Stop) cannot undo
a newer state.
"""

from __future__ import annotations

from enum import StrEnum


class LinkState(StrEnum):
    STOPPED = "stopped"  # no node, and none wanted (before start, after Stop or Quit)
    STARTING = "starting"  # starting or restarting a node, or waiting for one to answer
    IDLE = "idle"  # connected; no song running
    GENERATING = "generating"  # connected; a song is running
    ERROR = "error"  # no node can be had (the detail says why)

    @property
    def connected(self) -> bool:
        return self in (LinkState.IDLE, LinkState.GENERATING)


TRANSITIONS: dict[LinkState, frozenset[LinkState]] = {
    LinkState.STOPPED: frozenset({LinkState.STARTING}),
    LinkState.STARTING: frozenset(
        {LinkState.IDLE, LinkState.GENERATING, LinkState.ERROR, LinkState.STOPPED}
    ),
    LinkState.IDLE: frozenset(
        {LinkState.GENERATING, LinkState.STARTING, LinkState.ERROR, LinkState.STOPPED}
    ),
    LinkState.GENERATING: frozenset(
        {LinkState.IDLE, LinkState.STARTING, LinkState.ERROR, LinkState.STOPPED}
    ),
    LinkState.ERROR: frozenset(
        {LinkState.STARTING, LinkState.IDLE, LinkState.GENERATING, LinkState.STOPPED}
    ),
}


class LinkMachine:
    """The current state and its detail; :meth:`move` applies a change the table allows."""

    def __init__(self) -> None:
        self.state = LinkState.STOPPED
        self.detail = ""

    def can_move(self, to: LinkState) -> bool:
        return to == self.state or to in TRANSITIONS[self.state]

    def move(self, to: LinkState, detail: str = "") -> bool:
        """True when state or detail changed; a change the table forbids is ignored."""
        if not self.can_move(to):
            return False
        changed = (to, detail) != (self.state, self.detail)
        self.state, self.detail = to, detail
        return changed
