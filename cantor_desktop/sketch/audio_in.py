"""Audio that comes in: decoded as ace-server decodes it, and remembered for the Sketch's VAE.

ace-server decodes WAV (16-bit, 24-bit, float) and MP3 parts and refuses anything else with
``Failed to decode audio``; every source is brought to 48 kHz stereo. The Sketch does the
same (libsndfile through soundfile, soxr to resample).

The Sketch cannot decode a latent of outside audio back into that audio (see latent.py), so
it remembers the audio it encodes: :class:`Remembered` keeps the last ones it saw (at most
``BUDGET`` bytes, as 16-bit samples) by a fingerprint that the latent's header carries. An
edit of an upload encoded by this engine process therefore keeps the upload's own audio;
after a restart the latent is all there is, and the Sketch plays its envelope instead.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict

import numpy as np

from .instruments import SR

BUDGET = 256 * 1024 * 1024  # 16-bit stereo: about 23 minutes of audio


def sniff(data: bytes) -> str | None:
    """ "wav" or "mp3" by the first bytes (what ace-server's decoder accepts), else None."""
    if len(data) >= 12 and data[:4] in (b"RIFF", b"RIFX") and data[8:12] == b"WAVE":
        return "wav"
    if data[:3] == b"ID3":
        return "mp3"
    if len(data) >= 2 and data[0] == 0xFF and (data[1] & 0xE0) == 0xE0:
        return "mp3"
    return None


def decode(data: bytes) -> np.ndarray | None:
    """48 kHz stereo float32 ``(n, 2)`` of a WAV or MP3 file's bytes; None when it is not
    one of those or does not decode (no samples)."""
    kind = sniff(data)
    if kind is None:
        return None
    import soundfile as sf

    try:
        audio, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception:  # noqa: BLE001 - libsndfile's many ways to say "not audio"
        return None
    if not len(audio) or not np.all(np.isfinite(audio)):
        return None
    if audio.shape[1] == 1:
        audio = np.repeat(audio, 2, axis=1)
    elif audio.shape[1] > 2:
        audio = audio[:, :2]
    if rate != SR:
        import soxr

        audio = soxr.resample(np.ascontiguousarray(audio), rate, SR, quality="HQ")
    return np.ascontiguousarray(audio, dtype=np.float32)


def fingerprint(audio: np.ndarray) -> str:
    """What names an audio in a latent's header: sha256 of its 16-bit samples, 16 hex."""
    return hashlib.sha256(to_int16(audio).tobytes()).hexdigest()[:16]


def to_int16(audio: np.ndarray) -> np.ndarray:
    return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


class Remembered:
    """The audio this engine encoded, by fingerprint, newest kept (a byte budget)."""

    def __init__(self, budget: int = BUDGET):
        self.budget = budget
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, audio: np.ndarray, key: str | None = None) -> str:
        """Remember ``audio`` under its fingerprint (or ``key``: what stands in for the
        audio a latent names when that audio is gone); returns the key."""
        samples = to_int16(audio)
        key = key or hashlib.sha256(samples.tobytes()).hexdigest()[:16]
        with self._lock:
            self._items[key] = samples
            self._items.move_to_end(key)
            held = sum(a.nbytes for a in self._items.values())
            while held > self.budget and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                held -= old.nbytes
        return key

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            samples = self._items.get(key)
            if samples is not None:
                self._items.move_to_end(key)
        if samples is None:
            return None
        return samples.astype(np.float32) * np.float32(1 / 32767.0)
