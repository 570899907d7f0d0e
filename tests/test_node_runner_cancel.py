"""A song cancelled in the instant between being taken off the queue and its first step.

Found by `cantor stems` + Ctrl+C (tests/test_cli_edits.py): twelve stems queued, all
cancelled at once, and one of them stayed "running" forever with its engine held, so no
later song on that engine ever ran. A task cancelled before its first step never enters its
coroutine: what ends a song must not live in the coroutine's ``finally``."""

from __future__ import annotations

import asyncio

from cantor_desktop.node.queue import CANCELLED, DONE, QUEUED, RUNNING, SongQueue
from cantor_desktop.node.runner import Runner
from cantor_desktop.song.request import validate


def sketch(seconds: int) -> dict:
    return validate(
        {
            "caption": "lofi piano",
            "lyrics": "[Instrumental]",
            "duration": seconds,
            "model": "sketch",
            "seed": 7,
        }
    ).to_dict()


def test_a_song_cancelled_before_its_first_step_ends_cancelled_and_frees_its_engine(tmp_path):
    async def steps(runner, first, second):
        await asyncio.sleep(0)  # the runner's loop takes `first` off the queue …
        assert first.state == RUNNING and first.id in runner.tasks
        assert runner.cancel(first)  # … and it is cancelled before its task has run
        await asyncio.wait_for(_until(lambda: second.state == DONE), 60)
        return first.state, second.state, dict(runner.busy), dict(runner.tasks)

    first_state, second_state, busy, tasks = _with_runner(tmp_path, [30, 10], steps)
    assert first_state == CANCELLED
    assert second_state == DONE  # the engine was free for the next song
    assert busy == {} and tasks == {}


def _with_runner(tmp_path, seconds: list[int], steps):
    """A queue with a Sketch song of each length and its runner started: ``steps(runner,
    *songs)``'s answer, the runner stopped after."""

    async def main():
        queue = SongQueue(tmp_path / "queue.json")
        runner = Runner(queue)
        songs = [queue.add(sketch(n)) for n in seconds]
        runner.start()
        try:
            return await steps(runner, *songs)
        finally:
            await runner.stop()

    return asyncio.run(main())


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.02)


def test_a_finished_song_gives_its_memory_back_without_holding_its_engine(tmp_path, monkeypatch):
    """When the last queued song's takes are written the node trims its heap (node.memory),
    off the event loop, with the engine free; songs of a burst are not held up by it."""
    import threading

    from cantor_desktop.node import memory

    trims: list[str] = []
    monkeypatch.setattr(
        memory, "give_back", lambda: trims.append(threading.current_thread().name) or True
    )

    async def steps(runner, first, song):
        await asyncio.wait_for(_until(lambda: song.state == DONE and trims), 60)
        assert first.state == DONE
        return dict(runner.busy)

    busy = _with_runner(tmp_path, [10, 10], steps)
    assert busy == {}
    assert len(trims) == 1 and trims[0] != threading.main_thread().name


def test_the_next_song_has_the_engine_while_the_one_before_writes_its_takes(tmp_path, monkeypatch):
    """Writing a song's takes (durably: fsync) needs no engine: the next song starts on it
    at once. Here the first song's write is held until the second song has the engine."""
    import threading

    from cantor_desktop.node import song_files

    release = threading.Event()
    write_takes = song_files.write_takes

    def held(*args, **kwargs):
        release.wait(60)
        return write_takes(*args, **kwargs)

    monkeypatch.setattr(song_files, "write_takes", held)

    async def steps(runner, first, second, third):
        try:
            await asyncio.wait_for(_until(lambda: runner.busy.get("sketch") == second.id), 60)
            seen = [(first.state, first.stage, second.state)]
            # one song of an engine writes at a time: the second, done singing while the
            # first still writes, keeps the engine, and the third waits
            await asyncio.wait_for(_until(lambda: second.stage == "saving"), 60)
            seen.append((runner.busy.get("sketch") == second.id, third.state))
        finally:
            release.set()
        await asyncio.wait_for(
            _until(lambda: first.state == second.state == third.state == DONE), 60
        )
        return seen, dict(runner.busy), dict(runner.saving), dict(runner.tasks)

    seen, busy, saving, tasks = _with_runner(tmp_path, [10, 10, 10], steps)
    assert seen[0] == (RUNNING, "saving", RUNNING)  # the first still writing, the second sings
    assert seen[1] == (True, QUEUED)  # … not the third
    assert busy == {} and saving == {} and tasks == {}
