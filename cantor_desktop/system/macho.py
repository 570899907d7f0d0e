"""Mach-O headers: is a file macOS code, of which kind, for which architectures, and the
oldest macOS it asks for.

Read with the standard library from the header and load commands only (no macholib, no
macOS needed), so the engine store can find the code in an unpacked engine build
(``procs/codesign.py`` signs it inside-out) and the macOS build can check its bundle
(``packaging/macos_release.py``: every binary for the build's architecture, and
``LSMinimumSystemVersion`` no older than the newest ``minos`` any binary carries).

Layouts from Apple's ``<mach-o/loader.h>`` and ``<mach-o/fat.h>``: a thin file starts with
``MH_MAGIC``/``MH_MAGIC_64`` in its own byte order; a universal ("fat") file starts with
``FAT_MAGIC``/``FAT_MAGIC_64``, big-endian, followed by one ``fat_arch`` per slice. Java
class files share ``0xCAFEBABE``; as ``file(1)`` does, a count of slices above 30 means
Java, not Mach-O.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

MH_MAGIC = 0xFEEDFACE
MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC = 0xCAFEBABE
FAT_MAGIC_64 = 0xCAFEBABF
MAX_SLICES = 30  # more than this after 0xCAFEBABE: a Java class file (its version numbers)

# file types (mach-o/loader.h)
MH_EXECUTE = 0x2
MH_DYLIB = 0x6
MH_BUNDLE = 0x8  # a loadable bundle: Python extension modules (.so), Qt plugins
FILETYPES = {
    0x1: "object",
    MH_EXECUTE: "executable",
    0x7: "dylinker",
    MH_DYLIB: "dylib",
    MH_BUNDLE: "bundle",
    0xA: "dsym",
}

# load commands
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32
PLATFORM_MACOS = 1

CPU_ARCH_ABI64 = 0x01000000
CPU_TYPES = {7: "i386", 7 | CPU_ARCH_ABI64: "x86_64", 12: "arm", 12 | CPU_ARCH_ABI64: "arm64"}
MAX_COMMANDS_BYTES = 1 << 20  # load commands larger than this are not a real header


@dataclass(frozen=True)
class Slice:
    arch: str  # "arm64", "x86_64", … or "cpu 0x…" for one not named here
    filetype: str  # "executable", "dylib", "bundle", …
    min_macos: tuple[int, int, int] | None  # LC_BUILD_VERSION minos / LC_VERSION_MIN_MACOSX


@dataclass(frozen=True)
class MachO:
    slices: tuple[Slice, ...]
    fat: bool

    @property
    def arches(self) -> tuple[str, ...]:
        return tuple(s.arch for s in self.slices)

    @property
    def filetype(self) -> str:
        return self.slices[0].filetype

    @property
    def is_executable(self) -> bool:
        return self.filetype == "executable"

    @property
    def min_macos(self) -> tuple[int, int, int] | None:
        """The newest ``minos`` of its slices (a universal file runs where every slice can)."""
        found = [s.min_macos for s in self.slices if s.min_macos is not None]
        return max(found) if found else None


def version_text(version: tuple[int, int, int]) -> str:
    """(13, 0, 0) → "13.0"; (10, 15, 4) → "10.15.4" (how Info.plist writes versions)."""
    major, minor, patch = version
    return f"{major}.{minor}" + (f".{patch}" if patch else "")


def _version(packed: int) -> tuple[int, int, int]:
    """Apple's packed X.Y.Z: xxxx.yy.zz in nibbles (16 bits, 8, 8)."""
    return packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF


def _arch(cputype: int) -> str:
    return CPU_TYPES.get(cputype, f"cpu {cputype:#x}")


def _thin(f, offset: int) -> Slice | None:
    f.seek(offset)
    head = f.read(28)
    if len(head) < 28:
        return None
    for order in ("<", ">"):
        (magic,) = struct.unpack(order + "I", head[:4])
        if magic in (MH_MAGIC, MH_MAGIC_64):
            break
    else:
        return None
    cputype, _sub, filetype, ncmds, sizeofcmds = struct.unpack(order + "iiIII", head[4:24])
    header_size = 32 if magic == MH_MAGIC_64 else 28
    min_macos = None
    if 0 < sizeofcmds <= MAX_COMMANDS_BYTES:
        f.seek(offset + header_size)
        commands = f.read(sizeofcmds)
        at = 0
        for _ in range(min(ncmds, sizeofcmds // 8)):
            if at + 8 > len(commands):
                break
            cmd, size = struct.unpack_from(order + "II", commands, at)
            if size < 8:
                break
            if cmd == LC_BUILD_VERSION and at + 16 <= len(commands):
                platform, minos = struct.unpack_from(order + "II", commands, at + 8)
                if platform == PLATFORM_MACOS:
                    min_macos = _version(minos)
            elif cmd == LC_VERSION_MIN_MACOSX and at + 12 <= len(commands):
                (packed,) = struct.unpack_from(order + "I", commands, at + 8)
                min_macos = _version(packed)
            at += size
    return Slice(_arch(cputype), FILETYPES.get(filetype, f"type {filetype:#x}"), min_macos)


def read(path: str | os.PathLike) -> MachO | None:
    """The Mach-O facts of a file, or None when it is not Mach-O (or cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return None
            magic, count = struct.unpack(">II", head)
            if magic in (FAT_MAGIC, FAT_MAGIC_64):
                if not 0 < count <= MAX_SLICES:
                    return None  # a Java class file
                entry = 20 if magic == FAT_MAGIC else 32
                table = f.read(entry * count)
                slices = []
                for k in range(count):
                    if magic == FAT_MAGIC:
                        _cpu, _sub, offset, _size, _align = struct.unpack_from(
                            ">iiIII", table, k * entry
                        )
                    else:
                        _cpu, _sub, offset, _size, _align, _res = struct.unpack_from(
                            ">iiQQII", table, k * entry
                        )
                    found = _thin(f, offset)
                    if found is None:
                        return None
                    slices.append(found)
                return MachO(tuple(slices), fat=True)
            found = _thin(f, 0)
            return MachO((found,), fat=False) if found is not None else None
    except (OSError, struct.error):
        return None
