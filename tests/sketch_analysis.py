"""Audio analysis for the Sketch tests (no tests here): band energies, key energy and onsets,
all from numpy FFTs of the rendered audio."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from cantor_desktop.sketch import music, render

SR = render.SR
OCTAVES = [20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480]


def mono(audio: np.ndarray) -> np.ndarray:
    return (audio.mean(axis=1) if audio.ndim == 2 else audio).astype(np.float64)


def band_energy(audio: np.ndarray, edges=OCTAVES) -> np.ndarray:
    """Energy per band (Hz edges) from one FFT of the mono mix, as shares of the total."""
    x = mono(audio)
    spec = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / SR)
    idx = np.searchsorted(freqs, edges)
    bands = np.add.reduceat(spec, idx)[:-1]
    return bands / max(spec.sum(), 1e-30)


def share_between(audio: np.ndarray, lo: float, hi: float) -> float:
    return float(band_energy(audio, [0, lo, hi, SR / 2])[1])


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def in_key_share(audio: np.ndarray, tonic: int, minor: bool) -> float:
    """The share of the tonal energy (50 Hz – 4 kHz, bins within 30 cents of a semitone)
    on the pitch classes of the key. Noise scores about 7/12."""
    x = mono(audio)
    spec = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    sel = (f > 50) & (f < 4000)
    midi = 69 + 12 * np.log2(f[sel] / 440)
    near = np.abs(midi - np.round(midi)) < 0.3
    pcs = np.round(midi[near]).astype(int) % 12
    energy = np.bincount(pcs, weights=spec[sel][near], minlength=12)
    key = [(tonic + s) % 12 for s in music.scale(minor)]
    return float(energy[key].sum() / energy.sum())


def flux(audio: np.ndarray, n: int = 1024, hop: int = 128, lag: int = 2, width: int = 5):
    """Onset strength per hop: the rise of the log spectrum over the frame ``lag`` hops
    before, that frame first max-filtered across ``width`` bins so vibrato, which moves a
    partial to the next bin, does not read as an attack (as in SuperFlux)."""
    x = np.concatenate([np.zeros(n, np.float32), mono(audio).astype(np.float32)])
    m = (len(x) - n) // hop
    win = np.hanning(n).astype(np.float32)
    out = np.zeros(m)
    keep = None
    for a in range(0, m, 2048):
        b = min(m, a + 2048)
        idx = np.arange(n)[None, :] + hop * np.arange(a, b)[:, None]
        spec = np.log1p(np.abs(np.fft.rfft(x[idx] * win, axis=1)))[:, : n // 4]
        full = spec if keep is None else np.vstack([keep, spec])
        prev = full.copy()
        for k in range(1, width // 2 + 1):  # a max filter across bins
            np.maximum(prev[:, k:], full[:, :-k], out=prev[:, k:])
            np.maximum(prev[:, :-k], full[:, k:], out=prev[:, :-k])
        rise = np.maximum(0, full[lag:] - prev[:-lag]).sum(axis=1)
        start = a if keep is not None else a + lag
        out[start:b] = rise[-(b - start) :]
        keep = spec[-lag:]
    return np.arange(m) * hop / SR, out


def onsets(audio: np.ndarray, rel: float = 0.2, gap: float = 0.05) -> np.ndarray:
    """Times (s) of the clear attacks: local maxima of :func:`flux` at least ``gap`` s
    apart and above ``rel`` × the strongest, corrected by the detector's own latency
    (measured on a tone at a known time)."""
    t, f = flux(audio)
    k = int(gap * SR / 128)
    peak = sliding_window_view(np.pad(f, k), 2 * k + 1).max(axis=1)
    found = t[(f == peak) & (f > rel * f.max())]
    return found - _latency()


_LATENCY: list[float] = []


def _latency() -> float:
    """How late :func:`flux` peaks after an attack: a decaying 440 Hz tone at 0.5 s."""
    if not _LATENCY:
        n = int(0.3 * SR)
        t = np.arange(n) / SR
        x = np.zeros(SR)
        x[SR // 2 : SR // 2 + n] = np.sin(2 * np.pi * 440 * t) * np.exp(-t / 0.05)
        times, f = flux(x)
        _LATENCY.append(float(times[int(np.argmax(f))] - 0.5))
    return _LATENCY[0]


def grid_fit(times: np.ndarray, bpm: float, tol: float = 0.012) -> float:
    """The share of ``times`` within ``tol`` s of the half-beat grid of ``bpm``."""
    grid = 30.0 / bpm
    d = np.abs(times / grid - np.round(times / grid)) * grid
    return float(np.mean(d < tol))


def render_song(song: render.Song, parts=None) -> np.ndarray:
    r = render.Renderer(song, 4, parts=parts)
    for k in range(r.steps):
        r.step(k)
    return r.finish()
