"""The Sketch's instruments: every sound synthesised with numpy, none sampled or downloaded.

A voice is asked for by a key, a tuple whose first item names the method (``("piano",
(60, 64, 67), 48000)`` is a C major chord on the piano for one second) and gets back a mono
float32 waveform, or a stereo one of shape (n, 2) for the textures. Waveforms are cached
per key for the length of one render, so a chord played sixty times is computed once.

How they are made, cheaply: pitched voices read one-cycle wavetables (a harmonic spectrum per
instrument and pitch) through an integer phase index, crossfading a bright table into a dark
one as the note decays (piano, guitar, bass) or the other way (brass); ensembles (strings,
pads, choir) are detuned copies with vibrato; drums and textures are shaped noise (an FFT
filter) and pitch-swept sines; bells are inharmonic partials. Any randomness comes from a
generator seeded by the song's seed and the key, so a voice sounds the same whether it is
rendered with the whole song or alone (see render.py: parts).
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

SR = 48000
TABLE = 4096
MASK = TABLE - 1
_TWO_PI = 2 * np.pi


def midi_hz(m: float) -> float:
    return 440.0 * 2.0 ** ((m - 69) / 12)


def harmonic_table(amps) -> np.ndarray:
    """One cycle (TABLE samples) of the harmonics 1…K with amplitudes ``amps``, peak 1
    (an inverse FFT: sine phases)."""
    amps = np.asarray(amps, dtype=np.float64)[: TABLE // 2 - 1]
    spec = np.zeros(TABLE // 2 + 1, dtype=np.complex128)
    spec[1 : len(amps) + 1] = -0.5j * TABLE * amps
    table = np.fft.irfft(spec, TABLE)
    return (table / max(np.abs(table).max(), 1e-9)).astype(np.float32)


def _harmonics(f0: float, top: float = 16000.0, most: int = 60) -> np.ndarray:
    """Harmonic numbers 1…K of ``f0`` below ``top`` Hz (at least the fundamental)."""
    return np.arange(1, max(1, min(most, int(top / f0))) + 1, dtype=np.float64)


def _fade(n: int, attack: float, release: float) -> np.ndarray:
    """A linear attack and release over ``n`` samples (seconds each, shortened to fit)."""
    env = np.ones(n, dtype=np.float32)
    a = min(n // 2, int(attack * SR))
    r = min(n - a, int(release * SR))
    if a:
        env[:a] = np.linspace(0.0, 1.0, a, dtype=np.float32)
    if r:
        env[n - r :] *= np.linspace(1.0, 0.0, r, dtype=np.float32)
    return env


def _duck(w: np.ndarray, t: np.ndarray) -> np.ndarray:
    """A bass note that starts with the kick gives way to it (side-chain ducking): down to
    a quarter, back within about 250 ms. Clearer lows, and no beating of kick against bass
    that an ear (or an onset detector) would hear as a second attack."""
    k = min(len(w), int(0.3 * SR))
    w[:k] *= 1 - 0.75 * np.exp(t[:k] * np.float32(-1 / 0.08))
    return w


# vowel -> formants (Hz, gain); a neutral adult voice
FORMANTS = {
    "a": ((800, 1.0), (1200, 0.7), (2500, 0.3)),
    "e": ((450, 1.0), (1900, 0.8), (2550, 0.4)),
    "i": ((300, 1.0), (2300, 0.8), (3000, 0.4)),
    "o": ((500, 1.0), (900, 0.8), (2400, 0.2)),
    "u": ((350, 1.0), (800, 0.5), (2300, 0.1)),
}


def vowel_table(f0: float, vowel: str) -> np.ndarray:
    """One cycle of a tone at ``f0`` whose harmonics follow the vowel's formants."""
    h = np.arange(1, max(2, min(40, int(5000 / f0))) + 1)
    fh = h * f0
    amp = 0.05 / h  # the glottal source, falling off
    for freq, gain in FORMANTS.get(vowel, FORMANTS["a"]):
        bw = 80 + 0.06 * freq
        amp = amp + gain * np.exp(-0.5 * ((fh - freq) / bw) ** 2)
    amp[0] += 0.3  # the fundamental carries the pitch
    return harmonic_table(amp)


class Voices:
    """Waveforms per key, computed once per render. ``seed`` makes the noise."""

    def __init__(self, seed: int):
        self.seed = seed & 0xFFFFFFFF
        self.cache: dict[tuple, Any] = {}  # waveforms, and the rain's list of drops
        self._t = np.zeros(0, dtype=np.float32)
        self._idx = np.zeros(0, dtype=np.float64)

    # ------------------------------------------------------------ plumbing

    def get(self, key: tuple) -> np.ndarray:
        w = self.cache.get(key)
        if w is None:
            w = getattr(self, "_" + key[0])(*key[1:])
            w = self.cache[key] = np.ascontiguousarray(w, dtype=np.float32)
        return w

    def rng(self, *what) -> np.random.Generator:
        """A generator for one voice: the same numbers whatever else is rendered."""
        return np.random.default_rng([self.seed, zlib.crc32(repr(what).encode())])

    def t(self, n: int) -> np.ndarray:
        """Seconds 0, 1/SR, … for n samples (a shared float32 view)."""
        if len(self._t) < n:
            self._t = np.arange(max(n, 2 * len(self._t)), dtype=np.float32) / np.float32(SR)
        return self._t[:n]

    def _steps(self, n: int) -> np.ndarray:
        if len(self._idx) < n:
            self._idx = np.arange(max(n, 2 * len(self._idx)), dtype=np.float64)
        return self._idx[:n]

    def phase(self, f: float, n: int) -> np.ndarray:
        """Table indices of a steady tone at ``f`` Hz."""
        return (self._steps(n) * (f * TABLE / SR)).astype(np.int64) & MASK

    def warped(self, f: float, n: int, depth: float, rate: float, delay: float = 0.0):
        """Table indices of a tone at ``f`` Hz with vibrato (relative ``depth`` at ``rate``
        Hz, growing in over ``delay`` s)."""
        key = ("warp", depth, rate, delay)
        warp = self.cache.get(key)
        if warp is None or len(warp) < n:
            t = np.arange(max(n, SR * 2), dtype=np.float64) / SR
            swing = depth / (_TWO_PI * rate) * np.sin(_TWO_PI * rate * t)
            if delay:
                swing *= np.minimum(1.0, t / delay)
            warp = self.cache[key] = t + swing
        return (warp[:n] * (f * TABLE)).astype(np.int64) & MASK

    def table(self, name: str, midi: float, make) -> np.ndarray:
        key = ("table", name, midi)
        tab = self.cache.get(key)
        if tab is None:
            tab = self.cache[key] = make(midi_hz(midi))
        return tab

    def noise(self, n: int, lo: float, hi: float, *what, tilt: float = 0.0) -> np.ndarray:
        """Noise with its energy between ``lo`` and ``hi`` Hz (soft edges), unit RMS;
        ``tilt`` dB per octave above ``lo``. Made in the frequency domain: one FFT.
        The same arguments give the same (cached, read-only) noise."""
        n = max(n, 16)
        key = ("noise", n, lo, hi, tilt) + what
        x = self.cache.get(key)
        if x is not None:
            return x
        rng = self.rng("noise", n, lo, hi, tilt, *what)
        bins = n // 2 + 1
        f = np.fft.rfftfreq(n, 1 / SR)
        shape = 1.0 / (1.0 + (lo / np.maximum(f, 1.0)) ** 4) / (1.0 + (f / hi) ** 4)
        if tilt:
            shape *= (np.maximum(f, lo) / lo) ** (tilt / 6.02)
        spec = (rng.standard_normal(bins) + 1j * rng.standard_normal(bins)) * shape
        x = np.fft.irfft(spec, n).astype(np.float32)
        x /= max(float(np.sqrt(np.dot(x, x) / n)), 1e-12)
        x.flags.writeable = False
        self.cache[key] = x
        return x

    # ------------------------------------------------------------ keyboards

    def _piano(self, notes: tuple, n: int) -> np.ndarray:
        return self._sum(notes, lambda m: self.get(("piano_note", m, n)))

    def _piano_note(self, m: int, n: int) -> np.ndarray:
        f = midi_hz(m)

        def dark(f0):
            h = _harmonics(f0, 9000, 24)
            return harmonic_table(h**-2.2)

        def bright(f0):
            h = _harmonics(f0, 11000, 30)
            return harmonic_table(np.abs(np.sin(np.pi * h / 7.3)) * h**-0.55 + 0.15 * (h == 1))

        d, b = self.table("piano_d", m, dark), self.table("piano_b", m, bright)
        idx = self.phase(f, n)
        t = self.t(n)
        shine = np.exp(t * np.float32(-1.0 / (0.05 + 0.2 * min(1.0, 262 / f) ** 0.5)))
        w = d[idx] + shine * (b[idx] - d[idx])
        tau = min(7.0, max(0.5, 3.0 * (262 / f) ** 0.7))
        w *= np.float32(0.5) * np.exp(t * np.float32(-6.0 / tau)) + np.float32(0.5) * np.exp(
            t * np.float32(-1.0 / tau)
        )
        k = min(n, 480)
        w[:k] += 0.08 * self.noise(480, 300, 3500, "hammer")[:k] * np.exp(-t[:k] * 600)
        return w * _fade(n, 0.002, min(0.12, n / SR / 3))

    def _epiano(self, notes: tuple, n: int) -> np.ndarray:
        return self._sum(notes, lambda m: self.get(("epiano_note", m, n)))

    def _epiano_note(self, m: int, n: int) -> np.ndarray:
        f = midi_hz(m)
        d = self.table("ep_d", m, lambda f0: harmonic_table([1, 0.12, 0.03]))
        b = self.table(
            "ep_b",
            m,
            lambda f0: harmonic_table([1, 0.35, 0.1, 0, 0, 0, 0.3 if 7 * f0 < 12000 else 0]),
        )
        idx = self.phase(f, n)
        t = self.t(n)
        w = d[idx] + np.exp(t * np.float32(-25.0)) * (b[idx] - d[idx])
        tau = min(4.0, max(0.6, 1.8 * (262 / f) ** 0.4))
        w *= np.exp(t * np.float32(-1.0 / tau)) * (1 + 0.05 * np.sin(t * np.float32(_TWO_PI * 4.6)))
        return w * _fade(n, 0.003, min(0.1, n / SR / 3))

    def _organ(self, notes: tuple, n: int) -> np.ndarray:
        t = self.t(n)
        out = np.zeros(n, dtype=np.float32)
        for m in notes:
            tab = self.table(
                "organ",
                m,
                lambda f0: harmonic_table(
                    [1, 0.8, 0.45, 0.35, 0, 0.2, 0, 0.15][: max(1, int(12000 / f0))]
                ),
            )
            out += tab[self.warped(midi_hz(m), n, 0.002, 6.3)]
        out *= 0.96 + 0.04 * np.sin(t * np.float32(_TWO_PI * 6.3))
        return out / np.float32(math.sqrt(len(notes))) * _fade(n, 0.01, min(0.06, n / SR / 3))

    def _bells(self, notes: tuple, n: int) -> np.ndarray:
        return self._sum(notes, lambda m: self.get(("bell_note", m, n)))

    def _bell_note(self, m: int, n: int) -> np.ndarray:
        """A celesta-like bar: inharmonic partials, the high ones dying first."""
        f = midi_hz(m)
        t = self.t(n)
        w = np.zeros(n, dtype=np.float32)
        scale = min(1.5, (523 / f) ** 0.3)
        for ratio, amp, tau in (
            (1.0, 1.0, 1.1),
            (2.0, 0.25, 0.5),
            (2.76, 0.3, 0.35),
            (5.4, 0.12, 0.12),
            (8.93, 0.05, 0.06),
        ):
            if f * ratio < 16000:
                w += (
                    np.float32(amp)
                    * np.sin(t * np.float32(_TWO_PI * f * ratio))
                    * np.exp(t * np.float32(-1.0 / (tau * scale)))
                )
        return w * _fade(n, 0.001, min(0.08, n / SR / 3))

    # ------------------------------------------------------------ guitars

    def _guitar(self, notes: tuple, n: int, stroke: str = "down") -> np.ndarray:
        """Plucked strings; a chord is strummed (4 ms between strings, low to high on a
        down stroke, high to low and lighter on an up stroke)."""
        order = list(notes) if stroke != "up" else list(reversed(notes))[:4]
        gain = 1.0 if stroke != "up" else 0.6
        out = np.zeros(n, dtype=np.float32)
        lag = int(0.004 * SR)
        for i, m in enumerate(order):
            off = i * lag
            if off >= n:
                break
            out[off:] += self.get(("pluck", m, n - off))
        return out * np.float32(gain / math.sqrt(len(order)))

    def _pluck(self, m: int, n: int) -> np.ndarray:
        f = midi_hz(m)
        d = self.table("gt_d", m, lambda f0: harmonic_table(_harmonics(f0, 6000, 20) ** -2.4))
        b = self.table(
            "gt_b",
            m,
            lambda f0: harmonic_table(
                np.abs(np.sin(np.pi * _harmonics(f0, 12000, 40) * 0.17))
                * _harmonics(f0, 12000, 40) ** -0.8
            ),
        )
        idx = self.phase(f, n)
        t = self.t(n)
        w = d[idx] + np.exp(t * np.float32(-1.0 / 0.06)) * (b[idx] - d[idx])
        tau = min(2.5, max(0.35, 1.3 * (110 / f) ** 0.5))
        w *= np.exp(t * np.float32(-1.0 / tau))
        k = min(n, 240)
        w[:k] += 0.15 * self.noise(240, 800, 6000, "pick")[:k] * np.exp(-t[:k] * 900)
        return w * _fade(n, 0.001, min(0.05, n / SR / 3))

    def _eguitar(self, notes: tuple, n: int, muted: bool = False) -> np.ndarray:
        """An overdriven electric guitar: saw-like strings through a soft clipper and a
        speaker-cabinet filter (palm-muted: shorter and darker)."""
        t = self.t(n)
        x = np.zeros(n, dtype=np.float32)
        for m in notes:
            tab = self.table("saw", m, lambda f0: harmonic_table(1.0 / _harmonics(f0, 8000, 50)))
            x += tab[self.warped(midi_hz(m), n, 0.0015, 5.0, 0.3)]
        decay = 0.04 if muted else 0.8
        x *= np.float32(0.6) + np.float32(0.4) * np.exp(t * np.float32(-1.0 / decay))
        if muted:
            x *= np.exp(t * np.float32(-1.0 / 0.12))
        y = np.tanh(x * np.float32(3.0))
        spec = np.fft.rfft(y)
        f = np.fft.rfftfreq(n, 1 / SR)
        top = 1500.0 if muted else 3800.0
        spec *= 1.0 / (1.0 + (f / top) ** 4) / (1.0 + (90.0 / np.maximum(f, 1.0)) ** 2)
        y = np.fft.irfft(spec, n).astype(np.float32)
        return y * _fade(n, 0.003, min(0.03, n / SR / 3))

    # ------------------------------------------------------------ ensembles

    def _strings(self, notes: tuple, n: int, attack: float = 0.2) -> np.ndarray:
        """A string section: a bright bowed tone per note with a slow vibrato. (One copy
        per note: detuned copies beat against each other, and that beating reads as
        attacks that are not there.)"""

        def saw(f0):
            h = _harmonics(f0, 10000, 40)
            fh = h * f0
            body = (
                1.0
                / (1.0 + (fh / 6000.0) ** 2)
                * (
                    1
                    + 0.5 * np.exp(-(((fh - 700) / 400) ** 2))
                    + 0.8 * np.exp(-(((fh - 2800) / 900) ** 2))
                )
            )
            return harmonic_table(body / h)

        out = np.zeros(n, dtype=np.float32)
        for m in notes:
            tab = self.table("strings", m, saw)
            f = midi_hz(m)
            out += tab[self.warped(f, n, 0.0015, 5.4, 0.3)]
        env = _fade(n, min(attack, n / SR / 3), min(0.3, n / SR / 3))
        return out * env / np.float32(math.sqrt(len(notes)))

    def _pad(self, notes: tuple, n: int, bright: bool = False) -> np.ndarray:
        """A synth pad: a filtered saw per note, drifting slowly, slow in and out."""
        top = 5000.0 if bright else 1600.0

        def make(f0):
            h = _harmonics(f0, 12000, 40)
            return harmonic_table(1.0 / h / (1.0 + (h * f0 / top) ** 2))

        out = np.zeros(n, dtype=np.float32)
        for m in notes:
            tab = self.table(f"pad{int(top)}", m, make)
            f = midi_hz(m)
            out += tab[self.warped(f, n, 0.0015, 5.4, 0.3)]
        env = _fade(n, min(0.35, n / SR / 4), min(0.45, n / SR / 3))
        return out * env / np.float32(math.sqrt(len(notes)))

    def _brass(self, notes: tuple, n: int, stab: bool = False) -> np.ndarray:
        """Brass: the tone brightens as the note swells (a dark table into a bright one)."""
        t = self.t(n)
        grow = np.float32(-1.0 / (0.03 if stab else 0.12))
        shine = 1 - np.exp(t * grow)
        if stab:
            shine *= np.exp(t * np.float32(-1 / 0.25))
        out = np.zeros(n, dtype=np.float32)

        def bright(f0):
            h = _harmonics(f0, 10000, 40)
            return harmonic_table(h**-0.7 / (1 + (h * f0 / 5000) ** 2))

        for m in notes:
            d = self.table(
                "brass_d", m, lambda f0: harmonic_table(_harmonics(f0, 6000, 20) ** -2.5)
            )
            b = self.table("brass_b", m, bright)
            idx = self.warped(midi_hz(m), n, 0.0015, 5.4, 0.3)
            out += d[idx] + shine * (b[idx] - d[idx])
        env = _fade(n, 0.01 if stab else 0.05, min(0.1, n / SR / 3))
        if stab:
            env *= np.exp(t * np.float32(-1 / 0.35))
        return out * env / np.float32(math.sqrt(len(notes)))

    def _choir(self, notes: tuple, n: int, vowel: str = "a") -> np.ndarray:
        out = np.zeros(n, dtype=np.float32)
        for m in notes:
            tab = self.table(f"choir_{vowel}", m, lambda f0: vowel_table(f0, vowel))
            f = midi_hz(m)
            out += tab[self.warped(f, n, 0.0015, 5.4, 0.3)]
        env = _fade(n, min(0.3, n / SR / 3), min(0.35, n / SR / 3))
        return out * env / np.float32(math.sqrt(len(notes)))

    # ------------------------------------------------------------ leads

    def _synth(self, m: int, n: int) -> np.ndarray:
        """A synth lead: a saw, a little filtered, vibrato after the attack."""
        tab = self.table(
            "lead",
            m,
            lambda f0: harmonic_table(
                1.0 / _harmonics(f0, 12000, 50) / (1 + (_harmonics(f0, 12000, 50) * f0 / 4500) ** 2)
            ),
        )
        f = midi_hz(m)
        w = tab[self.warped(f, n, 0.006, 5.5, 0.25)]
        return w * _fade(n, 0.006, min(0.06, n / SR / 3))

    def _arp(self, m: int, n: int) -> np.ndarray:
        """A plucked synth: a bright saw closing to a dark one."""
        f = midi_hz(m)
        d = self.table("arp_d", m, lambda f0: harmonic_table(_harmonics(f0, 3000, 10) ** -2.0))
        b = self.table("arp_b", m, lambda f0: harmonic_table(1.0 / _harmonics(f0, 12000, 50)))
        idx = self.phase(f, n)
        t = self.t(n)
        w = d[idx] + np.exp(t * np.float32(-1 / 0.07)) * (b[idx] - d[idx])
        return w * np.exp(t * np.float32(-1 / 0.4)) * _fade(n, 0.002, min(0.04, n / SR / 3))

    def _flute(self, m: int, n: int) -> np.ndarray:
        tab = self.table("flute", m, lambda f0: harmonic_table([1, 0.3, 0.1, 0.04]))
        w = tab[self.warped(midi_hz(m), n, 0.005, 5.0, 0.2)]
        w = w + 0.08 * self.noise(n, 1200, 6000, "breath", m)
        return w * _fade(n, 0.05, min(0.06, n / SR / 3))

    def _leadguitar(self, m: int, n: int) -> np.ndarray:
        return self._eguitar((m,), n)

    def _voice(self, midi: int, n: int, vowel: str = "a") -> np.ndarray:
        """A sung-like tone: harmonics shaped by the vowel's formants, with vibrato, read
        from a one-cycle wavetable (the cost does not grow with the number of harmonics)."""
        n = max(n, 64)
        tab = self.table(f"vowel_{vowel}", midi, lambda f0: vowel_table(f0, vowel))
        w = tab[self.warped(midi_hz(midi), n, 0.006, 5.5)]
        return 1.6 * w * _fade(n, 0.015, min(0.05, n / SR / 3))

    # ------------------------------------------------------------ basses

    def _bass(self, midi: int, n: int, ducked: bool = False) -> np.ndarray:
        """A synth bass: a soft-clipped sine with two harmonics."""
        n = max(n, 64)
        t = self.t(n)
        ph = t * np.float32(_TWO_PI * midi_hz(midi))
        w = np.sin(ph) + 0.45 * np.sin(2 * ph) + 0.2 * np.sin(3 * ph)
        w = np.tanh(1.4 * w) / np.float32(np.tanh(1.4))
        w *= _fade(n, 0.004, 0.03) * (0.75 + 0.25 * np.exp(t * np.float32(-6)))
        return _duck(w, t) if ducked else w

    def _ebass(self, m: int, n: int, dark: bool = False, ducked: bool = False) -> np.ndarray:
        """A plucked bass (electric; ``dark``: an upright's rounder, shorter note)."""
        f = midi_hz(m)
        d = self.table("eb_d", m, lambda f0: harmonic_table(_harmonics(f0, 2500, 8) ** -2.5))
        b = self.table("eb_b", m, lambda f0: harmonic_table(_harmonics(f0, 5000, 24) ** -1.0))
        idx = self.phase(f, n)
        t = self.t(n)
        w = d[idx] + np.exp(t * np.float32(-1 / (0.03 if dark else 0.08))) * (b[idx] - d[idx])
        w *= np.exp(t * np.float32(-1 / (0.6 if dark else 1.6)))
        w *= _fade(n, 0.002, min(0.04, n / SR / 3))
        return _duck(w, t) if ducked else w

    def _808(self, m: int, n: int) -> np.ndarray:
        """The 808: a sine dropping into its pitch, long, saturated so it speaks on small
        speakers."""
        f = midi_hz(m)
        t = self.t(n).astype(np.float64)
        freq = f * (1 + 1.2 * np.exp(-t / 0.02))
        ph = np.cumsum(freq) * (_TWO_PI / SR)
        w = np.tanh(2.2 * np.sin(ph)) / np.tanh(2.2) * np.exp(-t / 1.1)
        return w.astype(np.float32) * _fade(n, 0.001, min(0.05, n / SR / 3))

    def _sub(self, m: int, n: int, ducked: bool = False) -> np.ndarray:
        t = self.t(n)
        ph = t * np.float32(_TWO_PI * midi_hz(m))
        w = (np.sin(ph) + 0.15 * np.sin(2 * ph)) * _fade(n, 0.03, min(0.2, n / SR / 3))
        return _duck(w, t) if ducked else w

    def _lowstrings(self, m: int, n: int, attack: float = 0.08) -> np.ndarray:
        return self._strings((m, m + 12), n, attack)

    # ------------------------------------------------------------ drums

    def _drum(self, kit: str, name: str, *args) -> np.ndarray:
        return getattr(self, "_d_" + name)(kit, *args)

    def _d_kick(self, kit: str, midi: int = 0) -> np.ndarray:
        """A kick: a sine sweeping down onto its pitch (``midi``: tuned to the song's key)."""
        top, low, length, click = {
            "electronic": (160, 48, 0.45, 0.45),
            "synthwave": (150, 50, 0.4, 0.35),
            "trap": (190, 55, 0.28, 0.5),
            "lofi": (110, 50, 0.3, 0.1),
            "jazz": (100, 55, 0.25, 0.1),
            "soft": (110, 52, 0.3, 0.1),
        }.get(kit, (130, 48, 0.35, 0.3))
        bottom = midi_hz(midi) if midi else float(low)
        n = int(length * SR)
        t = self.t(n).astype(np.float64)
        freq = bottom + (top - bottom) * np.exp(-t * 28)
        w = np.sin(np.cumsum(freq) * (_TWO_PI / SR)) * np.exp(-t / (length / 5.5))
        k = min(n, 200)
        w[:k] += click * self.noise(k, 1000, 8000, "kick", kit) * np.exp(-t[:k] * 800) * 0.3
        return w * _fade(n, 0.0005, 0.02)

    def _d_snare(self, kit: str, _=0) -> np.ndarray:
        gated = kit == "synthwave"
        length = 0.32 if gated else (0.25 if kit == "jazz" else 0.2)
        n = int(length * SR)
        t = self.t(n)
        lo, hi = {"lofi": (600, 5000), "jazz": (1500, 9000), "soft": (700, 6000)}.get(
            kit, (900, 9000)
        )
        noise = self.noise(n, lo, hi, "snare", kit)
        decay = np.exp(t * np.float32(-1 / (0.2 if gated else 0.06)))
        body = np.sin(t * np.float32(_TWO_PI * 185)) * np.exp(t * np.float32(-1 / 0.05))
        if kit == "jazz":  # a brush: swept in, no crack
            return (0.5 * noise * decay * _fade(n, 0.012, 0.05)).astype(np.float32)
        w = 0.55 * noise * decay + 0.6 * body
        return w * _fade(n, 0.0005, 0.03 if gated else 0.05)

    def _d_clap(self, kit: str, _=0) -> np.ndarray:
        """Three hands a few ms apart, each a sharp burst, then the room's tail."""
        n = int(0.25 * SR)
        t = self.t(n)
        noise = self.noise(n, 700, 6000, "clap", kit)
        env = np.exp(t * np.float32(-1 / 0.07)) * np.float32(0.6)
        for k in range(3):
            s = int(k * 0.006 * SR)
            env[s:] += np.exp(t[: n - s] * np.float32(-1 / 0.004))
        return noise * env * _fade(n, 0.0005, 0.05) * np.float32(0.7)

    def _d_rim(self, kit: str, _=0) -> np.ndarray:
        n = int(0.05 * SR)
        t = self.t(n)
        w = np.sin(t * np.float32(_TWO_PI * 1700)) + 0.5 * self.noise(n, 2000, 8000, "rim", kit)
        return w * np.exp(t * np.float32(-1 / 0.01)) * np.float32(0.6)

    def _d_hat(self, kit: str, _=0) -> np.ndarray:
        length = 0.03 if kit == "trap" else 0.06
        n = int(length * SR)
        t = self.t(n)
        lo, hi = (3500, 9000) if kit == "lofi" else (4500, 16000)
        return (
            self.noise(n, lo, hi, "hat", kit)
            * np.exp(t * np.float32(-1 / (length / 4)))
            * np.float32(0.5)
        )

    def _d_openhat(self, kit: str, _=0) -> np.ndarray:
        n = int(0.35 * SR)
        t = self.t(n)
        return (
            self.noise(n, 5000, 16000, "openhat", kit)
            * np.exp(t * np.float32(-1 / 0.1))
            * _fade(n, 0.001, 0.05)
            * np.float32(0.4)
        )

    def _d_crash(self, kit: str, _=0) -> np.ndarray:
        n = int(2.0 * SR)
        t = self.t(n)
        return (
            self.noise(n, 3000, 16000, "crash", kit, tilt=-1.5)
            * np.exp(t * np.float32(-1 / 0.55))
            * _fade(n, 0.001, 0.3)
            * np.float32(0.45)
        )

    def _d_ride(self, kit: str, _=0) -> np.ndarray:
        n = int(0.9 * SR)
        t = self.t(n)
        w = 0.4 * self.noise(n, 5000, 14000, "ride", kit)
        for f in (3120.0, 4230.0, 5380.0, 7160.0):
            w += 0.15 * np.sign(np.sin(t * np.float32(_TWO_PI * f)))
        spec = np.fft.rfft(w)
        spec *= 1 / (1 + (2500 / np.maximum(np.fft.rfftfreq(n, 1 / SR), 1)) ** 2)
        w = np.fft.irfft(spec, n).astype(np.float32)
        return w * np.exp(t * np.float32(-1 / 0.3)) * _fade(n, 0.001, 0.1) * np.float32(0.5)

    def _d_tom(self, kit: str, midi: int = 45) -> np.ndarray:
        n = int(0.4 * SR)
        t = self.t(n).astype(np.float64)
        f = midi_hz(midi)
        freq = f * (1 + 0.4 * np.exp(-t / 0.03))
        w = np.sin(np.cumsum(freq) * (_TWO_PI / SR)) * np.exp(-t / 0.15)
        w[:480] += 0.2 * self.noise(480, 500, 5000, "tom", kit, midi) * np.exp(-t[:480] * 300)
        return w * _fade(n, 0.0005, 0.05)

    def _d_taiko(self, kit: str, high: int = 0, midi: int = 0) -> np.ndarray:
        """A big drum: a deep pitch-dropping boom with a skin slap (tuned by ``midi``)."""
        n = int((0.5 if high else 1.0) * SR)
        t = self.t(n).astype(np.float64)
        f = midi_hz(midi) if midi else (95.0 if high else 58.0)
        freq = f * (1 + 0.6 * np.exp(-t / 0.04))
        w = np.sin(np.cumsum(freq) * (_TWO_PI / SR)) * np.exp(-t / (0.12 if high else 0.3))
        slap = self.noise(n, 150, 2500, "taiko", high) * np.exp(-t / 0.03)
        return (w + 0.35 * slap) * _fade(n, 0.0008, 0.1)

    def _d_timpani(self, kit: str, midi: int = 41) -> np.ndarray:
        n = int(1.6 * SR)
        t = self.t(n)
        f = midi_hz(midi)
        w = np.zeros(n, dtype=np.float32)
        for ratio, amp, tau in ((1.0, 1.0, 0.9), (1.5, 0.5, 0.5), (1.98, 0.3, 0.35)):
            w += (
                np.float32(amp)
                * np.sin(t * np.float32(_TWO_PI * f * ratio))
                * np.exp(t * np.float32(-1 / tau))
            )
        w[:960] += 0.25 * self.noise(960, 100, 3000, "timp", midi) * np.exp(-t[:960] * 150)
        return w * _fade(n, 0.001, 0.2)

    def _d_shaker(self, kit: str, _=0) -> np.ndarray:
        n = int(0.08 * SR)
        return self.noise(n, 4000, 12000, "shaker", kit) * _fade(n, 0.015, 0.06) * np.float32(0.35)

    # ------------------------------------------------------------ effects and textures

    def _hit(self, notes: tuple, n: int) -> np.ndarray:
        """An orchestral hit: strings and brass on one short chord over a low boom on the
        chord's root."""
        t = self.t(n)
        w = self._brass(notes, n, stab=True) + 0.8 * self._strings(notes, n, 0.005) * np.exp(
            t * np.float32(-1 / 0.3)
        )
        root = midi_hz(28 + (notes[0] - 28) % 12)
        boom = np.sin(t * np.float32(_TWO_PI * root)) * np.exp(t * np.float32(-1 / 0.5))
        return (
            w
            + 0.7 * boom
            + 0.2 * self.noise(n, 200, 6000, "hit") * np.exp(t * np.float32(-1 / 0.05))
        )

    def _swell(self, n: int) -> np.ndarray:
        """A reversed cymbal: noise rising into the next downbeat."""
        t = self.t(n)
        rise = np.exp((t - t[-1]) * np.float32(1 / max(0.2, n / SR / 4)))
        return self.noise(n, 2500, 14000, "swell", tilt=-1.0) * rise * np.float32(0.4)

    def _boom(self, n: int, midi: int = 24) -> np.ndarray:
        """A trailer's boom: a very low sine falling onto its pitch."""
        t = self.t(n).astype(np.float64)
        freq = midi_hz(midi) + 60 * np.exp(-t / 0.15)
        w = np.sin(np.cumsum(freq) * (_TWO_PI / SR)) * np.exp(-t / 0.9)
        return w * _fade(n, 0.001, 0.3)

    def _texture(self, name: str, n: int, variant: int, xfade: int) -> np.ndarray:
        """A stretch of a continuous texture, stereo, its first and last ``xfade`` samples
        faded on equal-power curves so back-to-back stretches join without a seam."""
        out = np.stack([getattr(self, "_tx_" + name)(n, variant, ch) for ch in (0, 1)], axis=1)
        if xfade:
            u = np.linspace(0, np.pi / 2, xfade, dtype=np.float32)
            out[:xfade] *= np.sin(u)[:, None]
            out[-xfade:] *= np.cos(u)[:, None]
        return out

    def _tx_rain(self, n: int, variant: int, ch: int) -> np.ndarray:
        """Rain: a bright hiss and, on it, drops (short falling chirps) at random times."""
        x = self.noise(n, 600, 9000, "rain", variant, ch, tilt=-2.0) * np.float32(0.35)
        rng = self.rng("drops", n, variant, ch)
        drops = self._drops()
        k = int(60 * n / SR)  # drops per second
        for pos, amp, which in zip(
            rng.integers(0, max(1, n - 512), k),
            rng.exponential(0.5, k),
            rng.integers(0, len(drops), k),
        ):
            d = drops[which]
            x[pos : pos + len(d)] += np.float32(amp) * d
        return x

    def _drops(self) -> list[np.ndarray]:
        out = self.cache.get(("drops",))
        if out is None:
            t = self.t(480).astype(np.float64)
            out = []
            for f in (2200.0, 2900.0, 3600.0, 4500.0, 5500.0):
                ph = _TWO_PI * np.cumsum(f * (1 - 0.35 * t / t[-1])) / SR
                out.append((np.sin(ph) * np.exp(-t / 0.0025)).astype(np.float32))
            self.cache[("drops",)] = out
        return out

    def _tx_vinyl(self, n: int, variant: int, ch: int) -> np.ndarray:
        """A record's surface: crackle (clicks, the same on both sides), hiss and hum."""
        x = self.noise(n, 3000, 12000, "hiss", variant, ch) * np.float32(0.05)
        x += np.sin(self.t(n) * np.float32(_TWO_PI * 50)) * np.float32(0.015)
        rng = self.rng("vinyl", n, variant)
        click = self._click()
        k = int(12 * n / SR)
        for pos, amp in zip(
            rng.integers(0, max(1, n - len(click)), k),
            rng.choice([-1, 1], k) * rng.exponential(0.5, k) ** 2,
        ):
            x[pos : pos + len(click)] += np.float32(amp) * click
        return x

    def _click(self) -> np.ndarray:
        c = self.cache.get(("click",))
        if c is None:
            t = self.t(96)
            c = self.cache[("click",)] = (
                np.sin(t * np.float32(_TWO_PI * 3100)) * np.exp(t * np.float32(-1 / 0.0004))
            ).astype(np.float32)
        return c

    def _tx_wind(self, n: int, variant: int, ch: int) -> np.ndarray:
        t = self.t(n)
        out = np.zeros(n, dtype=np.float32)
        for i, (lo, hi, rate) in enumerate(
            ((200, 900, 0.11), (500, 2000, 0.17), (1200, 4000, 0.07))
        ):
            gust = 0.5 + 0.5 * np.sin(t * np.float32(_TWO_PI * rate) + (variant * 1.7 + i + ch))
            out += self.noise(n, lo, hi, "wind", variant, ch, i) * gust
        return out * np.float32(0.35)

    def _tx_waves(self, n: int, variant: int, ch: int) -> np.ndarray:
        t = self.t(n)
        swell = np.sin(t * np.float32(np.pi / 7.0) + variant + 0.3 * ch) ** 2
        return self.noise(n, 80, 2500, "waves", variant, ch, tilt=-3) * swell * np.float32(0.6)

    # ------------------------------------------------------------ helpers

    def _sum(self, notes: tuple, one) -> np.ndarray:
        out = one(notes[0]).copy()
        for m in notes[1:]:
            out = out + one(m)
        return out / np.float32(math.sqrt(len(notes)))
