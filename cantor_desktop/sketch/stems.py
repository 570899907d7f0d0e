"""What the Sketch gives as a stem of audio it did not make: a band-limited stand-in.

A Sketch song's stems are its own parts, rendered again from its plan (edit.py). Of other
audio the Sketch cannot separate anything; ``extract`` then returns the band where that
track mostly lives (:data:`BANDS`), filtered out of the mix with a linear-phase band-pass
(a Hann-windowed sinc pair, 4097 taps, FFT overlap-add). Vocals take the middle of the
stereo image too (left plus right: a centred voice stays, hard-panned sounds fade). It is a
stand-in that sounds like the right register of the song, not a separation.
"""

from __future__ import annotations

import numpy as np

from .instruments import SR

# track → (low, high) Hz: where a stem of it is looked for in outside audio
BANDS: dict[str, tuple[float, float]] = {
    "vocals": (250.0, 4000.0),
    "backing_vocals": (300.0, 5000.0),
    "drums": (40.0, 16000.0),
    "bass": (30.0, 250.0),
    "guitar": (200.0, 3500.0),
    "keyboard": (150.0, 4000.0),
    "percussion": (100.0, 2000.0),
    "strings": (200.0, 5000.0),
    "synth": (300.0, 8000.0),
    "fx": (6000.0, 20000.0),
    "brass": (150.0, 2500.0),
    "woodwinds": (400.0, 4000.0),
}
TAPS = 4097


def _kernel(lo: float, hi: float) -> np.ndarray:
    n = np.arange(TAPS) - (TAPS - 1) / 2
    window = np.hanning(TAPS)

    def low(fc: float) -> np.ndarray:
        return 2 * fc / SR * np.sinc(2 * fc / SR * n)

    h = (low(min(hi, SR / 2 - 1)) - (low(lo) if lo > 0 else 0.0)) * window
    return h.astype(np.float64)


def _filter(x: np.ndarray, h: np.ndarray, block: int = 1 << 17) -> np.ndarray:
    """``x`` (samples,) convolved with ``h``, delay compensated, same length."""
    size = 1 << int(np.ceil(np.log2(block + len(h) - 1)))
    H = np.fft.rfft(h, size)
    out = np.zeros(len(x) + len(h) - 1)
    for a in range(0, len(x), block):
        seg = x[a : a + block]
        y = np.fft.irfft(np.fft.rfft(seg, size) * H, size)[: len(seg) + len(h) - 1]
        out[a : a + len(y)] += y
    delay = (len(h) - 1) // 2
    return out[delay : delay + len(x)]


def stand_in(audio: np.ndarray, track: str) -> np.ndarray:
    """The band-limited stand-in for ``track`` of stereo ``audio`` (same shape, float32)."""
    lo, hi = BANDS.get(track, (20.0, 20000.0))
    h = _kernel(lo, hi)
    if track == "drums":  # the kick and the cymbals, not the middle
        h = _kernel(40.0, 150.0) + _kernel(5000.0, 16000.0)
    src = np.asarray(audio, dtype=np.float64)
    if track in ("vocals", "backing_vocals") and src.ndim == 2:
        mid = src.mean(axis=1)
        y = _filter(mid, h)
        return np.repeat(y[:, None], 2, axis=1).astype(np.float32)
    if src.ndim == 1:
        return _filter(src, h).astype(np.float32)
    return np.stack([_filter(src[:, c], h) for c in range(src.shape[1])], axis=1).astype(np.float32)
