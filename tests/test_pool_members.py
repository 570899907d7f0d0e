"""The members as a node knows them: the newest read of the members hash wins, whichever
finished last (the heartbeat's read and ``GET /v1/pool``'s run side by side)."""

from __future__ import annotations

from types import SimpleNamespace

from cantor_desktop.node.pool.members import Membership


def _membership() -> Membership:
    queue = SimpleNamespace(link=None, node_id="a")
    return Membership(queue, dict, period_s=2.0, on_capabilities=lambda _m: None)  # type: ignore[arg-type]


def _listed(*alive: str, gone: tuple[str, ...] = ()) -> list[dict]:
    return [{"id": i, "name": i, "alive": True} for i in alive] + [
        {"id": i, "name": i, "alive": False} for i in gone
    ]


def test_a_read_begun_earlier_that_ends_later_does_not_undo_a_newer_one():
    m = _membership()
    m.learn(_listed("a", "b", "c"), read_at=20.0)  # GET /v1/pool, begun after the beat's read
    m.learn(_listed("a"), read_at=10.0)  # the heartbeat's read, begun first, ends last
    assert m.alive == {"a", "b", "c"}
    assert m.members == {i: {"name": i} for i in "abc"}


def test_a_newer_read_replaces_the_members_and_who_is_alive():
    m = _membership()
    m.learn(_listed("a", "b", "c"), read_at=10.0)
    m.learn(_listed("a", gone=("b",)), read_at=11.0)
    assert m.alive == {"a"}
    assert set(m.members) == {"a", "b"}
    assert m.makers("sketch") == []  # no member reported models
