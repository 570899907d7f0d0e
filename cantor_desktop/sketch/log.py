"""The engine's log: every line to stderr (like ace-server), kept for /logs replay, streamed."""

from __future__ import annotations

import io
import queue
import sys
import threading
from collections import deque

REPLAY_LINES = 512


class EngineLog:
    def __init__(self, stream=None, replay: int = REPLAY_LINES):
        self._stream = stream
        self._lines: deque[str] = deque(maxlen=replay)
        self._subscribers: list[queue.Queue] = []
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        # UTF-8 bytes whatever the locale (a Windows pipe would otherwise be cp1252), so the
        # node reading the pipe sees the same text as /logs
        stream = self._stream or getattr(sys.stderr, "buffer", None) or sys.stderr
        with self._lock:
            for part in line.splitlines() or [""]:
                self._lines.append(part)
                for q in self._subscribers:
                    q.put(part)
                data = part + "\n"
                try:
                    if isinstance(stream, io.TextIOBase):
                        stream.write(data)
                    else:
                        stream.write(data.encode("utf-8", "replace"))
                except (OSError, ValueError):
                    pass        # a closed stderr must not stop the engine
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def subscribe(self) -> tuple[list[str], queue.Queue]:
        """The lines to replay and a queue receiving every later line."""
        q: queue.Queue = queue.Queue()
        with self._lock:
            self._subscribers.append(q)
            return list(self._lines), q

    def unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            if q in self._subscribers:
                self._subscribers.remove(q)
