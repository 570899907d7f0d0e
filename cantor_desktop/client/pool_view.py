"""A pool as the app shows it (no Qt): typed records read from the node's answers.

``GET /v1/pool`` gives every member (alive or gone, its models, its engines, what it is
making), the lanes (songs waiting, taken and by whom) and the songs by state; the ``pool``
block of ``GET /v1/system`` gives the pool's reachability alone. :class:`PoolView` reads
either, and says in words what the Hardware & Backends page, the status line and Compose's
"Node" choice show: each member's backend and queue, the pool's problem, which member can
make a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models.catalogue import canonical_model
from ..pool import redis_keys

SKETCH = "sketch"
CONNECTED, UNREACHABLE, REFUSED = "connected", "unreachable", "refused"


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, (list, tuple)) else ()


@dataclass(frozen=True)
class PoolMember:
    """One node of the pool, as its last heartbeat told it."""

    id: str
    name: str
    alive: bool
    url: str = ""
    models: tuple[str, ...] = ()
    backends: dict[str, str] = field(default_factory=dict)  # engine key → backend
    loaded: tuple[str, ...] = ()  # the backends of the engines it has loaded now
    making: int = 0  # songs it makes now
    waiting: int = 0  # songs sent to it alone, waiting for it
    seen: float | None = field(default=None, compare=False)  # changes every beat
    proven: bool | None = None  # proved at its address that it is this member (None: not asked)
    proof_problem: str = ""  # why it is not trusted, when it is not
    name_clash: bool = False  # another live member has its name

    @classmethod
    def from_json(cls, data: dict[str, Any], waiting: int = 0) -> PoolMember:
        node_id = str(data.get("id") or "")
        backends = data.get("backends")
        engines = [e for e in data.get("engines") or () if isinstance(e, dict)]
        seen = data.get("seen")
        return cls(
            id=node_id,
            name=str(data.get("name") or node_id),
            alive=bool(data.get("alive")),
            url=str(data.get("url") or ""),
            models=_names(data.get("models")),
            backends=(
                {str(k): str(v) for k, v in backends.items()} if isinstance(backends, dict) else {}
            ),
            loaded=tuple(str(e.get("backend")) for e in engines if e.get("backend")),
            making=len(_names(data.get("running"))),
            waiting=waiting,
            seen=float(seen) if isinstance(seen, (int, float)) else None,
            proven=data["proven"] if isinstance(data.get("proven"), bool) else None,
            proof_problem=str(data.get("proof_problem") or ""),
            name_clash=data.get("name_clash") is True,
        )

    @property
    def trusted(self) -> bool:
        """Not known to be an impostor: proved, or not asked yet (the node asks when a song
        is sent to it)."""
        return self.proven is not False

    def can_make(self, model: str) -> bool:
        return model in self.models or canonical_model(model) in self.models

    @property
    def backend(self) -> str:
        """Its ACE-Step backend (cpu, vulkan, …), or "Sketch only" when it runs no AI model;
        the backend of a loaded engine when its report names none (an older member)."""
        found = [b for k, b in sorted(self.backends.items()) if k != SKETCH and b]
        found = found or [b for b in self.loaded if b != SKETCH]
        if found:
            return ", ".join(dict.fromkeys(found))
        if self.backends or self.models:
            return "Sketch only"
        return "—"

    @property
    def queue_words(self) -> str:
        """``making 1 · 2 waiting for it``, or ``idle``."""
        bits = []
        if self.making:
            bits.append(f"making {self.making}")
        if self.waiting:
            bits.append(f"{self.waiting} waiting for it")
        return " · ".join(bits) or "idle"


@dataclass(frozen=True)
class NodeChoice:
    """A line of Compose's "Node" choice: a member, and why it cannot make the model."""

    name: str
    why_not: str = ""  # empty: it can make the chosen model

    @property
    def usable(self) -> bool:
        return not self.why_not

    @property
    def label(self) -> str:
        return self.name if self.usable else f"{self.name} — {self.why_not}"


@dataclass(frozen=True)
class PoolView:
    """The pool the app's node is a member of."""

    state: str  # connected, unreachable or refused
    error: str | None = None
    url: str = ""
    me: str = ""  # this node's name in the pool
    members: tuple[PoolMember, ...] = ()
    waiting: int = 0  # songs waiting for any member that can make them
    songs: dict[str, int] = field(default_factory=dict)  # songs by state
    alive_count: int | None = None  # from /v1/system, before the members are read
    refused: int = 0  # entries read from Redis that the node refused (a bad record …)
    refused_latest: tuple[str, ...] = ()  # the newest of them, each with its reason

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PoolView | None:
        """``GET /v1/pool`` or the ``pool`` block of ``GET /v1/system`` (None: no pool)."""
        if not isinstance(data, dict):
            return None
        me: dict[str, Any] = data["node"] if isinstance(data.get("node"), dict) else {}
        listed = data.get("members")
        waiting_for: dict[str, int] = {}
        waiting_any = 0
        for lane in data.get("lanes") or ():
            if not isinstance(lane, dict):
                continue
            name, count = str(lane.get("lane") or ""), int(lane.get("waiting") or 0)
            if name.startswith(redis_keys.LANE_NODE):
                node_id = name[len(redis_keys.LANE_NODE) :]
                waiting_for[node_id] = waiting_for.get(node_id, 0) + count
            else:
                waiting_any += count
        members: tuple[PoolMember, ...] = ()
        alive_count = None
        if isinstance(listed, list):
            members = tuple(
                PoolMember.from_json(m, waiting_for.get(str(m.get("id") or ""), 0))
                for m in listed
                if isinstance(m, dict)
            )
            members = tuple(sorted(members, key=lambda m: (not m.alive, m.name.lower())))
        elif isinstance(listed, int):
            alive_count = listed
        songs: dict[str, Any] = data["songs"] if isinstance(data.get("songs"), dict) else {}
        refused = data.get("refused_entries")
        refused = refused if isinstance(refused, dict) else {}
        latest = tuple(
            f"{r.get('kind')} {r.get('key')}: {r.get('reason')}"
            for r in refused.get("latest") or ()
            if isinstance(r, dict)
        )
        return cls(
            state=str(data.get("state") or UNREACHABLE),
            error=data.get("error") or None,
            url=str(data.get("url") or ""),
            me=str(me.get("name") or me.get("id") or ""),
            members=members,
            waiting=waiting_any,
            songs={str(k): int(v) for k, v in songs.items() if isinstance(v, int)},
            alive_count=alive_count,
            refused=sum(v for k, v in refused.items() if k != "latest" and isinstance(v, int)),
            refused_latest=latest,
        )

    @property
    def reachable(self) -> bool:
        return self.state == CONNECTED

    @property
    def alive(self) -> tuple[PoolMember, ...]:
        return tuple(m for m in self.members if m.alive)

    def problem(self) -> str | None:
        """What is wrong with the pool, in a sentence naming it; None while it answers."""
        if self.state == CONNECTED:
            return None
        where = self.url or "the pool's Redis"
        why = f" ({self.error.strip().rstrip('.')})" if self.error else ""
        if self.state == REFUSED:
            return f"Pool refused this node: {self.error or where}"
        return (
            f"Pool unreachable: {where} does not answer{why}. The node keeps its finished "
            f"songs and reconnects by itself."
        )

    def short_problem(self) -> str | None:
        """The problem in a few words (the status line, the tray)."""
        if self.state == CONNECTED:
            return None
        return "pool refused this node" if self.state == REFUSED else "pool unreachable"

    def summary(self) -> str:
        """One line under the pool's title: its members, what waits, its songs."""
        count = len(self.alive) if self.members else (self.alive_count or 0)
        total = len(self.members) or count
        if not self.reachable:  # who is alive is not known while the pool is away
            bits = [f"{total} members when last seen"]
        elif total != count:
            bits = [f"{count} of {total} members alive"]
        else:
            bits = [f"{count} members"]
        if self.waiting:
            bits.append(f"{self.waiting} song{'s' if self.waiting != 1 else ''} waiting")
        done = self.songs.get("done")
        if done:
            bits.append(f"{done} done")
        if self.refused:
            bits.append(
                f"{self.refused} entr{'ies' if self.refused != 1 else 'y'} from Redis refused"
            )
        return " · ".join(bits)

    def untrusted(self) -> str | None:
        """What the node does not trust in the pool, in a sentence; None when nothing."""
        bits = []
        for m in self.alive:
            if m.proven is False:
                bits.append(f"{m.name} did not prove it is a member ({m.proof_problem})")
        clashes = sorted({m.name for m in self.alive if m.name_clash})
        if clashes:
            bits.append(f"more than one member is called {', '.join(clashes)}")
        if self.refused:
            newest = f": {self.refused_latest[0]}" if self.refused_latest else ""
            bits.append(
                f"{self.refused} entr{'ies' if self.refused != 1 else 'y'} read from the "
                f"pool's Redis were refused{newest}"
            )
        return "; ".join(bits) + "." if bits else None

    def choices(self, model: str) -> list[NodeChoice]:
        """The members a song may be sent to (the live ones), each saying when it cannot
        make ``model``."""
        out = []
        for m in self.alive:
            if not m.trusted:
                why = "not verified"
            elif m.name_clash:
                why = "another member has this name"
            else:
                why = "" if m.can_make(model) else f"no {model}"
            out.append(NodeChoice(m.name, why))
        return out

    def member(self, name: str) -> PoolMember | None:
        return next((m for m in self.members if name in (m.name, m.id)), None)
