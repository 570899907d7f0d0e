"""The engine's life as a state machine: the table itself (every change it allows, each one
it refuses), and a real supervisor walking it (the scripted ace-server stand-in)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from support.scripted_engine import engine_argv, make_models

from cantor_desktop.engine.engine_state import (
    ON_EXIT,
    TRANSITIONS,
    EngineLife,
    EngineState,
    IllegalMove,
)
from cantor_desktop.engine.supervisor import EngineStartError, EngineSupervisor

S = EngineState
ALLOWED = {
    (S.STOPPED, S.STARTING),
    (S.STARTING, S.READY),
    (S.STARTING, S.FAILED),
    (S.STARTING, S.STOPPING),
    (S.READY, S.STOPPING),
    (S.READY, S.CRASHED),
    (S.STOPPING, S.EXITED),
    (S.EXITED, S.STARTING),
    (S.EXITED, S.EXITED),
    (S.FAILED, S.STARTING),
    (S.FAILED, S.EXITED),
    (S.CRASHED, S.STARTING),
    (S.CRASHED, S.EXITED),
}
"""The engine's life, written out once more by hand: the table must say exactly this."""


def life_at(state: EngineState) -> EngineLife:
    life = EngineLife()
    life.state = state
    return life


def test_the_table_allows_exactly_the_engines_life():
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == ALLOWED
    assert set(TRANSITIONS) == set(EngineState)


@pytest.mark.parametrize("move", sorted(ALLOWED), ids=lambda m: f"{m[0]}-{m[1]}")
def test_every_allowed_change_is_made(move):
    life = life_at(move[0])
    life.move(move[1])
    assert life.state is move[1]


@pytest.mark.parametrize(
    "move",
    sorted((a, b) for a in EngineState for b in EngineState if (a, b) not in ALLOWED),
    ids=lambda m: f"{m[0]}-{m[1]}",
)
def test_every_other_change_is_refused_and_changes_nothing(move):
    life = life_at(move[0])
    with pytest.raises(IllegalMove):
        life.move(move[1])
    assert life.state is move[0]


def test_an_exit_is_a_failed_start_a_crash_or_the_asked_for_end():
    assert ON_EXIT == {S.STARTING: S.FAILED, S.READY: S.CRASHED, S.STOPPING: S.EXITED}
    assert all(to in TRANSITIONS[was] for was, to in ON_EXIT.items())
    assert {s for s in EngineState if s.ended_on_its_own} == {S.FAILED, S.CRASHED}


# -- a real supervisor, through its states -------------------------------------------------


def run(coro, limit: float = 30):
    return asyncio.run(asyncio.wait_for(coro, limit))


@pytest.fixture
def models(tmp_path):
    return make_models(tmp_path / "models")


def supervisor(models, script=None, **kwargs) -> EngineSupervisor:
    env = {"SCRIPTED_ENGINE": json.dumps(script or {})}
    return EngineSupervisor("acestep", engine_argv(), env, models, **kwargs)


def test_start_stop_a_crash_and_a_restart_walk_the_table(models):
    sup = supervisor(models)

    async def go():
        seen = [sup.state]
        await sup.start()
        seen.append(sup.state)
        await sup.stop()
        seen.append(sup.state)
        await sup.ensure_running()
        seen.append(sup.state)
        os.kill(sup.pid, signal.SIGKILL)
        while sup.exit_code is None:
            await asyncio.sleep(0.02)
        seen.append(sup.state)
        reason = sup.failure_reason()
        await sup.ensure_running()  # the node's next song starts it again
        seen.append(sup.state)
        await sup.aclose()
        seen.append(sup.state)
        return seen, reason

    seen, reason = run(go())
    assert seen == [S.STOPPED, S.READY, S.EXITED, S.READY, S.CRASHED, S.READY, S.EXITED]
    assert reason is not None and "killed by signal 9" in reason  # it ended on its own


def test_an_exit_at_start_and_a_missing_executable_are_failed_starts(models, tmp_path):
    lines = ["[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"]
    sup = supervisor(models, {"exit_at_start": {"lines": lines, "code": 3}})
    with pytest.raises(EngineStartError):
        run(sup.start())
    assert sup.state is S.FAILED and sup.failure_reason() == f"{lines[0]} (exit code 3)"

    missing = EngineSupervisor("acestep", [str(tmp_path / "no-such-ace-server")], {}, models)
    with pytest.raises(EngineStartError):
        run(missing.start())
    assert missing.state is S.FAILED


def test_an_engine_stopped_after_it_crashed_is_exited_and_its_exit_no_reason(models):
    sup = supervisor(models)

    async def go():
        await sup.start()
        os.kill(sup.pid, signal.SIGKILL)
        while sup.exit_code is None:
            await asyncio.sleep(0.02)
        crashed = sup.state
        await sup.stop()
        return crashed

    assert run(go()) is S.CRASHED
    assert sup.state is S.EXITED and sup.failure_reason() is None
