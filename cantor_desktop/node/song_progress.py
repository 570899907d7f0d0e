"""A running song's progress, from its engine's log: the stage (lm, synth) and how far it
is, the seeds the engine chose, and the LM's answer (two-stage songs)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from ..song.record import Song, SongState
from .queue import SongQueue

SAVING_FROM = 0.95  # engine work fills 0..0.95 of a song's progress, saving the rest
_SEED_RE = re.compile(r"^\[Resolve-T\] seed=(-?\d+)")
_JOB_DONE_RE = re.compile(r"^\[Server\] Job (\S+) done")
_DIT_STEP_RE = re.compile(r"^\[DiT\] Step (\d+)/(\d+)")


class ProgressWatcher:
    """Supervisor events (maybe from a reader thread) → song stage and progress."""

    def __init__(self, queue: SongQueue, song: Song, loop: asyncio.AbstractEventLoop):
        self.queue, self.song, self.loop = queue, song, loop
        self.seeds: list[int] = []
        self.lm_result: list[dict] | None = None  # the /lm array (two-stage songs)
        self.wake = asyncio.Event()  # set when the engine says a job is done
        self.steps: list[tuple[float, int]] = []  # (when read, step) of the DiT's steps
        self.share = (0.0, 1.0)  # the part of the song's progress the engine's job fills

    def span(self, lo: float, hi: float) -> None:
        """A song made of several engine jobs: the next job fills ``lo``…``hi`` of it."""
        self.share = (lo, hi)

    def on_event(self, event) -> None:
        if self.loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            running = False
        if running:
            self._apply(event)
        else:
            self.loop.call_soon_threadsafe(self._apply, event)

    def on_stage(self, stage: str, *_: Any) -> None:
        self.on_event(("stage", stage))

    def keep_lm_result(self, enriched: list[dict]) -> None:
        self.lm_result = enriched

    def _apply(self, event) -> None:
        song = self.song
        line = getattr(event, "line", "") or ""
        found = _JOB_DONE_RE.match(line)
        if found:
            self.wake.set()
        if song.state != SongState.RUNNING:
            return
        if isinstance(event, tuple):
            stage = "lm" if event[1] == "lm" else "synth"
            if stage != song.stage:
                self.queue.set_stage(song, stage, song.progress)
            return
        found = _SEED_RE.match(line)
        if found:
            self.seeds.append(int(found.group(1)))
        found = _DIT_STEP_RE.match(line)
        if found:
            self.steps.append((time.monotonic(), int(found.group(1))))
        stage = "lm" if getattr(event, "stage", "") == "lm" else "synth"
        if stage != song.stage and not (song.stage == "synth" and stage == "lm"):
            self.queue.set_stage(song, stage, song.progress)
        fraction = getattr(event, "fraction", None)
        if fraction is not None:
            lo, hi = self.share
            done = lo + min(float(fraction), 1.0) * (hi - lo)
            self.queue.set_progress(
                song, done * SAVING_FROM, getattr(event, "eta_seconds", None) if hi >= 1.0 else None
            )

    def seconds_per_step(self) -> float | None:
        """The DiT's seconds per diffusion step, from the times its step lines came (each
        run of steps counted on its own: a batch renders take after take)."""
        spent, steps = 0.0, 0
        for (t0, s0), (t1, s1) in zip(self.steps, self.steps[1:]):
            if s1 > s0:
                spent += t1 - t0
                steps += s1 - s0
        return spent / steps if steps and spent > 0 else None

    def seeds_for(self, takes: int, asked: int) -> list[int | None]:
        """Each take's seed: the ones the engine said it used (the last ``takes``), else the
        one asked for (None where the engine chose and did not say)."""
        if self.seeds:
            seeds: list[int | None] = (
                list(self.seeds[-takes:])
                if len(self.seeds) >= takes
                else list(self.seeds) + [None] * (takes - len(self.seeds))
            )
            return seeds
        return [asked if asked >= 0 else None] * takes
