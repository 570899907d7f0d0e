"""Audio files and the multipart result body, byte for byte like ace-server's."""

from __future__ import annotations

import io
import struct

import numpy as np

from .render import SR

BOUNDARY = "ace-batch-boundary"


class EncodeError(RuntimeError):
    pass


_WAV = {"wav16": (16, 1), "wav24": (24, 1), "wav32": (32, 3)}
_CHUNK = 1 << 20  # samples converted at a time: small temporaries


def _pcm(x: np.ndarray, fmt: str) -> bytes:
    x = np.clip(x, -1.0, 1.0)
    if fmt == "wav16":
        return np.round(x * 32767).astype("<i2").tobytes()
    if fmt == "wav24":
        v = np.round(x.astype(np.float64) * 8388607).astype("<i4")
        return v.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    return x.astype("<f4").tobytes()


def wav_bytes(audio: np.ndarray, fmt: str, sample_rate: int = SR) -> bytes:
    """A 44-byte-header WAV of float audio in [-1, 1], shape (samples, channels):
    wav16 (s16), wav24 (s24) or wav32 (float32, format tag 3)."""
    return b"".join(wav_pieces(audio, fmt, sample_rate))


def wav_pieces(audio: np.ndarray, fmt: str, sample_rate: int = SR) -> list[bytes]:
    """:func:`wav_bytes` as consecutive pieces (no second copy of a long song)."""
    if fmt not in _WAV:
        raise EncodeError(f"not a WAV format: {fmt}")
    bits, tag = _WAV[fmt]
    channels = audio.shape[1] if audio.ndim == 2 else 1
    flat = audio.reshape(-1)
    block = channels * bits // 8
    data_len = len(flat) * bits // 8
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + data_len,
        b"WAVE",
        b"fmt ",
        16,
        tag,
        channels,
        sample_rate,
        sample_rate * block,
        block,
        bits,
        b"data",
        data_len,
    )
    step = _CHUNK * channels
    return [header] + [_pcm(flat[i : i + step], fmt) for i in range(0, len(flat), step)]


def mp3_bytes(audio: np.ndarray, bitrate_kbps: int = 128, sample_rate: int = SR) -> bytes:
    """MP3 through libsndfile (1.1+ has an MP3 encoder); EncodeError if it is unavailable."""
    try:
        import soundfile as sf
    except ImportError as e:  # pragma: no cover - soundfile is a dependency
        raise EncodeError(f"MP3 encoding unavailable: {e}") from None
    buf = io.BytesIO()
    try:
        with sf.SoundFile(
            buf,
            "w",
            samplerate=sample_rate,
            channels=audio.shape[1],
            format="MP3",
            subtype="MPEG_LAYER_III",
        ) as f:
            try:  # libsndfile maps 0..1 onto its bitrate range; ask for the bitrate mode
                f.compression_level = max(0.0, min(1.0, 1.0 - (bitrate_kbps - 32) / 288))
            except Exception:  # older soundfile: keep libsndfile's default
                pass
            f.write(audio)
    except Exception as e:
        raise EncodeError(
            f"MP3 encoding unavailable in this build ({e}); use output_format wav16, wav24 or wav32"
        ) from None
    return buf.getvalue()


Audio = bytes | list[bytes]


def multipart(tracks: list[tuple[Audio, str, bytes]]) -> bytes:
    """``multipart/mixed`` body: per track its audio part then its latent part."""
    return b"".join(multipart_pieces(tracks))


def multipart_pieces(tracks: list[tuple[Audio, str, bytes]]) -> list[bytes]:
    """The multipart body as pieces to send one after another (no copy of the audio)."""
    pieces = []
    for audio, content_type, latent in tracks:
        pieces.append(f"--{BOUNDARY}\r\nContent-Type: {content_type}\r\n\r\n".encode())
        pieces += [audio] if isinstance(audio, bytes) else audio
        pieces += [
            b"\r\n",
            (
                f"--{BOUNDARY}\r\nContent-Type: application/octet-stream\r\n"
                f'Content-Disposition: form-data; name="latent"\r\n\r\n'
            ).encode(),
            latent,
            b"\r\n",
        ]
    pieces.append(f"--{BOUNDARY}--\r\n".encode())
    return pieces
