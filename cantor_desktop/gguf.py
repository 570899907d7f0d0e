"""GGUF headers: read a model file's metadata without its weights, write header-only files.

ace-server classifies every ``*.gguf`` in its models folder by the header key
``general.architecture``. Cantor reads that key to know what a file is, and writes
header-only files (no tensors) for trial loads and for the built-in sketch engine.
Format: little-endian ``GGUF``, u32 version, i64 tensor count, i64 kv count, then kv pairs
(u64 key length + key, u32 value type, value). Only the kv section is ever read.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

from .errors import CantorError

ARCH_LM = "acestep-lm"
ARCH_DIT = "acestep-dit"
ARCH_TEXT_ENC = "acestep-text-enc"
ARCH_VAE = "acestep-vae"
KIND_BY_ARCH: dict[str, str] = {
    ARCH_LM: "lm",
    ARCH_DIT: "dit",
    ARCH_TEXT_ENC: "text-enc",
    ARCH_VAE: "vae",
}
ARCH_BY_KIND: dict[str, str] = {kind: arch for arch, kind in KIND_BY_ARCH.items()}

MAGIC = b"GGUF"
ARCH_KEY = "general.architecture"

# GGUF value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = 8, 9, 10, 11, 12
_SCALAR_FMT = {
    T_UINT8: "<B",
    T_INT8: "<b",
    T_UINT16: "<H",
    T_INT16: "<h",
    T_UINT32: "<I",
    T_INT32: "<i",
    T_FLOAT32: "<f",
    T_BOOL: "<?",
    T_UINT64: "<Q",
    T_INT64: "<q",
    T_FLOAT64: "<d",
}
_MAX_KEY = 1 << 16  # a key longer than this is a corrupt file, not a real key
_MAX_STRING = 1 << 30
_MAX_KV = 1 << 24


class GGUFError(CantorError, ValueError):
    """The file is not a GGUF, is truncated, or lacks what was asked for."""


# ---------------------------------------------------------------- writing


def _encode_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _encode_kv(key: str, value: str | int | float | bool) -> bytes:
    out = _encode_string(key)
    if isinstance(value, bool):
        return out + struct.pack("<I?", T_BOOL, value)
    if isinstance(value, str):
        return out + struct.pack("<I", T_STRING) + _encode_string(value)
    if isinstance(value, int):
        if 0 <= value < 1 << 32:
            return out + struct.pack("<II", T_UINT32, value)
        if -(1 << 63) <= value < 1 << 63:
            return out + struct.pack("<Iq", T_INT64, value)
        raise GGUFError(f"GGUF value for {key!r} out of range: {value}")
    if isinstance(value, float):
        return out + struct.pack("<If", T_FLOAT32, value)
    raise GGUFError(
        f"GGUF value for {key!r} must be str, int, float or bool, not {type(value).__name__}"
    )


def header_bytes(architecture: str, extra: dict[str, str | int] | None = None) -> bytes:
    """The bytes of a header-only GGUF v3 whose first key is ``general.architecture``."""
    if not architecture:
        raise GGUFError("architecture must not be empty")
    kvs = [(ARCH_KEY, architecture)] + [(k, v) for k, v in (extra or {}).items() if k != ARCH_KEY]
    body = b"".join(_encode_kv(k, v) for k, v in kvs)
    return MAGIC + struct.pack("<Iqq", 3, 0, len(kvs)) + body


def write_header_only(
    path: str | os.PathLike, architecture: str, extra: dict[str, str | int] | None = None
) -> Path:
    """Write a minimal GGUF (no tensors) with ``general.architecture`` and ``extra`` keys.

    Written to a temp file of its own in the same folder and renamed, so a reader never sees
    half, and two threads writing the same file at once (two songs planned together on a
    fresh home) never share a temp file.
    """
    from .config import write_atomic

    path = Path(path)
    write_atomic(path, header_bytes(architecture, extra))
    return path


# ---------------------------------------------------------------- reading


class _Reader:
    def __init__(self, f: BinaryIO, name: str):
        self.f, self.name = f, name
        self.size = os.fstat(f.fileno()).st_size

    def take(self, n: int, what: str) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise GGUFError(f"{self.name}: truncated GGUF header (while reading {what})")
        return data

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def skip(self, n: int, what: str) -> None:
        # seek past; a seek beyond the end does not fail, so compare with the file size
        if self.f.tell() + n > self.size:
            raise GGUFError(f"{self.name}: truncated GGUF header (while reading {what})")
        self.f.seek(n, os.SEEK_CUR)

    def string(self, what: str, limit: int = _MAX_STRING) -> str:
        n = self.unpack("<Q", what)
        if n > limit:
            raise GGUFError(f"{self.name}: corrupt GGUF header ({what} length {n})")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{self.name}: corrupt GGUF header ({what} is not UTF-8)") from None

    def value(self, vtype: int, key: str, keep: bool):
        """Read (keep=True) or skip one value of type ``vtype``; arrays are always skipped."""
        if vtype in _SCALAR_FMT:
            return self.unpack(_SCALAR_FMT[vtype], f"value of {key!r}")
        if vtype == T_STRING:
            if keep:
                return self.string(f"value of {key!r}")
            n = self.unpack("<Q", f"value of {key!r}")
            if n > _MAX_STRING:
                raise GGUFError(f"{self.name}: corrupt GGUF header (string of {key!r})")
            self.skip(n, f"value of {key!r}")
            return None
        if vtype == T_ARRAY:
            etype = self.unpack("<I", f"array type of {key!r}")
            count = self.unpack("<Q", f"array length of {key!r}")
            if etype in _SCALAR_FMT:
                self.skip(count * struct.calcsize(_SCALAR_FMT[etype]), f"array {key!r}")
            elif etype in (T_STRING, T_ARRAY):
                for _ in range(count):
                    self.value(etype, key, keep=False)
            else:
                raise GGUFError(f"{self.name}: unknown GGUF array type {etype} for {key!r}")
            return None
        raise GGUFError(f"{self.name}: unknown GGUF value type {vtype} for {key!r}")


def _iter_kv(path: Path, f: BinaryIO):
    """Yield (key, type, reader) per kv pair; the caller reads or skips the value."""
    r = _Reader(f, str(path))
    magic = f.read(4)
    if magic != MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (magic {magic!r}, expected b'GGUF')")
    version = r.unpack("<I", "version")
    if version not in (2, 3):
        raise GGUFError(f"{path}: unsupported GGUF version {version}")
    r.unpack("<q", "tensor count")
    n_kv = r.unpack("<q", "kv count")
    if not 0 <= n_kv <= _MAX_KV:
        raise GGUFError(f"{path}: corrupt GGUF header (kv count {n_kv})")
    for _ in range(n_kv):
        key = r.string("key", _MAX_KEY)
        vtype = r.unpack("<I", f"type of {key!r}")
        yield key, vtype, r


def _open(path: str | os.PathLike):
    path = Path(path)
    try:
        return path, open(path, "rb")
    except OSError as e:
        raise GGUFError(f"{path}: cannot read ({e.strerror or e})") from None


def read_metadata(path: str | os.PathLike) -> dict[str, str | int | float | bool]:
    """Every string, number and bool kv of the header (arrays are skipped)."""
    path, f = _open(path)
    out: dict[str, str | int | float | bool] = {}
    with f:
        for key, vtype, r in _iter_kv(path, f):
            value = r.value(vtype, key, keep=True)
            if value is not None:
                out[key] = value
    return out


def read_architecture(path: str | os.PathLike) -> str:
    """``general.architecture`` of a GGUF file; stops reading as soon as it is found."""
    path, f = _open(path)
    with f:
        for key, vtype, r in _iter_kv(path, f):
            if key == ARCH_KEY:
                if vtype != T_STRING:
                    raise GGUFError(f"{path}: {ARCH_KEY} is not a string (type {vtype})")
                return r.value(vtype, key, keep=True)
            r.value(vtype, key, keep=False)
    raise GGUFError(f"{path}: GGUF header has no {ARCH_KEY}")


def model_kind(path: str | os.PathLike) -> str | None:
    """ "lm", "dit", "text-enc", "vae", or None for a GGUF of another architecture."""
    return KIND_BY_ARCH.get(read_architecture(path))
