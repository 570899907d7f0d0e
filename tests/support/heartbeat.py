"""A heartbeat on the Qt event loop that tells the app's own stalls from the machine's.

A ``QTimer`` beats every few milliseconds; the gap between two beats is how long the loop
could not run it. On a loaded machine part of a gap is time the GUI thread was ready to run
but waited for a CPU (other processes had them): that is the machine, not the app. Linux
counts it per thread (``/proc/thread-self/schedstat``: time on a CPU, time waiting in the run
queue), so each gap is split into what the app did (its code, blocking calls, the GIL held
by its other threads) and what the machine made it wait. Elsewhere the whole gap counts.

    beat = Heartbeat(5)
    beat.start() … beat.stop()
    beat.worst_app_ms()      # the figure to hold to a limit
    beat.worst_wall_ms()     # what a stopwatch saw, for the message
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass

_SCHEDSTAT = "/proc/thread-self/schedstat"


def _runqueue_ns() -> int | None:
    """Nanoseconds this thread has waited for a CPU so far (Linux), else None."""
    try:
        with open(_SCHEDSTAT, "rb") as fh:
            return int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Gap:
    wall_s: float  # between two beats
    waited_s: float  # of which the thread waited in the run queue (0 if unknown)

    @property
    def app_s(self) -> float:
        return max(self.wall_s - self.waited_s, 0.0)


class Heartbeat:
    def __init__(self, interval_ms: int = 5, skip: int = 3):
        from PySide6.QtCore import QTimer

        self.interval_ms = interval_ms
        self.skip = skip  # the first gaps include starting the timer
        # plain doubles, not a record per beat: 20,000 beats of objects the garbage collector
        # tracks set off full collections in the app being measured (80-100 ms each with
        # 10,000 songs loaded): the stall the heartbeat reported was its own
        self._wall = array("d")
        self._waited = array("d")
        self.measures_runqueue = _runqueue_ns() is not None
        self._timer = QTimer()
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._beat)
        self._last: tuple[float, int | None] | None = None

    def _beat(self) -> None:
        now, waited = time.perf_counter(), _runqueue_ns()
        if self._last is not None:
            t0, w0 = self._last
            queue = (waited - w0) / 1e9 if waited is not None and w0 is not None else 0.0
            self._wall.append(now - t0)
            self._waited.append(queue)
        self._last = (now, waited)

    def start(self) -> None:
        self._last = None
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    @property
    def gaps(self) -> list[Gap]:
        return [Gap(w, q) for w, q in zip(self._wall, self._waited)]

    def counted(self) -> list[Gap]:
        return self.gaps[self.skip :]

    def worst_app_ms(self) -> float:
        return max((g.app_s for g in self.counted()), default=0.0) * 1000

    def worst_wall_ms(self) -> float:
        return max((g.wall_s for g in self.counted()), default=0.0) * 1000

    def worst(self) -> Gap | None:
        return max(self.counted(), key=lambda g: g.app_s, default=None)

    def describe(self) -> str:
        g = self.worst()
        if g is None:
            return "no beats"
        how = (
            f"of which the machine kept the thread waiting for a CPU {g.waited_s * 1000:.1f} ms"
            if self.measures_runqueue
            else "run-queue time not measured on this OS"
        )
        return (
            f"worst gap {g.wall_s * 1000:.1f} ms ({how}); the app's part "
            f"{g.app_s * 1000:.1f} ms; {len(self.counted())} beats; longest wall gap "
            f"{self.worst_wall_ms():.1f} ms"
        )
