"""The pool as the app reads it (cantor_desktop/client/pool_view.py, no Qt): members, their
backends and queues from ``GET /v1/pool``; reachability from ``GET /v1/system``; which
member can make a model."""

from __future__ import annotations

from cantor_desktop.pool import redis_keys
from cantor_desktop.client.pool_view import PoolView

TURBO = "acestep-v15-turbo-Q8_0"


def member(node_id, name, *, alive=True, models=("sketch",), backends=None, **extra):
    return {
        "id": node_id,
        "name": name,
        "url": f"http://{name}:7823",
        "alive": alive,
        "models": list(models),
        "engines": [],
        "running": [],
        **({"backends": backends} if backends is not None else {}),
        **extra,
    }


def status(**extra):
    return {
        "url": "redis://studio:6379/0",
        "state": "connected",
        "error": None,
        "node": {"id": "a1", "name": "alpha"},
        "members": [
            member("c3", "charlie", models=(TURBO, "sketch"), backends={"acestep": "vulkan"}),
            member("a1", "alpha", backends={"sketch": "sketch"}),
            member("b2", "bravo", alive=False),
        ],
        "lanes": [
            {"lane": redis_keys.model_lane(TURBO), "waiting": 2, "claimed": {}},
            {"lane": redis_keys.node_lane("c3"), "waiting": 3, "claimed": {"c3": 1}},
        ],
        "songs": {"done": 12, "queued": 5},
        **extra,
    }


def test_members_read_with_their_backend_models_and_queue():
    view = PoolView.from_json(status())
    assert view.me == "alpha" and view.reachable and view.problem() is None
    # the live ones first, by name; a member that left last
    assert [m.name for m in view.members] == ["alpha", "charlie", "bravo"]
    alpha, charlie, bravo = view.members
    assert charlie.backend == "vulkan" and alpha.backend == "Sketch only"
    assert charlie.models == (TURBO, "sketch")
    assert charlie.waiting == 3 and alpha.waiting == 0  # sent to charlie alone
    assert view.waiting == 2  # waiting for any member that has the model
    assert not bravo.alive
    assert view.summary() == "2 of 3 members alive · 2 songs waiting · 12 done"


def test_a_member_s_queue_and_backend_in_words():
    running = member("x", "x", running=["s1", "s2"], engines=[{"backend": "cuda12"}])
    view = PoolView.from_json(
        {
            **status(),
            "members": [running],
            "lanes": [{"lane": redis_keys.node_lane("x"), "waiting": 1}],
        }
    )
    (m,) = view.members
    assert m.queue_words == "making 2 · 1 waiting for it"
    assert m.backend == "cuda12"  # an older member's report: its loaded engine's backend
    assert PoolView.from_json(status()).members[0].queue_words == "idle"


def test_node_choices_name_the_members_without_the_model():
    view = PoolView.from_json(status())
    # only live members; a short model name means its Q8_0, as the node reads it
    choices = {c.name: c for c in view.choices("acestep-v15-turbo")}
    assert set(choices) == {"alpha", "charlie"}
    assert choices["charlie"].usable and choices["charlie"].label == "charlie"
    assert not choices["alpha"].usable
    assert choices["alpha"].label == "alpha — no acestep-v15-turbo"
    assert all(c.usable for c in view.choices("sketch"))


def test_unreachable_says_what_is_wrong_and_members_are_not_known():
    error = "Error 111 connecting to studio:6379. Connection refused."
    view = PoolView.from_json(status(state="unreachable", error=error))
    assert not view.reachable and view.short_problem() == "pool unreachable"
    assert view.problem() == (
        "Pool unreachable: redis://studio:6379/0 does not answer (Error 111 connecting to "
        "studio:6379. Connection refused). The node keeps its finished songs and reconnects "
        "by itself."
    )
    assert view.summary().startswith("3 members when last seen")
    refused = PoolView.from_json(status(state="refused", error="this node's token is not…"))
    assert refused.problem() == "Pool refused this node: this node's token is not…"


def test_the_system_block_gives_the_state_and_no_pool_is_none():
    block = {"url": "redis://studio:6379/0", "state": "connected", "members": 3, "node": {}}
    view = PoolView.from_json(block)
    assert view.members == () and view.alive_count == 3 and view.summary() == "3 members"
    assert PoolView.from_json(None) is None
    # a heartbeat's time is not a change worth repainting for
    again = status()
    again["members"][0]["seen"] = 123.0
    assert PoolView.from_json(again) == PoolView.from_json(status())
