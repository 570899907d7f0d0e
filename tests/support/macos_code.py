"""Stand-ins for macOS code and its codesign tool, for the tests on Linux.

- :func:`thin` / :func:`fat` write real Mach-O headers (``<mach-o/loader.h>``, ``fat.h``)
  with an ``LC_BUILD_VERSION`` or ``LC_VERSION_MIN_MACOSX`` command, so the code under test
  reads them as it reads a Mac's files (LLVM's otool reads them too: test_macos_code.py).
- :class:`FakeCodesign` plays ``/usr/bin/codesign`` for ``--verify`` and ``--sign``: each
  file's signature state (valid / unsigned / invalid) and the words codesign prints for it,
  as Apple's tool prints them; every command line it was given is kept, in order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

CPU = {"x86_64": 0x01000007, "arm64": 0x0100000C}
FILETYPE = {"executable": 0x2, "dylib": 0x6, "bundle": 0x8}


def _pack_version(version: tuple[int, int, int]) -> int:
    major, minor, patch = version
    return (major << 16) | (minor << 8) | patch


def thin(
    arch: str = "arm64",
    filetype: str = "dylib",
    minos: tuple[int, int, int] = (11, 0, 0),
    *,
    old_style: bool = False,
) -> bytes:
    """A 64-bit little-endian Mach-O header with one version load command (and a little
    padding, as a file has its segments after the commands)."""
    if old_style:  # macOS before 10.14 wrote LC_VERSION_MIN_MACOSX
        command = struct.pack("<IIII", 0x24, 16, _pack_version(minos), _pack_version(minos))
    else:
        command = struct.pack(
            "<IIIIII", 0x32, 24, 1, _pack_version(minos), _pack_version((15, 0, 0)), 0
        )
    commands = [command]
    if filetype == "dylib":  # a library names itself (LC_ID_DYLIB), as the linker writes
        name = b"@rpath/lib.dylib\0"
        name += b"\0" * (-(24 + len(name)) % 8)
        commands.append(struct.pack("<IIIIII", 0xD, 24 + len(name), 24, 2, 0x10000, 0x10000) + name)
    body = b"".join(commands)
    header = struct.pack(
        "<IiiIIIII", 0xFEEDFACF, CPU[arch], 0, FILETYPE[filetype], len(commands), len(body), 0, 0
    )
    return header + body + b"\0" * 64


def fat(*slices: bytes, arches: tuple[str, ...] = ("x86_64", "arm64")) -> bytes:
    """A universal file holding the thin ``slices`` (4 KiB aligned, as lipo writes)."""
    align = 4096
    table = struct.pack(">II", 0xCAFEBABE, len(slices))
    offset = align
    body = b""
    for arch, data in zip(arches, slices, strict=True):
        table += struct.pack(">iiIII", CPU[arch], 0, offset, len(data), 12)
        padded = data + b"\0" * (-len(data) % align)
        body += padded
        offset += len(padded)
    return table + b"\0" * (align - len(table)) + body


@dataclass
class FakeCodesign:
    """``run(argv) -> (exit code, output)`` as /usr/bin/codesign answers."""

    states: dict[str, str] = field(default_factory=dict)  # path → valid|unsigned|invalid
    default: str = "valid"
    refuse_signing: dict[str, str] = field(default_factory=dict)  # path → codesign's words
    refuse_every: str = ""  # codesign's words when it refuses to sign any file
    stays_broken: set[str] = field(default_factory=set)  # signing "works" but verify fails
    calls: list[list[str]] = field(default_factory=list)

    def state(self, path: str) -> str:
        return self.states.get(path, self.default)

    def __call__(self, argv: list[str]) -> tuple[int | None, str]:
        self.calls.append(list(argv))
        assert argv[0] == "/usr/bin/codesign", argv
        path = argv[-1]
        if "--verify" in argv:
            state = self.state(path)
            if state == "valid":
                return 0, f"{path}: valid on disk\n{path}: satisfies its Designated Requirement"
            if state == "unsigned":
                return 1, f"{path}: code object is not signed at all\nIn architecture: arm64"
            return 1, f"{path}: invalid signature (code or signature have been modified)\n" + (
                "In architecture: arm64"
            )
        if "--sign" in argv:
            words = self.refuse_signing.get(path) or self.refuse_every
            if words:
                return 1, f"{path}: {words}"
            replaced = self.state(path) != "unsigned"
            if path not in self.stays_broken:
                self.states[path] = "valid"
            return 0, f"{path}: replacing existing signature" if replaced else ""
        return 2, "fake codesign: unexpected command line"

    def verified(self) -> list[str]:
        return [c[-1] for c in self.calls if "--verify" in c]

    def signed(self) -> list[str]:
        return [c[-1] for c in self.calls if "--sign" in c]


def write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path
