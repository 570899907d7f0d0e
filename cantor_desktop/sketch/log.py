"""The engine's log: every line to stderr (like ace-server), kept for /logs replay, streamed.

Stage lines follow the real binary's formats (``tests/fixtures/ace_server_recorded.txt``
holds them as it printed them): the LM prints
the request back as YAML after ``[LM-Phase2] N=…, CoT[0]:`` (:func:`lm_request_dump`); a
song up to 40.96 s is decoded in one piece (``[VAE] Decoded: …``), a longer one in tiles
(:func:`vae_lines`)."""

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
                    else:  # a binary stream (stderr's buffer)
                        stream.write(data.encode("utf-8", "replace"))  # type: ignore[arg-type]
                except (OSError, ValueError):
                    pass  # a closed stderr must not stop the engine
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


VAE_CHUNK = 1024  # latent frames decoded in one piece (--vae-chunk's default)
VAE_OVERLAP = 64
LATENT_RATE = 25  # latent frames per second
SAMPLES_PER_FRAME = 1920  # 48 kHz / 25


def lm_request_dump(req: dict, batch: int = 1) -> list[str]:
    """``[LM-Phase2] N=…, CoT[0]:`` and the request as YAML: sorted keys, the caption
    wrapped past column 80 with two-space continuation lines (the user's own words)."""
    text = ""
    if int(req.get("bpm") or 0) > 0:
        text += f"bpm: {int(req['bpm'])}\n"
    caption = str(req.get("caption") or "")
    if caption:
        text, col = text + "caption:", len("caption:")
        for word in caption.split(" "):
            text, col = (text + "\n  ", 2) if col > 80 else (text + " ", col + 1)
            text, col = text + word, col + len(word)
        text += "\n"
    if float(req.get("duration") or 0) > 0:
        text += f"duration: {int(float(req['duration']))}\n"
    for key, name in (
        ("keyscale", "keyscale"),
        ("vocal_language", "language"),
        ("timesignature", "timesignature"),
    ):
        if req.get(key):
            text += f"{name}: {req[key]}\n"
    return [f"[LM-Phase2] N={batch}, CoT[0]:"] + text.splitlines()


def vae_lines(samples: int) -> tuple[list[str], list[str]]:
    """The decode lines for a song of ``samples`` (48 kHz): (before, after) the decode."""
    frames = -(-samples // SAMPLES_PER_FRAME)
    seconds = samples / 48000
    if frames <= VAE_CHUNK:
        return [], [
            f"[VAE] Decoded: T_latent={frames} -> T_audio={samples} ({seconds:.2f}s @ 48kHz)"
        ]
    stride = VAE_CHUNK - 2 * VAE_OVERLAP
    tiles = -(-frames // stride)
    return (
        [
            f"[VAE] Tiled decode: {tiles} tiles (chunk={VAE_CHUNK}, overlap={VAE_OVERLAP}, "
            f"stride={stride})"
        ],
        [f"[VAE] Tiled decode done: {tiles} tiles -> T_audio={samples} ({seconds:.2f}s @ 48kHz)"],
    )
