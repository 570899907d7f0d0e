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

from ..errors import CantorError

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
_MAX_ARCH = 256  # an architecture name is a word, not a paragraph
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
    from ..files import write_atomic

    path = Path(path)
    write_atomic(path, header_bytes(architecture, extra))
    return path


# ---------------------------------------------------------------- reading
#
# A file in the models folder may come from anyone (a download, an import, an upload), so
# reading its header is linear in the header's size and bounded: arrays are skipped without
# recursion and nested at most MAX_DEPTH deep, an array has at most MAX_ARRAY elements, and
# the kv section must end within the first MAX_HEADER bytes. Whatever the bytes, the only
# error is a GGUFError naming the limit or the fault, quoting at most a short prefix.

MAX_HEADER = 64 * 2**20
"""The kv section ends within this many bytes (a language model's tokenizer, the largest
header ACE-Step has, is about 6 MB)."""
MAX_DEPTH = 4
"""Arrays of arrays nested this deep at most (ggml itself reads no nested array)."""
MAX_ARRAY = 1 << 24
"""Elements in one array at most."""
MAX_STRINGS = 1 << 21
"""Strings in the whole header at most: each costs a step to skip (a tokenizer's
vocabulary and merges are ~300 000 each)."""
_BLOCK = 1 << 20
_SHOWN = 40  # characters of a key or value an error quotes


def _quote(text: str) -> str:
    from ..errors import short_repr

    return short_repr(text, _SHOWN)


class _Reader:
    def __init__(self, f: BinaryIO, name: str):
        self.f, self.name = f, name
        self.size = os.fstat(f.fileno()).st_size
        self.strings = 0

    def _bad(self, what: str) -> GGUFError:
        return GGUFError(f"{self.name}: corrupt GGUF header ({what})")

    def _room(self, n: int, what: str) -> None:
        """``n`` more bytes must lie within the file and within MAX_HEADER."""
        at = self.f.tell()
        if at + n > self.size:
            raise GGUFError(f"{self.name}: truncated GGUF header (while reading {what})")
        if at + n > MAX_HEADER:
            raise GGUFError(
                f"{self.name}: the GGUF header is larger than {MAX_HEADER // 2**20} MiB, the "
                f"most read (while reading {what})"
            )

    def take(self, n: int, what: str) -> bytes:
        self._room(n, what)
        data = self.f.read(n)
        if len(data) != n:
            raise GGUFError(f"{self.name}: truncated GGUF header (while reading {what})")
        return data

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def skip(self, n: int, what: str) -> None:
        # seek past; a seek beyond the end does not fail, so check the room first
        self._room(n, what)
        self.f.seek(n, os.SEEK_CUR)

    def string(self, what: str, limit: int = MAX_HEADER) -> str:
        n = self.unpack("<Q", what)
        if n > limit:
            raise self._bad(f"{what} is {n} bytes long; at most {limit}")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._bad(f"{what} is not UTF-8") from None

    def value(self, vtype: int, key: str, keep: bool):
        """Read (keep=True) or skip one value of type ``vtype``; arrays are always skipped."""
        shown = _quote(key)
        if vtype in _SCALAR_FMT:
            return self.unpack(_SCALAR_FMT[vtype], f"value of {shown}")
        if vtype == T_STRING:
            if keep:
                return self.string(f"value of {shown}")
            self.skip(self.unpack("<Q", f"value of {shown}"), f"value of {shown}")
            return None
        if vtype == T_ARRAY:
            self._skip_array(shown)
            return None
        raise GGUFError(f"{self.name}: unknown GGUF value type {vtype} for {shown}")

    def _skip_array(self, shown: str) -> None:
        """Skip an array (and the arrays in it) with a stack of counts, never recursion."""
        pending: list[tuple[int, int]] = []  # (element type, elements left) per open array
        etype, count = self._array_head(shown, 1)
        pending.append((etype, count))
        while pending:
            etype, left = pending[-1]
            if left == 0:
                pending.pop()
                continue
            if etype in _SCALAR_FMT:
                self.skip(left * struct.calcsize(_SCALAR_FMT[etype]), f"array {shown}")
                pending[-1] = (etype, 0)
            elif etype == T_STRING:
                self._skip_strings(left, f"array {shown}")
                pending[-1] = (etype, 0)
            else:  # T_ARRAY
                pending[-1] = (etype, left - 1)
                pending.append(self._array_head(shown, len(pending) + 1))

    def _skip_strings(self, count: int, what: str) -> None:
        """Skip ``count`` length-prefixed strings, walking a block read at a time."""
        self.strings += count
        if self.strings > MAX_STRINGS:
            raise self._bad(f"more than {MAX_STRINGS} strings (in {what})")
        at = self.f.tell()  # the file position of buf[0]
        buf, off = b"", 0
        unpack_from = struct.unpack_from
        for _ in range(count):
            if len(buf) - off < 8:
                at += off
                self.f.seek(at)
                buf, off = self.f.read(min(_BLOCK, max(0, MAX_HEADER - at))), 0
                if len(buf) < 8:
                    self.f.seek(at)
                    self._room(8, what)  # says truncated, or too large
            (n,) = unpack_from("<Q", buf, off)
            off += 8 + n
            if at + off > MAX_HEADER or at + off > self.size:
                self.f.seek(at + off - n)
                self._room(n, what)
        self.f.seek(at + off)

    def _array_head(self, shown: str, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise self._bad(f"arrays in {shown} are nested more than {MAX_DEPTH} deep")
        etype = self.unpack("<I", f"array type of {shown}")
        count = self.unpack("<Q", f"array length of {shown}")
        if etype not in _SCALAR_FMT and etype not in (T_STRING, T_ARRAY):
            raise GGUFError(f"{self.name}: unknown GGUF array type {etype} for {shown}")
        if count > MAX_ARRAY:
            raise self._bad(f"array {shown} has {count} elements; at most {MAX_ARRAY}")
        return etype, count


def _iter_kv(path: Path, f: BinaryIO):
    """Yield (key, type, reader) per kv pair; the caller reads or skips the value."""
    r = _Reader(f, str(path))
    magic = f.read(4)
    if magic != MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (it does not start with {MAGIC.decode()})")
    version = r.unpack("<I", "version")
    if version not in (2, 3):
        raise GGUFError(f"{path}: unsupported GGUF version {version}")
    r.unpack("<q", "tensor count")
    n_kv = r.unpack("<q", "kv count")
    if not 0 <= n_kv <= _MAX_KV:
        raise GGUFError(f"{path}: corrupt GGUF header (kv count {n_kv}; at most {_MAX_KV})")
    for _ in range(n_kv):
        key = r.string("key", _MAX_KEY)
        vtype = r.unpack("<I", f"type of {_quote(key)}")
        yield key, vtype, r


def _open(path: str | os.PathLike) -> tuple[Path, BinaryIO]:
    path = Path(path)
    try:
        return path, open(path, "rb")
    except OSError as e:
        raise GGUFError(f"{path}: cannot read ({e.strerror or e})") from None


def read_metadata(path: str | os.PathLike) -> dict[str, str | int | float | bool]:
    """Every string, number and bool kv of the header (arrays are skipped)."""
    file, f = _open(path)
    out: dict[str, str | int | float | bool] = {}
    with f:
        for key, vtype, r in _iter_kv(file, f):
            value = r.value(vtype, key, keep=True)
            if value is not None:
                out[key] = value
    return out


def read_architecture(path: str | os.PathLike) -> str:
    """``general.architecture`` of a GGUF file; stops reading as soon as it is found."""
    file, f = _open(path)
    with f:
        for key, vtype, r in _iter_kv(file, f):
            if key == ARCH_KEY:
                if vtype != T_STRING:
                    raise GGUFError(f"{file}: {ARCH_KEY} is not a string (type {vtype})")
                return r.string(f"value of {ARCH_KEY}", _MAX_ARCH)
            r.value(vtype, key, keep=False)
    raise GGUFError(f"{file}: GGUF header has no {ARCH_KEY}")


def model_kind(path: str | os.PathLike) -> str | None:
    """ "lm", "dit", "text-enc", "vae", or None for a GGUF of another architecture."""
    return KIND_BY_ARCH.get(read_architecture(path))
