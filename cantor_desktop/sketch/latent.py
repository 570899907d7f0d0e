"""The Sketch's latent: float32 ``[T, 64]`` at 25 frames a second, like ace-server's.

A real VAE latent can be decoded back to its audio. The Sketch has no VAE, so its latent
says how to make the audio again instead:

- **The header** (frames ``0 … H-1``) carries the *recipe*: the render parameters of what
  was made (a song's resolved request fields and seed, an edit's task, region, seed and its
  source's own recipe, or for outside audio its fingerprint and what was measured in it),
  as zlib-compressed JSON. Frame 0 starts with ``MAGIC`` (two exact float values), the
  format version, the payload's length in bytes (low 16 bits, high bits), its CRC-32 (low,
  high) and ``H``; the payload follows from channel 8 on, two bytes per float, each float
  an integer 0…65535 (exact in float32). Unused channels of frame ``H-1`` are 0.
- **Every frame from H on** is a coarse spectral envelope of the audio at that time:
  ``log1p`` of the energy in 64 bands of a 1920-sample frame (bins 1…20 one band each,
  25–525 Hz, then 44 log-spaced bands up to 24 kHz). Frames under the header hold the
  header instead.

A latent without a valid header (the features of outside audio, a real engine's latent, a
header that does not fit) is the envelope alone. :func:`stand_in` turns an envelope into
noise shaped like it: what the Sketch plays for a latent it cannot make again.
"""

from __future__ import annotations

import json
import zlib

import numpy as np

FPS = 25
DIM = 64
HOP = 1920  # samples per frame at 48 kHz
FRAME_BYTES = DIM * 4
MAX_FRAMES = 15000  # 10 minutes, as ace-server
MAGIC = (19282.0, 25931.0)
VERSION = 1
HEAD = 8  # header fields in frame 0; the payload starts after them

_LOW_BANDS = 20
_EDGES = np.concatenate(
    [
        np.arange(1, _LOW_BANDS + 1),
        np.round(np.geomspace(_LOW_BANDS + 1, HOP // 2 + 1, DIM - _LOW_BANDS + 1)).astype(int),
    ]
)


class LatentError(ValueError):
    """A latent payload ace-server would refuse: ``status`` 400 or 413."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def frames_of(nbytes: int, name: str = "src_latents") -> int:
    """The frame count of a latent payload of ``nbytes``, checked as ace-server checks it."""
    if nbytes == 0 or nbytes % FRAME_BYTES:
        raise LatentError(f"{name} size not a multiple of 64*4 bytes")
    frames = nbytes // FRAME_BYTES
    if frames > MAX_FRAMES:
        raise LatentError(f"{name} exceeds max frames", 413)
    return frames


def frames_for(samples: int) -> int:
    return max(1, -(-samples // HOP))


def features(audio: np.ndarray, chunk: int = 500) -> np.ndarray:
    """The spectral envelope of stereo (or mono) 48 kHz audio: float32 ``[T, 64]``."""
    n = len(audio)
    frames = frames_for(n)
    out = np.zeros((frames, DIM), dtype=np.float32)
    for f0 in range(0, frames, chunk):
        f1 = min(frames, f0 + chunk)
        block = np.zeros((f1 - f0) * HOP, dtype=np.float32)
        part = audio[f0 * HOP : f1 * HOP]
        if part.ndim == 2:
            block[: len(part)] = part.mean(axis=1)
        else:
            block[: len(part)] = part
        spec = np.abs(np.fft.rfft(block.reshape(f1 - f0, HOP), axis=1)) ** 2
        bands = np.add.reduceat(spec, _EDGES[:-1], axis=1)
        out[f0:f1] = np.log1p(bands[:, :DIM])
    return out


def write(recipe: dict | None, envelope: np.ndarray) -> np.ndarray:
    """The latent: ``envelope`` (from :func:`features`) with ``recipe`` in its header. A
    recipe that would take more than half the frames is left out (the envelope alone)."""
    out = np.array(envelope, dtype=np.float32, copy=True)
    if recipe is None:
        return out
    payload = zlib.compress(json.dumps(recipe, separators=(",", ":")).encode("utf-8"), 9)
    n_bytes = len(payload)
    values = np.frombuffer(payload + b"\0" * (n_bytes % 2), dtype="<u2").astype(np.float32)
    frames = -(-(HEAD + len(values)) // DIM)
    if frames > max(1, len(out) // 2):
        return out
    crc = zlib.crc32(payload)
    flat = np.zeros(frames * DIM, dtype=np.float32)
    flat[:HEAD] = [
        MAGIC[0],
        MAGIC[1],
        VERSION,
        n_bytes & 0xFFFF,
        n_bytes >> 16,
        crc & 0xFFFF,
        crc >> 16,
        frames,
    ]
    flat[HEAD : HEAD + len(values)] = values
    out[:frames] = flat.reshape(frames, DIM)
    return out


def read(latent: np.ndarray) -> tuple[dict | None, int]:
    """(the recipe, the header's frame count) of a latent; (None, 0) without a valid one."""
    if latent.ndim != 2 or latent.shape[1] != DIM or not len(latent):
        return None, 0
    head = latent[0, :HEAD]
    if (head[0], head[1], head[2]) != (MAGIC[0], MAGIC[1], VERSION):
        return None, 0
    if not np.all(head == np.round(head)) or np.any(head < 0):
        return None, 0
    n_bytes = int(head[3]) | (int(head[4]) << 16)
    crc = int(head[5]) | (int(head[6]) << 16)
    frames = int(head[7])
    count = -(-n_bytes // 2)
    if frames < 1 or frames > len(latent) or HEAD + count > frames * DIM:
        return None, 0
    values = latent[:frames].reshape(-1)[HEAD : HEAD + count]
    if np.any(values < 0) or np.any(values > 65535) or np.any(values != np.round(values)):
        return None, 0
    payload = values.astype("<u2").tobytes()[:n_bytes]
    if zlib.crc32(payload) != crc:
        return None, 0
    try:
        recipe = json.loads(zlib.decompress(payload))
    except (zlib.error, ValueError, UnicodeDecodeError):
        return None, 0
    return (recipe if isinstance(recipe, dict) else None), frames


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").reshape(-1, DIM)


def to_bytes(latent: np.ndarray) -> bytes:
    return np.ascontiguousarray(latent, dtype="<f4").tobytes()


def stand_in(envelope: np.ndarray, skip: int = 0, seed: int = 0) -> np.ndarray:
    """Stereo noise with ``envelope``'s band energies frame by frame (48 kHz, ``len`` × 1920
    samples): all the Sketch can play of an envelope. Frames before ``skip`` (a header) take
    the next frame's envelope."""
    env = np.array(envelope, dtype=np.float64)
    if skip and skip < len(env):
        env[:skip] = env[skip]
    elif skip:
        env[:] = 0.0
    frames = len(env)
    power = np.expm1(np.clip(env, 0.0, 80.0))
    widths = np.diff(_EDGES)[:DIM].astype(np.float64)
    per_bin = np.zeros((frames, HOP // 2 + 1))
    for b in range(DIM):
        per_bin[:, _EDGES[b] : _EDGES[b + 1]] = (power[:, b] / widths[b])[:, None]
    mag = np.sqrt(2.0 * per_bin)  # the sine window halves each grain's power
    rng = np.random.default_rng(seed)
    size = 2 * HOP
    window = np.sin(np.pi * (np.arange(size) + 0.5) / size)
    out = np.zeros(((frames + 1) * HOP, 2), dtype=np.float32)
    for ch in range(2):
        for f0 in range(0, frames, 256):
            f1 = min(frames, f0 + 256)
            m = np.repeat(mag[f0:f1], 2, axis=1)[:, : size // 2 + 1]
            phase = rng.uniform(0, 2 * np.pi, m.shape)
            # a frame of HOP samples had these bin powers: one grain of 2 × HOP samples at
            # twice the bins per frame, sine-windowed, overlapping by half
            grains = np.fft.irfft(m * np.exp(1j * phase), size, axis=1) * window
            for i, grain in enumerate(grains):
                a = (f0 + i) * HOP - HOP // 2
                lo, hi = max(0, a), min(len(out), a + size)
                out[lo:hi, ch] += grain[lo - a : hi - a].astype(np.float32)
    return out[: frames * HOP]
