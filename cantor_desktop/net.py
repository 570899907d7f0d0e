"""Addresses on this machine: a free port, and the URL that reaches a node from its host."""

from __future__ import annotations

import socket

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
