"""Addresses on this machine: a free port, and the URL that reaches a node from its host."""

from __future__ import annotations

import socket
import sys

WILDCARDS = ("0.0.0.0", "", "::", "[::]")


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def connect_host(host: str) -> str:
    """The host to connect to for a node listening on ``host`` (a wildcard address is
    reached on loopback; an IPv6 literal is bracketed for a URL)."""
    if host in WILDCARDS:
        return "127.0.0.1"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def http_url(host: str, port: int) -> str:
    return f"http://{connect_host(host)}:{port}"


_PROC_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = "0A"


def listening_uids(port: int, proc_tcp: tuple[str, ...] = _PROC_TCP) -> set[int] | None:
    """The users whose sockets listen on ``port`` on a loopback or wildcard address, from
    the kernel's own table (Linux ``/proc/net/tcp*``, which names each socket's owner);
    None where there is no such table (Windows, macOS) — the proof alone decides there.

    Whatever answers on a node's port before the first request is judged by who owns it: a
    listener of another user is not this user's node, whatever it answers."""
    found: set[int] = set()
    seen_table = False
    for table in proc_tcp:
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            try:
                if int(hex_port, 16) != port:
                    continue
                uid = int(fields[7])
            except ValueError:
                continue
            if _loopback_or_any(address):
                found.add(uid)
    return found if seen_table else None


def _loopback_or_any(hex_address: str) -> bool:
    """A /proc/net/tcp address (hex, in the kernel's byte order) that is 127.x, ::1, the
    IPv4-mapped 127.x, or a wildcard."""
    if len(hex_address) == 8:  # IPv4, little-endian on the machines Cantor runs on
        first = int(hex_address[6:8], 16) if sys.byteorder == "little" else int(hex_address[:2], 16)
        return hex_address == "00000000" or first == 127
    if len(hex_address) == 32:
        if hex_address == "0" * 32:
            return True
        words = [hex_address[i : i + 8] for i in range(0, 32, 8)]
        if words[:3] == ["00000000"] * 3 and words[3] in ("01000000", "00000001"):
            return True  # ::1
        mapped = words[:2] == ["00000000"] * 2 and words[2] in ("FFFF0000", "0000FFFF")
        return mapped and _loopback_or_any(words[3])
    return False
