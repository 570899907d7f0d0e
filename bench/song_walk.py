"""The walk of one song through the node: how often its control passes between the node's
rooms, and how often it comes back to a room it had left.

One Sketch song with lyrics (plan → engine → lm → synth → save) runs on a :class:`Runner`
and its queue in this process, the Sketch engine as its own process, as the node runs it.
While it runs, ``sys.setprofile`` sees every Python call and return on the event loop's
thread, in the song's task (and in callbacks outside any task, such as the task's done
callback). Each event puts the song in a room, named by the module of the innermost frame
that belongs to one (:data:`ROOMS`; a frame of any other module — sources, song files,
config, asyncio, httpx — leaves the song where it was):

- a frame's first entry moves the song into that frame's room;
- a frame's real return moves it back to the room of the innermost frame below it.

A coroutine's suspension and resumption at an ``await`` are neither: the song waits there,
it does not move. Work handed to threads (``asyncio.to_thread``) and other tasks (the
engine's stderr reader, which turns its lines into progress) is not in the walk.

A *pass* is a change of room; a *return* is a pass into a room the song had been in before.

    .venv/bin/python bench/song_walk.py [--songs 2] [--show]

The first song also starts the engine; the second finds it running.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOMS = {
    "cantor_desktop.node.runner": "runner",
    "cantor_desktop.node.engines": "runner",
    "cantor_desktop.node.song_job": "job",
    "cantor_desktop.node.song_progress": "job",
    "cantor_desktop.node.queue": "queue",
    "cantor_desktop.node.pool.queue": "queue",
    "cantor_desktop.engine.supervisor": "supervisor",
    "cantor_desktop.engine.engine_state": "supervisor",
    "cantor_desktop.engine.client": "engine client",
}
"""Module → room. A module not named here is no room of its own."""

LYRICS = "[Verse]\nWalking down the river where the lights are low\n[Chorus]\nHold on, hold on"
_RESUME = dis.opmap["RESUME"]
_YIELD = dis.opmap["YIELD_VALUE"]


def room_of(frame) -> str | None:
    return ROOMS.get(frame.f_globals.get("__name__", ""))


def innermost(frame) -> str | None:
    while frame is not None:
        room = room_of(frame)
        if room is not None:
            return room
        frame = frame.f_back
    return None


class Walk:
    """The rooms a task's control is in, one entry per change."""

    def __init__(self, task_name: str):
        self.task_name = task_name
        self.rooms: list[str] = []
        self.steps: list[str] = []  # "room: function" at each pass, for --show

    def _ours(self) -> bool:
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return False
        return task is None or task.get_name() == self.task_name

    def profile(self, frame, event: str, _arg) -> None:
        if event == "call":
            code = frame.f_code.co_code
            lasti = frame.f_lasti
            if not (code[lasti] == _RESUME and code[lasti + 1] == 0):
                return  # a coroutine resumed after an await: it waited, it did not move
            if not self._ours():
                return
            room = innermost(frame)
        elif event == "return":
            if frame.f_code.co_code[frame.f_lasti] == _YIELD:
                return  # a coroutine suspended at an await
            if not self._ours():
                return
            room = innermost(frame.f_back)
        else:
            return
        if room is not None and (not self.rooms or self.rooms[-1] != room):
            self.rooms.append(room)
            self.steps.append(f"{room}: {frame.f_code.co_qualname} ({event})")

    def figures(self) -> dict:
        seen: set[str] = set()
        passes = returns = 0
        for n, room in enumerate(self.rooms):
            if n and room in seen:
                returns += 1
            passes += bool(n)
            seen.add(room)
        return {"passes": passes, "returns": returns, "rooms": sorted(seen)}


async def walk_songs(count: int) -> list[Walk]:
    from cantor_desktop.node.queue import DONE, SongQueue
    from cantor_desktop.node.runner import Runner
    from cantor_desktop.song.request import validate
    from cantor_desktop.system.paths import paths

    queue = SongQueue(paths().queue_file)
    runner = Runner(queue)
    runner.start()
    walks = []
    try:
        for n in range(count):
            request = validate(
                {
                    "caption": "pop song with piano",
                    "lyrics": LYRICS,
                    "duration": 10,
                    "model": "sketch",
                    "seed": 7 + n,
                }
            ).to_dict()
            song = queue.add(request)
            walk = Walk(f"song-{song.id}")
            sys.setprofile(walk.profile)
            try:
                runner.wake()
                while song.id not in runner.tasks and not song.is_finished:
                    await asyncio.sleep(0)
                task = runner.tasks.get(song.id)
                if task is not None:
                    await asyncio.wait([task])
                await asyncio.sleep(0)  # its done callback
            finally:
                sys.setprofile(None)
            if song.state != DONE:
                raise SystemExit(f"the song ended {song.state}: {song.error}")
            walks.append(walk)
    finally:
        await runner.stop()
    return walks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--songs", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every pass")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cantor-walk-") as home:
        os.environ["CANTOR_HOME"] = home
        walks = asyncio.run(walk_songs(args.songs))
    for n, walk in enumerate(walks, start=1):
        figures = walk.figures()
        what = "engine started" if n == 1 else "engine running"
        print(json.dumps({"song": n, "engine": what, **figures}))
        if args.show:
            for step in walk.steps:
                print("   ", step)


if __name__ == "__main__":
    main()
