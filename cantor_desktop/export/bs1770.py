"""Integrated loudness per ITU-R BS.1770-4, with numpy alone (no scipy).

1. **K-weighting**: two biquads in series, the pre-filter (a high shelf, about +4 dB above
   2 kHz: the head's acoustic effect) and the RLB high-pass (about 38 Hz). The standard gives
   their coefficients for 48 kHz only (:data:`PRE_FILTER_48K`, :data:`RLB_48K`). For any rate
   the same analog filters are discretised again: each 48 kHz biquad is read back as the
   bilinear transform of an analog second-order section

       H(s) = (Vh·s² + Vb·(Ω/Q)·s + Vl·Ω²) / (s² + (Ω/Q)·s + Ω²),   Ω = tan(π f0 / fs)

   (high, band and low gains Vh, Vb, Vl; corner f0; quality Q), solved exactly from the five
   coefficients (:func:`prototype`), and transformed at the new rate with the frequency
   prewarped to f0 (:func:`biquad`). At 48 kHz this gives the standard's coefficients back
   (to float rounding); at other rates the same analog response, as pyloudnorm's "DeMan"
   filters and libebur128 do (both fitted the same prototype numerically). The one
   difference: they keep the RLB numerator at [1, −2, 1] at every rate, which makes its
   pass-band gain depend on the rate by a few thousandths of a dB; here the analog gain Vh
   is kept, so a tone reads the same at 44.1 and 48 kHz.

2. **Filtering** by FFT (overlap-save): the signal is cut into blocks of :data:`FFT_SIZE`
   samples that overlap by a history of :data:`HISTORY_S` seconds; each block's spectrum is
   multiplied by the filter's exact frequency response H(e^jω) (both biquads, from their
   coefficients, at the FFT's bins) and transformed back; the first ``history`` outputs of a
   block (wrapped around) are dropped. The first block sees zeros before the signal, as a
   recursive filter at rest does. That is the filter's own output (scipy's ``lfilter`` with
   zero initial state), except that the impulse response is cut at the history: every output
   sample is off by at most Σ_{k ≥ history} |h[k]| · max |x|, which for 125 ms is below
   3e-12 of full scale (−230 dB; the RLB's poles at 38 Hz decay as t·e^(−240 t)).

3. **Gating**: mean square of the K-weighted signal per channel over 400 ms blocks that
   start every 100 ms (75 % overlap; only whole blocks), weighted by channel (L, R, C: 1.0;
   Ls, Rs: 1.41) and summed: a block's loudness is −0.691 + 10·log10 of that sum. Blocks
   at or below −70 LUFS are dropped (absolute gate); the mean of the rest, less 10 LU, is
   the relative gate; the integrated loudness is −0.691 + 10·log10 of the mean power of
   the blocks above both gates. Silence, or audio shorter than one block, is −inf.

The constant −0.691 makes a 997 Hz sine at 0 dBFS in one channel read −3.01 LUFS (the
K-filter's gain there is +0.691 dB); at exactly 1 kHz the filter gives 0.698 dB.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

STANDARD_RATE = 48000
# ITU-R BS.1770-4, Annex 1, Tables 1 and 2: (b0, b1, b2), (a0, a1, a2) at 48 kHz
PRE_FILTER_48K = (
    (1.53512485958697, -2.69169618940638, 1.19839281085285),
    (1.0, -1.69065929318241, 0.73248077421585),
)
RLB_48K = ((1.0, -2.0, 1.0), (1.0, -1.99004745483398, 0.99007225036621))
CHANNEL_WEIGHTS = (1.0, 1.0, 1.0, 1.41, 1.41)  # L, R, C, Ls, Rs
OFFSET = -0.691  # LUFS of a block of mean square 1.0
BLOCK_SEGMENTS = 4  # 400 ms blocks of 100 ms steps: 75 % overlap
SEGMENTS_PER_SECOND = 10
ABSOLUTE_GATE = -70.0  # LUFS
RELATIVE_GATE = -10.0  # LU under the absolute-gated mean
HISTORY_S = 0.125  # impulse response kept (see above)
FFT_SIZE = 1 << 16  # samples per FFT block at 48 kHz and below

Check = Callable[[], None]


@dataclass(frozen=True)
class Prototype:
    """An analog second-order section (see the module docstring), with its corner f0 in Hz."""

    high: float
    band: float
    low: float
    f0: float
    q: float


def prototype(b, a, rate: int = STANDARD_RATE) -> Prototype:
    """The analog section whose bilinear transform at ``rate`` is the biquad (b, a).

    With d = Ω² + Ω/Q + 1 the transform gives a1 = 2(Ω² − 1)/d, a2 = (Ω² − Ω/Q + 1)/d,
    b0 ± b2 and b1 likewise; so 1 + a1 + a2 = 4Ω²/d, 1 − a1 + a2 = 4/d, 1 − a2 = 2(Ω/Q)/d,
    and the sums b0 + b1 + b2, b0 − b1 + b2, b0 − b2 are the same with Vl, Vh, Vb.
    """
    b0, b1, b2 = (float(v) / float(a[0]) for v in b)
    a1, a2 = float(a[1]) / float(a[0]), float(a[2]) / float(a[0])
    low_sum, high_sum = 1.0 + a1 + a2, 1.0 - a1 + a2  # 4Ω²/d, 4/d
    omega = math.sqrt(low_sum / high_sum)
    omega_q = 2.0 * (1.0 - a2) / high_sum
    return Prototype(
        high=(b0 - b1 + b2) / high_sum,
        band=(b0 - b2) / (1.0 - a2),
        low=(b0 + b1 + b2) / low_sum,
        f0=math.atan(omega) * rate / math.pi,
        q=omega / omega_q,
    )


def biquad(
    p: Prototype, rate: int
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """The bilinear transform of ``p`` at ``rate`` (prewarped at f0): (b, a), a0 = 1."""
    omega = math.tan(math.pi * p.f0 / rate)
    o2, oq = omega * omega, omega / p.q
    d = o2 + oq + 1.0
    b = (
        (p.low * o2 + p.band * oq + p.high) / d,
        2.0 * (p.low * o2 - p.high) / d,
        (p.low * o2 - p.band * oq + p.high) / d,
    )
    a = (1.0, 2.0 * (o2 - 1.0) / d, (o2 - oq + 1.0) / d)
    return b, a


@functools.lru_cache(maxsize=8)
def k_weighting(rate: int) -> tuple:
    """The K-weighting at ``rate``: ((b, a) of the pre-filter, (b, a) of the RLB filter)."""
    if rate == STANDARD_RATE:
        return PRE_FILTER_48K, RLB_48K
    return tuple(biquad(prototype(b, a), rate) for b, a in (PRE_FILTER_48K, RLB_48K))


@functools.lru_cache(maxsize=8)
def _response(rate: int, n: int) -> np.ndarray:
    """H(e^jω) of the K-weighting at the ``n // 2 + 1`` bins of a real FFT of ``n``
    (read-only: shared by every caller)."""
    z1 = np.exp(-2j * np.pi * np.arange(n // 2 + 1) / n)  # z^-1 on the unit circle
    h = np.ones(n // 2 + 1, dtype=np.complex128)
    for b, a in k_weighting(rate):
        h *= (b[0] + z1 * (b[1] + z1 * b[2])) / (a[0] + z1 * (a[1] + z1 * a[2]))
    h.flags.writeable = False
    return h


def _layout(rate: int) -> tuple[int, int]:
    """(history, FFT size) for ``rate``: the size grows with the rate to keep the overlap
    at most 1/8 of a block."""
    history = math.ceil(HISTORY_S * rate)
    return history, max(FFT_SIZE, 1 << (8 * history - 1).bit_length())


def _as_frames(audio: np.ndarray) -> np.ndarray:
    audio = np.asarray(audio)
    if audio.ndim == 1:
        audio = audio[:, None]
    if audio.ndim != 2:
        raise ValueError(f"audio must be (frames,) or (frames, channels), not {audio.shape}")
    return audio


def _filtered_blocks(
    audio: np.ndarray, rate: int, check: Check | None = None
) -> Iterator[tuple[int, np.ndarray]]:
    """(start frame, K-weighted samples as (channels, length) float64), in order, covering
    every frame once."""
    frames, channels = audio.shape
    history, n = _layout(rate)
    step = n - history
    h = _response(rate, n)
    columns = audio.T  # a view; rows are channels
    buf = np.zeros((channels, n))
    for start in range(0, frames, step):
        if check:
            check()
        lo, hi = start - history, min(start + step, frames)
        if lo < 0 or hi < start + step:  # the edges see zeros
            buf.fill(0.0)
        buf[:, max(lo, 0) - lo : hi - lo] = columns[:, max(lo, 0) : hi]
        spectrum = np.fft.rfft(buf, axis=1)
        spectrum *= h
        yield start, np.fft.irfft(spectrum, n, axis=1)[:, history : history + hi - start]


def k_weighted(audio: np.ndarray, rate: int) -> np.ndarray:
    """The K-weighted signal, (frames, channels) float64 (for checks; the meter streams)."""
    audio = _as_frames(audio)
    out = np.empty(audio.shape)
    for start, y in _filtered_blocks(audio, rate):
        out[start : start + y.shape[1]] = y.T
    return out


def _segment_bounds(frames: int, rate: int) -> np.ndarray:
    """Frame indices where each whole 100 ms segment starts, and where the last one ends."""
    count = frames * SEGMENTS_PER_SECOND // rate
    bounds = np.arange(count + 1, dtype=np.int64) * rate // SEGMENTS_PER_SECOND
    return bounds[bounds <= frames]


def block_powers(audio: np.ndarray, rate: int, check: Check | None = None) -> np.ndarray:
    """Channel-weighted mean square of the K-weighted signal in every whole 400 ms block
    (one every 100 ms, in order); its loudness is OFFSET + 10·log10 of it."""
    audio = _as_frames(audio)
    frames, channels = audio.shape
    if channels > len(CHANNEL_WEIGHTS):
        raise ValueError(f"{channels} channels; BS.1770 weights up to {len(CHANNEL_WEIGHTS)}")
    bounds = _segment_bounds(frames, rate)
    whole = len(bounds) - 1  # whole 100 ms segments
    if whole < BLOCK_SEGMENTS:
        return np.zeros(0)
    weights = np.asarray(CHANNEL_WEIGHTS[:channels])[:, None]
    sums = np.zeros(whole + 1)  # + the frames after the last
    for start, y in _filtered_blocks(audio, rate, check):
        end = start + y.shape[1]
        power = (weights * (y * y)).sum(axis=0) if channels > 1 else y[0] * y[0]
        first = int(np.searchsorted(bounds, start, side="right")) - 1
        last = int(np.searchsorted(bounds, end, side="left"))
        cuts = np.concatenate([[0], bounds[first + 1 : last] - start])
        sums[first : first + len(cuts)] += np.add.reduceat(power, cuts)
    sums = sums[:whole]
    blocks = sum(sums[k : whole - BLOCK_SEGMENTS + 1 + k] for k in range(BLOCK_SEGMENTS))
    lengths = bounds[BLOCK_SEGMENTS:] - bounds[:-BLOCK_SEGMENTS]
    return blocks / lengths


def gated_loudness(powers: np.ndarray) -> float:
    """LUFS of blocks of these powers after the absolute and relative gates (−inf when
    none passes)."""
    above = powers[powers > 10.0 ** ((ABSOLUTE_GATE - OFFSET) / 10.0)]
    if not len(above):
        return float("-inf")
    relative = above.mean() * 10.0 ** (RELATIVE_GATE / 10.0)
    return float(OFFSET + 10.0 * np.log10(above[above > relative].mean()))


def integrated_loudness(audio: np.ndarray, rate: int, check: Check | None = None) -> float:
    """LUFS of ``audio`` ((frames,) or (frames, channels), channels in the order L, R, C,
    Ls, Rs) at ``rate`` Hz; −inf for silence or audio shorter than 400 ms. ``check`` is
    called before each FFT block (a place to cancel)."""
    return gated_loudness(block_powers(audio, rate, check))
