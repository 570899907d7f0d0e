"""Render a song: its arrangement (arrange.py) synthesised with numpy (instruments.py).

The plan is made first (cheap, pure Python); the audio is then rendered in N steps, each
step the events starting in one N-th of the song, so ``[DiT] Step k/N`` tracks real work and
a cancel stops mid-render. Waveforms are cached per key (instrument, notes, length), so a
60-s song costs a few hundred syntheses and a few thousand array additions.

Parts (stems). Every event belongs to one part, named as ace-server names the tracks of its
``extract`` task: vocals, backing_vocals, drums, bass, guitar, keyboard, percussion, strings,
synth, fx, brass, woodwinds (see :data:`PARTS`; :attr:`arrange.Plan.parts` lists a song's).
``Renderer(song, steps, parts={"drums"})`` renders only those parts' events, from the same
plan and with the same voices (the noise of a voice is seeded by the song and the voice's
key, not by what was rendered before), so a part can be re-rendered alone from the same
request and seed. Everything after the notes is linear and shared: the reverb is one bus fed
by each event's send (a part rendered alone gets its own reverb), then the DC offset is
taken out and the fades applied. So the mix is the sum of its parts
(:func:`render_parts`, equal up to float rounding), and the mastered mix is
``master_gain(mix) × Σ parts``: a stem in the mix's scale is its part times that gain.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from ..song.request import TRACKS
from . import arrange
from .arrange import Event, Plan  # noqa: F401 - part of this module's API
from .instruments import SR, Voices, midi_hz  # noqa: F401

LATENT_FPS = 25
LATENT_DIM = 64
HEADROOM = 10 ** (-1 / 20)  # -1 dBFS
PARTS = TRACKS
"""The parts a song is rendered in: the tracks ace-server's ``extract`` task names."""
DECIMATE = 4  # the reverb runs at SR / 4 (its tail is dark anyway)

# voice -> (level, pan -1 left … +1 right, right-channel delay in ms (width), reverb send,
# ping-pong echo)
MIX: dict[str, tuple[float, float, float, float, bool]] = {
    "kick": (0.9, 0.0, 0, 0.0, False),
    "snare": (0.8, 0.05, 0, 0.12, False),
    "clap": (0.75, 0.0, 0, 0.15, False),
    "rim": (0.35, 0.1, 0, 0.1, False),
    "hat": (0.3, 0.25, 0, 0.0, False),
    "openhat": (0.3, 0.25, 0, 0.05, False),
    "ride": (0.3, 0.3, 0, 0.05, False),
    "crash": (0.4, -0.2, 0, 0.1, False),
    "tom": (0.55, -0.15, 0, 0.1, False),
    "taiko": (0.52, 0.0, 0, 0.25, False),
    "timpani": (0.6, 0.0, 0, 0.3, False),
    "shaker": (0.3, 0.3, 0, 0.05, False),
    "bass": (0.42, 0.0, 0, 0.0, False),
    "ebass": (0.36, 0.0, 0, 0.0, False),
    "808": (0.5, 0.0, 0, 0.0, False),
    "sub": (0.16, 0.0, 0, 0.0, False),
    "lowstrings": (0.2, 0.0, 6, 0.25, False),
    "piano": (0.42, -0.1, 0, 0.22, False),
    "epiano": (0.36, 0.1, 0, 0.2, False),
    "organ": (0.16, 0.15, 8, 0.15, False),
    "bells": (0.3, 0.3, 0, 0.35, False),
    "guitar": (0.36, -0.35, 0, 0.15, False),
    "pluck": (0.34, -0.3, 0, 0.18, False),
    "eguitar": (0.32, -0.4, 10, 0.1, False),
    "leadguitar": (0.3, 0.2, 0, 0.2, True),
    "strings": (0.22, 0.0, 11, 0.4, False),
    "pad": (0.14, 0.0, 11, 0.3, False),
    "brass": (0.26, 0.2, 0, 0.3, False),
    "choir": (0.2, 0.0, 11, 0.45, False),
    "synth": (0.3, 0.1, 0, 0.2, True),
    "arp": (0.2, -0.25, 0, 0.2, False),
    "flute": (0.32, 0.2, 0, 0.3, False),
    "voice": (0.36, 0.08, 0, 0.2, True),
    "hit": (0.45, 0.0, 11, 0.5, False),
    "swell": (0.3, 0.0, 11, 0.2, False),
    "boom": (0.45, 0.0, 0, 0.3, False),
    "texture": (0.14, 0.0, 0, 0.0, False),
}
# how long the room rings (RT60, s) per genre
ROOM = {
    "ambient": 3.2,
    "trailer": 2.8,
    "orchestral": 2.6,
    "ballad": 2.0,
    "waltz": 2.0,
    "synthwave": 2.2,
    "pop": 1.5,
    "edm": 1.6,
    "folk": 1.4,
    "soul": 1.4,
    "jazz": 1.3,
    "reggae": 1.2,
    "rock": 1.2,
    "lofi": 1.0,
    "hiphop": 1.0,
    "trap": 1.1,
}


@dataclass
class Song:
    """Everything that decides the audio. Built from a request by
    ``engine.song_from_request``; ``caption`` chooses the style (style.py).

    ``seed`` is the render's (the voices' noise, the room); the arrangement (style, form,
    chords, patterns, melody) follows ``plan_seed`` when given (audio codes carry it, so a
    new render of the same codes keeps the arrangement), else ``seed``. Edits give the form
    (``sections``: form.Section tuples) and the chords per bar (``degrees``, None where
    free) of their source, and leave out the fades where the audio goes on."""

    bpm: float
    beats_per_bar: int
    tonic: int
    minor: bool
    duration: float
    seed: int
    lyrics: str = ""
    melody_seed: int | None = None
    caption: str = ""
    plan_seed: int | None = None
    sections: tuple | None = None
    degrees: tuple | None = None
    fade_in: bool = True
    fade_out: bool = True

    @property
    def arrangement_seed(self) -> int:
        return self.seed if self.plan_seed is None else self.plan_seed

    @property
    def beat_seconds(self) -> float:
        return 60.0 / self.bpm

    @property
    def bar_seconds(self) -> float:
        return self.beat_seconds * self.beats_per_bar

    def to_json(self) -> dict:
        """The song as JSON values (a recipe's; :meth:`from_json` gives it back exactly)."""
        out = {k: getattr(self, k) for k in SONG_FIELDS}
        if self.sections is not None:
            out["sections"] = [
                [s.kind, s.start, s.bars, s.number, s.energy, s.last] for s in self.sections
            ]
        if self.degrees is not None:
            out["degrees"] = list(self.degrees)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Song":
        from .form import Section

        kw = {k: data[k] for k in SONG_FIELDS if k in data}
        if data.get("sections") is not None:
            kw["sections"] = tuple(
                Section(str(k), int(a), int(n), int(num), float(e), bool(last))
                for k, a, n, num, e, last in data["sections"]
            )
        if data.get("degrees") is not None:
            kw["degrees"] = tuple(None if d is None else int(d) for d in data["degrees"])
        return cls(**kw)


SONG_FIELDS = (
    "bpm",
    "beats_per_bar",
    "tonic",
    "minor",
    "duration",
    "seed",
    "lyrics",
    "melody_seed",
    "caption",
    "plan_seed",
    "fade_in",
    "fade_out",
)


def plan(song: Song) -> Plan:
    """The arrangement: sections, chords and every note event (see arrange.py)."""
    return arrange.plan(song)


def _gains(pan: float) -> tuple[float, float]:
    return min(1.0, 1.0 - pan), min(1.0, 1.0 + pan)


class Renderer:
    """Renders one song (or only some of its ``parts``) in ``steps`` steps into one stereo
    buffer of the song's length and a reverb send at a quarter of the rate; :meth:`finish`
    adds the reverb and returns the buffer with fades applied."""

    def __init__(self, song: Song, steps: int, parts=None):
        self.song = song
        self.plan = plan(song)
        self.total = self.plan.total
        wanted = None if parts is None else set(parts)
        unknown = (wanted or set()) - set(PARTS)
        if unknown:
            raise ValueError(
                f"unknown part(s): {', '.join(sorted(unknown))} (parts: {', '.join(PARTS)})"
            )
        self.events = [e for e in self.plan.events if wanted is None or e.part in wanted]
        self.steps = max(1, steps)
        self.voices = Voices(zlib.crc32(f"voices{song.seed}".encode()))
        self.buf = np.zeros((self.total, 2), dtype=np.float32)
        self.send = np.zeros(self.total // DECIMATE + 1, dtype=np.float32)
        self._sent = False
        bounds = [self.total * k // self.steps for k in range(self.steps + 1)]
        starts = np.array([e.start for e in self.events], dtype=np.int64)
        self._cuts = [0] + np.searchsorted(starts, bounds[1:-1]).tolist() + [len(self.events)]
        self._echo = int(0.75 * song.beat_seconds * SR)  # a dotted eighth, ping-pong

    def _write(self, ch: int, start: int, w: np.ndarray, gain: float) -> None:
        end = min(self.total, start + len(w))
        if end > start:
            self.buf[start:end, ch] += np.float32(gain) * w[: end - start]

    def _decimated(self, key: tuple, w: np.ndarray) -> np.ndarray:
        dkey = ("decimated",) + key
        d = self.voices.cache.get(dkey)
        if d is None:
            mono = (w[:, 0] + w[:, 1]) * np.float32(0.5) if w.ndim == 2 else w
            m = len(mono) // DECIMATE
            d = mono[0 : m * DECIMATE : DECIMATE].copy()
            for k in range(1, DECIMATE):
                d += mono[k : m * DECIMATE : DECIMATE]
            d *= np.float32(1 / DECIMATE)
            self.voices.cache[dkey] = d
        return d

    def step(self, k: int) -> None:
        """Render the events that start in the k-th of ``steps`` parts (0-based)."""
        for e in self.events[self._cuts[k] : self._cuts[k + 1]]:
            w = self.voices.get(e.key)
            level, pan, width, send, echo = MIX[e.voice]
            g = level * e.gain
            gl, gr = _gains(pan)
            if w.ndim == 2:
                self._write(0, e.start, w[:, 0], g * gl)
                self._write(1, e.start, w[:, 1], g * gr)
            else:
                self._write(0, e.start, w, g * gl)
                self._write(1, e.start + int(width * SR / 1000), w, g * gr)
                if echo:
                    self._write(1, e.start + self._echo, w, g * 0.28)
                    self._write(0, e.start + 2 * self._echo, w, g * 0.12)
            if send:
                d = self._decimated(e.key, w)
                i = e.start // DECIMATE
                j = min(len(self.send), i + len(d))
                if j > i:
                    self.send[i:j] += np.float32(g * send) * d[: j - i]
                    self._sent = True

    def _reverb(self) -> None:
        """The reverb bus: the send convolved with a stereo decaying-noise room (FFT overlap-
        add at a quarter rate), brought back to full rate and added to the buffer."""
        fs = SR // DECIMATE
        rt60 = ROOM.get(self.plan.style.genre, 1.6)
        n_ir = int(min(3.0, rt60) * fs)
        rng = np.random.default_rng(zlib.crc32(f"room{self.song.seed}".encode()))
        t = np.arange(n_ir) / fs
        ir = rng.standard_normal((2, n_ir)) * np.exp(-6.9 * t / rt60)
        ir[:, : int(0.012 * fs)] = 0.0  # pre-delay
        spec = np.fft.rfft(ir, axis=1)
        f = np.fft.rfftfreq(n_ir, 1 / fs)
        spec *= 1 / (1 + (f / 4000.0) ** 2)  # a darker tail
        ir = np.fft.irfft(spec, n_ir, axis=1)
        ir /= np.sqrt((ir**2).sum(axis=1, keepdims=True))
        nfft = 1 << 17
        block = nfft - n_ir + 1  # overlap-add, no bin wasted
        irs = np.fft.rfft(ir.astype(np.float32), nfft, axis=1)
        m = len(self.send)
        wet = np.zeros((m + n_ir, 2), dtype=np.float32)
        for a in range(0, m, block):
            x = np.fft.rfft(self.send[a : a + block], nfft)
            y = np.fft.irfft(irs * x[None, :], nfft, axis=1)
            b = min(len(wet), a + nfft)
            wet[a:b] += y[:, : b - a].T
        wet = wet[:m]
        # back to full rate: straight lines between the quarter-rate samples
        frac = np.arange(DECIMATE, dtype=np.float32) / DECIMATE
        for a in range(0, m - 1, block):
            b = min(m - 1, a + block)
            y0, y1 = wet[a:b], wet[a + 1 : b + 1]
            up = y0[:, None, :] + (y1 - y0)[:, None, :] * frac[None, :, None]
            lo, hi = a * DECIMATE, min(self.total, b * DECIMATE)
            self.buf[lo:hi] += up.reshape(-1, 2)[: hi - lo]

    def finish(self) -> np.ndarray:
        """The stereo mix, shape (samples, 2), float32, with fades; not yet normalised.
        A view of the render buffer (no copy). Each channel's DC offset (the kick's click
        and its first half-cycle only push one way) is taken out before the fades."""
        if self._sent:
            self._reverb()
        self.send = np.zeros(0, dtype=np.float32)  # the reverb's send is spent: let it go
        n = self.total
        out = self.buf[:n]
        if n:
            out -= np.array([out[:, c].sum(dtype=np.float64) / n for c in (0, 1)], dtype=np.float32)
        fade_in = min(n, int(0.01 * SR)) if self.song.fade_in else 0
        fade_out = min(n, int(min(2.0, self.song.duration * 0.1) * SR)) if self.song.fade_out else 0
        if fade_in:
            out[:fade_in] *= np.linspace(0, 1, fade_in, dtype=np.float32)[:, None]
        if fade_out:
            out[n - fade_out :] *= np.linspace(1, 0, fade_out, dtype=np.float32)[:, None]
        return out


def render_parts(song: Song, parts=None, steps: int = 1) -> dict[str, np.ndarray]:
    """Each part of the song rendered alone (``parts``: those, default every part the song
    has), as :meth:`Renderer.finish` gives it: not normalised. Their sum is the mix."""
    names = list(parts) if parts is not None else plan(song).parts
    out = {}
    for name in names:
        r = Renderer(song, steps, parts={name})
        for k in range(r.steps):
            r.step(k)
        out[name] = r.finish()
    return out


def master_gain(audio: np.ndarray, normalise: bool = True) -> float:
    """The gain :func:`master` applies to ``audio`` (and so to each of its parts)."""
    top = peak(audio)
    if top > 0 and (normalise or top > HEADROOM):
        return HEADROOM / top
    return 1.0


def peak(audio: np.ndarray) -> float:
    return float(max(audio.max(), -audio.min())) if audio.size else 0.0


def master(audio: np.ndarray, normalise: bool) -> np.ndarray:
    """Peak-normalise to -1 dBFS, or (``normalise=False``, wav32) only bring a peak above
    -1 dBFS down, so the float output stays within ±1 either way. Scales in place."""
    gain = master_gain(audio, normalise)
    if gain != 1.0:
        audio *= np.float32(gain)
    return audio


def latent(audio: np.ndarray, chunk_frames: int = 500) -> np.ndarray:
    """float32 [T, 64] at 25 frames/s: log energy in 64 log-spaced bands per frame
    (computed a few hundred frames at a time, so memory stays small for long songs)."""
    hop = SR // LATENT_FPS
    frames = max(1, -(-len(audio) // hop))  # every sample in a frame
    edges = np.unique(np.geomspace(1, hop // 2, LATENT_DIM + 1).astype(int))[:-1]
    out = np.zeros((frames, LATENT_DIM), dtype=np.float32)
    for f0 in range(0, frames, chunk_frames):
        f1 = min(frames, f0 + chunk_frames)
        block = np.zeros((f1 - f0) * hop, dtype=np.float32)
        part = audio[f0 * hop : f1 * hop]
        block[: len(part)] = (part[:, 0] + part[:, 1]) * np.float32(0.5) if part.ndim == 2 else part
        spec = np.abs(np.fft.rfft(block.reshape(f1 - f0, hop), axis=1)) ** 2
        bands = np.add.reduceat(spec, edges, axis=1)[:, :LATENT_DIM]
        out[f0:f1, : bands.shape[1]] = np.log1p(bands)
    return out
