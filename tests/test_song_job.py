"""A song's run on the node as a job over a state machine (node/job_state.py,
node/song_job.py): the table itself (every change it allows, each one it refuses), and the
job driven through it on a stand-in engine — a whole song, each way it ends, and an engine
found dead that is started again by the same engine step and sung to by the same sing step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cantor_desktop.engine.client import EngineUnreachable, JobCancelled, JobFailed, Track
from cantor_desktop.node import song_files
from cantor_desktop.node.engine_plan import EnginePlan, PlanError
from cantor_desktop.node.job_state import TRANSITIONS, IllegalMove, JobMachine, JobState
from cantor_desktop.node.queue import CANCELLED, DONE, FAILED, SongQueue
from cantor_desktop.node.song_job import SongJob
from cantor_desktop.song.request import validate

J = JobState
STEPS = (J.PLAN, J.ENGINE, J.SOURCES, J.SING, J.SAVE)
ALLOWED = {
    (J.PLAN, J.ENGINE),
    (J.ENGINE, J.SOURCES),
    (J.ENGINE, J.SING),  # an engine started again mid-song: the sources are in hand
    (J.SOURCES, J.SING),
    (J.SING, J.SAVE),
    (J.SING, J.ENGINE),  # the engine refused the song's first job: start it again
    (J.SAVE, J.DONE),
} | {(step, end) for step in STEPS for end in (J.FAILED, J.CANCELLED)}
"""The job's steps, written out once more by hand: the table must say exactly this."""


def machine_at(state: JobState) -> JobMachine:
    machine = JobMachine()
    machine.history[-1] = (state, 0.0)
    return machine


def test_the_table_allows_exactly_the_jobs_steps():
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == ALLOWED
    assert set(TRANSITIONS) == set(JobState)
    assert {s for s in JobState if s.finished} == {J.DONE, J.FAILED, J.CANCELLED}


@pytest.mark.parametrize("move", sorted(ALLOWED), ids=lambda m: f"{m[0]}-{m[1]}")
def test_every_allowed_change_is_made_and_remembered(move):
    machine = machine_at(move[0])
    machine.move(move[1])
    assert machine.state is move[1] and [s for s, _ in machine.history] == list(move)


@pytest.mark.parametrize(
    "move",
    sorted((a, b) for a in JobState for b in JobState if (a, b) not in ALLOWED),
    ids=lambda m: f"{m[0]}-{m[1]}",
)
def test_every_other_change_is_refused_and_changes_nothing(move):
    machine = machine_at(move[0])
    with pytest.raises(IllegalMove):
        machine.move(move[1])
    assert machine.state is move[0] and len(machine.history) == 1


def test_the_machine_counts_visits_and_times_steps_from_its_history():
    machine = JobMachine()
    machine.history = [(J.PLAN, 0.0), (J.ENGINE, 1.0), (J.SOURCES, 3.5), (J.SING, 4.0)]
    machine.history += [(J.ENGINE, 6.0), (J.SING, 9.0), (J.SAVE, 10.0)]
    assert machine.visits(J.SING) == 2 and machine.visits(J.DONE) == 0
    assert machine.seconds(J.ENGINE, J.SOURCES) == 2.5  # the first start
    assert machine.seconds(J.SING, J.SAVE) == 6.0  # the singing, with the restart in it


# -- the job on a stand-in engine ----------------------------------------------------------


class Supervisor:
    def __init__(self) -> None:
        self.subscribers: list = []

    def subscribe(self, callback):
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback)

    def expect_duration(self, seconds) -> None:
        pass

    def failure_reason(self):
        return "[DiT] ERROR: out of memory"

    def last_error_line(self):
        return None


class Client:
    """Answers each song with what ``answers`` holds, in turn: tracks, or an error."""

    def __init__(self, answers: list) -> None:
        self.answers = answers

    async def song(self, request, *, on_stage, on_lm_result, wake, parts):
        on_stage("synth")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Engines:
    """The node's engines, as the job sees them; ``calls`` records what it asked."""

    def __init__(self, answers: list, start_error: Exception | None = None) -> None:
        self.sup = Supervisor()
        self.client_ = Client(answers)
        self.start_error = start_error
        self.calls: list[str] = []

    async def plan(self, request, cfg) -> EnginePlan:
        self.calls.append("plan")
        if request.get("model") == "gone":
            raise PlanError("model 'gone' cannot be used: not installed")
        return EnginePlan("sketch", "sketch", "sketch", ["x"], {}, Path("."), "sketch", "1")

    async def up(self, plan, keep_loaded, *, adapters=False):
        self.calls.append("up")
        if self.start_error is not None:
            raise self.start_error
        return self.sup

    def supervisor(self, plan):
        return self.sup

    def client(self, key):
        self.calls.append("client")
        return self.client_

    async def version(self, key):
        return "1"


TAKE = [Track(b"RIFF", "audio/wav")]


def run_job(tmp_path, monkeypatch, engines: Engines, model: str = "sketch"):
    """One instrumental song run as a job: (job, song, what write_takes was given)."""
    written: list[dict] = []

    def write_takes(folder, **kwargs):
        written.append(kwargs)
        return [{"take": 1, "audio": str(tmp_path / "a.wav"), "format": "wav16"}]

    monkeypatch.setattr(song_files, "write_takes", write_takes)

    async def main():
        queue = SongQueue(tmp_path / "queue.json")
        request = validate({"caption": "lofi", "duration": 10, "model": "sketch", "seed": 3})
        song = queue.add({**request.to_dict(), "model": model})
        queue.start(song)
        job = SongJob(song, queue, engines)
        await job.run()
        return job, song

    job, song = asyncio.run(main())
    return job, song, written


def states(job: SongJob) -> list[JobState]:
    return [state for state, _ in job.machine.history]


def test_a_whole_song_walks_every_step_once(tmp_path, monkeypatch):
    engines = Engines([TAKE])
    job, song, written = run_job(tmp_path, monkeypatch, engines)
    assert states(job) == [J.PLAN, J.ENGINE, J.SOURCES, J.SING, J.SAVE, J.DONE]
    assert song.state == DONE and song.takes[0].audio == str(tmp_path / "a.wav")
    assert engines.calls == ["plan", "up", "client"]
    timings = written[0]["meta"]["timings"]
    assert list(timings) == ["queued_at", "started_at", "engine_start_s", "engine_s"]


def test_an_engine_found_dead_is_started_again_by_the_same_steps(tmp_path, monkeypatch):
    engines = Engines([EngineUnreachable("ConnectError: refused"), TAKE])
    steps: list[str] = []
    for name in ("_engine", "_sing"):
        step = getattr(SongJob, name)

        async def counted(self, step=step, name=name):
            steps.append(name)
            return await step(self)

        monkeypatch.setattr(SongJob, name, counted)
    job, song, written = run_job(tmp_path, monkeypatch, engines)
    assert states(job) == [J.PLAN, J.ENGINE, J.SOURCES, J.SING, J.ENGINE, J.SING, J.SAVE, J.DONE]
    assert steps == ["_engine", "_sing", "_engine", "_sing"]  # the same two steps, again
    assert engines.calls == ["plan", "up", "client", "up", "client"]
    assert song.state == DONE and engines.sup.subscribers == []
    timings = written[0]["meta"]["timings"]
    assert timings["engine_s"] >= 0.2  # the restart is part of the singing's time


def test_an_engine_dead_again_after_its_restart_fails_the_song(tmp_path, monkeypatch):
    engines = Engines([EngineUnreachable("ConnectError: refused")] * 2)
    job, song, _ = run_job(tmp_path, monkeypatch, engines)
    assert states(job)[-3:] == [J.ENGINE, J.SING, J.FAILED]
    assert song.state == FAILED
    assert song.error == "the engine is not reachable: ConnectError: refused"


@pytest.mark.parametrize(
    "answer, state, error",
    [
        (JobFailed("[Server] ERROR: no DiT"), FAILED, "[Server] ERROR: no DiT"),
        (JobFailed(""), FAILED, "[DiT] ERROR: out of memory"),  # the supervisor's words
        (RuntimeError("odd"), FAILED, "[DiT] ERROR: out of memory"),
        (JobCancelled("the job was cancelled"), CANCELLED, None),
        ([], FAILED, "the engine returned no audio"),
    ],
)
def test_each_way_singing_ends_is_the_songs_end(tmp_path, monkeypatch, answer, state, error):
    job, song, written = run_job(tmp_path, monkeypatch, Engines([answer]))
    assert states(job)[-2:] == [J.SING, J(str(state))]
    assert song.state == state and song.error == error and written == []


def test_a_plan_or_a_start_that_fails_ends_the_song_at_its_step(tmp_path, monkeypatch):
    job, song, _ = run_job(tmp_path, monkeypatch, Engines([TAKE]), model="gone")
    assert states(job) == [J.PLAN, J.FAILED] and song.error.startswith("model 'gone'")

    started = Engines([TAKE], start_error=RuntimeError("[Load] FATAL: no device\nmore"))
    job, song, _ = run_job(tmp_path, monkeypatch, started)
    assert states(job) == [J.PLAN, J.ENGINE, J.FAILED]
    assert song.error == "the engine did not start: [Load] FATAL: no device"


def test_a_cancelled_task_ends_the_job_cancelled_or_gives_the_song_back(tmp_path):
    async def main(node_stops: bool):
        queue = SongQueue(tmp_path / f"queue-{node_stops}.json")
        song = queue.add(validate({"caption": "lofi", "model": "sketch"}).to_dict())
        queue.start(song)
        job = SongJob(song, queue, Engines([TAKE]))
        job.task_cancelled(node_stops=node_stops)  # before its first step
        return job, song

    job, song = asyncio.run(main(False))
    assert states(job) == [J.PLAN, J.CANCELLED] and song.state == CANCELLED
    job, song = asyncio.run(main(True))
    assert states(job) == [J.PLAN, J.CANCELLED]
    assert song.state == FAILED and song.error == "node stopped"  # queued again by a retry
