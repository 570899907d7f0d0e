"""Speed and time-left for a download, without Qt: a sliding window over (time, bytes)."""

from __future__ import annotations

import time
from collections import deque

from ..units import human_size


class TransferMeter:
    """Feed it byte counts as they arrive; it says bytes/s and seconds left."""

    def __init__(self, window: float = 5.0, clock=time.monotonic):
        self._window = window
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    def reset(self) -> None:
        self._samples.clear()

    def add(self, done: int) -> None:
        now = self._clock()
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window:
            self._samples.popleft()

    def speed(self) -> float:
        """Bytes per second over the window; 0 until two samples span some time."""
        if len(self._samples) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if t1 - t0 <= 0:
            return 0.0
        # a sample older than the window still counts, so a stall shows as falling speed
        now = self._clock()
        span = max(t1 - t0, min(now - t0, self._window * 2))
        return max(0.0, (b1 - b0) / span)

    def eta(self, total: int | None) -> float | None:
        if not total or not self._samples:
            return None
        speed = self.speed()
        if speed <= 0:
            return None
        return max(0.0, (total - self._samples[-1][1]) / speed)


def human_bytes(n: float | int | None) -> str:
    """Sizes as the CLI shows them (:func:`cantor_desktop.units.human_size`); "?" when
    unknown."""
    return "?" if n is None else human_size(float(n))


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}:{s:02d}"
    hours, m = divmod(minutes, 60)
    return f"{hours} h {m:02d} min"
