"""Audio files and the multipart result body, byte for byte like ace-server's."""

from __future__ import annotations

import io
import struct

import numpy as np

from .render import SR

BOUNDARY = "ace-batch-boundary"


class EncodeError(RuntimeError):
    pass


def wav_bytes(audio: np.ndarray, fmt: str, sample_rate: int = SR) -> bytes:
    """A 44-byte-header WAV of stereo float audio in [-1, 1]: wav16, wav24 or wav32 (float)."""
    channels = audio.shape[1] if audio.ndim == 2 else 1
    x = np.clip(audio.reshape(-1), -1.0, 1.0)
    if fmt == "wav16":
        data = np.round(x * 32767).astype("<i2").tobytes()
        bits, tag = 16, 1
    elif fmt == "wav24":
        v = np.round(x.astype(np.float64) * 8388607).astype("<i4")
        data = v.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
        bits, tag = 24, 1
    elif fmt == "wav32":
        data = x.astype("<f4").tobytes()
        bits, tag = 32, 3
    else:
        raise EncodeError(f"not a WAV format: {fmt}")
    block = channels * bits // 8
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16,
                         tag, channels, sample_rate, sample_rate * block, block, bits,
                         b"data", len(data))
    return header + data


def mp3_bytes(audio: np.ndarray, bitrate_kbps: int = 128, sample_rate: int = SR) -> bytes:
    """MP3 through libsndfile (1.1+ has an MP3 encoder); EncodeError if it is unavailable."""
    try:
        import soundfile as sf
    except ImportError as e:        # pragma: no cover - soundfile is a dependency
        raise EncodeError(f"MP3 encoding unavailable: {e}") from None
    buf = io.BytesIO()
    try:
        with sf.SoundFile(buf, "w", samplerate=sample_rate, channels=audio.shape[1],
                          format="MP3", subtype="MPEG_LAYER_III") as f:
            try:     # libsndfile maps 0..1 onto its bitrate range; ask for the bitrate mode
                f.compression_level = max(0.0, min(1.0, 1.0 - (bitrate_kbps - 32) / 288))
            except Exception:       # older soundfile: keep libsndfile's default
                pass
            f.write(audio)
    except Exception as e:
        raise EncodeError(f"MP3 encoding unavailable in this build ({e}); "
                          "use output_format wav16, wav24 or wav32") from None
    return buf.getvalue()


def multipart(tracks: list[tuple[bytes, str, bytes]]) -> bytes:
    """``multipart/mixed`` body: per track its audio part then its latent part."""
    out = bytearray()
    for audio, content_type, latent in tracks:
        out += (f"--{BOUNDARY}\r\nContent-Type: {content_type}\r\n\r\n").encode()
        out += audio + b"\r\n"
        out += (f"--{BOUNDARY}\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Disposition: form-data; name=\"latent\"\r\n\r\n").encode()
        out += latent + b"\r\n"
    out += f"--{BOUNDARY}--\r\n".encode()
    return bytes(out)
