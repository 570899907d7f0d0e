"""Loudness to a target with a true-peak ceiling.

- Integrated loudness per ITU-R BS.1770-4 (K-weighting, 400 ms blocks, absolute and
  relative gates): :mod:`.bs1770`, numpy alone.
- True peak per BS.1770-4 Annex 2: the largest sample of the signal oversampled 4× (soxr,
  a linear-phase high-quality interpolator, rather than the Annex's 48-tap example FIR),
  in dBTP.

Neither needs scipy (the bundle leaves it out).
- The gain that reaches the target; where it would push a true peak over the ceiling, a
  look-ahead limiter lowers the gain around that peak only: the gain each sample needs is
  taken as a moving minimum and smoothed by a moving mean of the same (centred) window —
  2 ms, then 50 ms — so the gain is already down when the peak arrives, eases back after it,
  and at every peak is at most what that peak needs. Limiting lowers the loudness a little,
  so the gain is raised and the limiter run again until the loudness is within 0.1 LU of the
  target (at most four rounds). The result's true peak is measured again, never assumed.

Everything here works on float32 arrays of shape (frames, channels), at the output rate.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

OVERSAMPLE = 4
ATTACK_S, RELEASE_S = 0.002, 0.050
MARGIN_DB = 0.05  # the limiter aims this far below the ceiling
TOLERANCE_LU = 0.1
ROUNDS = 4
CHUNK = 1 << 18  # frames per soxr call: bounded memory, a place to cancel

Check = Callable[[], None]


def db(x: float) -> float:
    return float(20.0 * np.log10(x)) if x > 0 else float("-inf")


def gain(db_value: float) -> float:
    return float(10.0 ** (db_value / 20.0))


def integrated_loudness(audio: np.ndarray, rate: int, check: Check | None = None) -> float:
    """LUFS (−inf for silence or audio shorter than one 400 ms block)."""
    from . import bs1770

    return bs1770.integrated_loudness(audio, rate, check)


LISTENING_LUFS = -18.0
"""The level takes are brought to when they are compared by ear: loud enough to hear, low
enough that most songs reach it without clipping."""


def listening_gain(audio: np.ndarray, rate: int, target: float = LISTENING_LUFS) -> float:
    """The gain (a factor) that plays ``audio`` at ``target`` LUFS, lowered so no sample
    clips; 1.0 for silence. Two takes played at their gains sound equally loud."""
    measured = integrated_loudness(audio, rate)
    if not np.isfinite(measured):
        return 1.0
    factor = gain(target - measured)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak > 0:
        factor = min(factor, 0.999 / peak)
    return factor


def peak_envelope(audio: np.ndarray, rate: int, check: Check | None = None) -> np.ndarray:
    """Per frame, the largest absolute value of the 4× oversampled signal between this
    frame and the next, over all channels (float32, one value per frame)."""
    import soxr

    frames, channels = audio.shape
    out = np.empty(frames, dtype=np.float32)
    stream = soxr.ResampleStream(rate, rate * OVERSAMPLE, channels, dtype="float32", quality="HQ")
    carry = np.zeros((0, channels), dtype=np.float32)
    done = 0
    for start in range(0, frames, CHUNK):
        if check:
            check()
        last = start + CHUNK >= frames
        block = stream.resample_chunk(np.ascontiguousarray(audio[start : start + CHUNK]), last=last)
        if len(carry):
            block = np.concatenate([carry, block])
        usable = min(len(block) // OVERSAMPLE, frames - done)
        if usable:
            out[done : done + usable] = _frame_peaks(block[: usable * OVERSAMPLE], OVERSAMPLE)
            done += usable
        carry = block[usable * OVERSAMPLE :]
    if done < frames:  # the interpolator's tail: the samples
        out[done:] = _frame_peaks(audio[done:], 1)
    # a frame's own sample counts too (the interpolator passes through it)
    np.maximum(out, _frame_peaks(audio, 1), out=out)
    return out


def _frame_peaks(block: np.ndarray, group: int) -> np.ndarray:
    """max |x| over each ``group`` consecutive rows and all channels (element-wise maxima:
    numpy's reductions over a short last axis are slow)."""
    peak = np.abs(block[0::group, 0])
    for phase in range(group):
        for ch in range(block.shape[1]):
            if phase or ch:
                np.maximum(peak, np.abs(block[phase::group, ch]), out=peak)
    return peak


def true_peak(audio: np.ndarray, rate: int, check: Check | None = None) -> float:
    """dBTP."""
    if not len(audio):
        return float("-inf")
    return db(float(peak_envelope(audio, rate, check).max()))


def _odd(n: float) -> int:
    n = max(1, int(n))
    return n if n % 2 else n + 1


def moving_min(x: np.ndarray, width: int) -> np.ndarray:
    """Centred moving minimum of odd ``width`` (van Herk / Gil-Werman: O(n), vectorised);
    beyond the ends the window sees +inf."""
    half = width // 2
    n = len(x)
    padded_len = -(-(n + 2 * half) // width) * width
    padded = np.full(padded_len, np.inf, dtype=x.dtype)
    padded[half : half + n] = x
    blocks = padded.reshape(-1, width)
    forward = np.minimum.accumulate(blocks, axis=1).ravel()
    backward = np.minimum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()
    # the window [i, i + width) of padded: backward[i] covers i..end of its block,
    # forward[i + width - 1] covers the start of the next block..i + width - 1
    return np.minimum(backward[:n], forward[width - 1 : width - 1 + n])


def moving_mean(x: np.ndarray, width: int) -> np.ndarray:
    """Centred moving mean of odd ``width``; beyond the ends the window sees 1.0 (no gain
    change), which is what a gain curve means there."""
    half = width // 2
    padded = np.concatenate([np.ones(half), x.astype(np.float64), np.ones(half)])
    sums = np.cumsum(np.concatenate([[0.0], padded]))
    return ((sums[width:] - sums[:-width]) / width).astype(np.float32)


def limiter_gain(peaks: np.ndarray, ceiling: float, rate: int) -> np.ndarray | None:
    """The gain per frame that keeps ``peaks`` (linear) at or under ``ceiling`` (linear);
    None when no frame needs any."""
    over = peaks > ceiling
    if not over.any():
        return None
    need = np.ones(len(peaks), dtype=np.float32)
    need[over] = ceiling / peaks[over]
    g = need
    for seconds in (ATTACK_S, RELEASE_S):
        width = _odd(seconds * rate)
        g = moving_mean(moving_min(g, width), width)
    # float rounding of the moving mean must not let a peak through
    return np.minimum(g, np.where(over, need, np.float32(1.0)))


class LoudnessResult:
    __slots__ = ("audio", "measured", "loudness", "true_peak", "gain_db", "limited_db")

    def __init__(self, audio, measured, loudness, true_peak, gain_db, limited_db):
        self.audio = audio
        self.measured = measured  # LUFS of the input
        self.loudness = loudness  # LUFS of the output
        self.true_peak = true_peak  # dBTP of the output
        self.gain_db = gain_db  # the gain applied before limiting
        self.limited_db = limited_db  # the most the limiter took away (≤ 0)


def normalise(
    audio: np.ndarray,
    rate: int,
    target: float,
    ceiling_db: float,
    check: Check | None = None,
    progress: Callable[[float], None] | None = None,
) -> LoudnessResult:
    """Bring ``audio`` to ``target`` LUFS with true peaks at or under ``ceiling_db`` dBTP."""

    def step(fraction: float) -> None:
        if progress:
            progress(fraction)
        if check:
            check()

    measured = integrated_loudness(audio, rate, check)
    step(0.25)
    if not np.isfinite(measured):  # silence: nothing to bring up
        tp = true_peak(audio, rate, check)
        return LoudnessResult(audio, measured, measured, tp, 0.0, 0.0)
    base_peaks = peak_envelope(audio, rate, check)
    step(0.45)
    ceiling = gain(ceiling_db - MARGIN_DB)
    gain_db = target - measured
    out, loudness, limited = audio, measured, 0.0
    for round_ in range(ROUNDS):
        g = gain(gain_db)
        lim = limiter_gain(base_peaks * np.float32(g), ceiling, rate)
        out = audio * np.float32(g)
        if lim is None:
            loudness, limited = measured + gain_db, 0.0  # a gain is exact in LUFS
            break
        out *= lim[:, None]
        limited = db(float(lim.min()))
        loudness = integrated_loudness(out, rate, check)
        step(0.45 + 0.35 * (round_ + 1) / ROUNDS)
        if abs(loudness - target) <= TOLERANCE_LU:
            break
        gain_db += target - loudness
    tp = true_peak(out, rate, check)
    if tp > ceiling_db:  # what the smoothing let through: scale it off
        trim = ceiling_db - tp - 0.01
        out = out * np.float32(gain(trim))
        tp += trim
        loudness += trim
    step(1.0)
    return LoudnessResult(out, measured, loudness, tp, gain_db, limited)
