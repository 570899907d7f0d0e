"""Waveform peaks of a song file, computed once and cached on disk, without Qt.

``peaks(path)`` reads the audio in blocks (never the whole file at once), folds it to
``BINS`` max-abs values (numpy is imported only when needed, to keep start-up quick) in 0..1, and stores them under ``paths().waveforms_dir``
keyed by the file's path, size and mtime, so a changed file is read again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..files import write_atomic
from ..system.paths import paths

BINS = 600


def cache_dir() -> Path:
    return paths().waveforms_dir


def _cache_file(path: str) -> Path:
    st = os.stat(path)
    key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{BINS}"
    return cache_dir() / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".npy")


def cached_peaks(path: str):
    import numpy as np

    try:
        return np.load(_cache_file(path))
    except (OSError, ValueError):
        return None


def compute_peaks(path: str, bins: int = BINS):
    import numpy as np
    import soundfile as sf

    with sf.SoundFile(path) as f:
        frames = f.frames
        if frames <= 0:
            return np.zeros(bins, dtype=np.float32)
        per_bin = max(1, frames // bins)
        out = np.zeros(bins, dtype=np.float32)
        block = per_bin * max(1, 65536 // per_bin)
        index = 0
        carry = np.zeros(0, dtype=np.float32)
        for chunk in f.blocks(blocksize=block, dtype="float32", always_2d=True):
            mono = np.abs(chunk).max(axis=1)
            data = np.concatenate([carry, mono]) if carry.size else mono
            whole = (data.size // per_bin) * per_bin
            if whole:
                folded = data[:whole].reshape(-1, per_bin).max(axis=1)
                take = min(folded.size, bins - index)
                out[index : index + take] = folded[:take]
                index += take
            carry = data[whole:]
            if index >= bins:
                break
        if carry.size and index < bins:
            out[index] = carry.max()
    top = float(out.max())
    return out / top if top > 0 else out


def peaks(path: str):
    """Cached peaks, or compute (slow: call from a worker thread) and cache them."""
    found = cached_peaks(path)
    if found is not None:
        return found
    values = compute_peaks(path)
    target = _cache_file(path)
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, values)
    write_atomic(target, buf.getvalue())
    return values
