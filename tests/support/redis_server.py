"""A real redis-server on a free loopback port with its own folder, a password and the
append-only file on (every write fsynced), for the pool's tests and its bench.

With ``tls=(certificate, key, CA)`` it listens with TLS only (``rediss://``; clients are
not asked for a certificate of their own).

``scripts/bootstrap.sh`` installs Debian's ``redis-server`` (built with TLS); where it cannot
be had the tests that need it are skipped with that reason (:func:`require`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

from .procs import free_port


def new_password() -> str:
    """A password of this server's own: a test that reaches another test's server (two
    xdist workers given the same free port) is refused instead of taking it for its own."""
    return "pool-test-" + secrets.token_hex(8)


def binary() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )


def require() -> str:
    """The redis-server binary, or the test is skipped saying why."""
    import pytest

    found = binary()
    if found is None:
        pytest.skip("redis-server is not installed (scripts/bootstrap.sh installs it with apt)")
    return found


class RedisServer:
    """``redis-server`` child: :meth:`start`, :meth:`kill9`, :meth:`restart` (same folder,
    same port: what the append-only file kept comes back)."""

    def __init__(
        self,
        folder: Path,
        *,
        port: int | None = None,
        password: str | None = None,
        tls: tuple[Path, Path, Path] | None = None,
    ):
        self.folder = folder
        self.tls = tls
        self.port = port or free_port()
        self.chosen_port = port is None  # ours to change when another process took it
        self.password = password or new_password()
        self.proc: subprocess.Popen | None = None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """The pool URL without the password (the nodes get it another way)."""
        return f"{self.scheme}://127.0.0.1:{self.port}/0"

    @property
    def scheme(self) -> str:
        return "rediss" if self.tls else "redis"

    @property
    def url_with_password(self) -> str:
        return f"{self.scheme}://:{self.password}@127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        if self.tls:
            cert, key, ca = self.tls
            listen = ["--port", "0", "--tls-port", str(self.port)]
            listen += ["--tls-cert-file", str(cert), "--tls-key-file", str(key)]
            listen += ["--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
        else:
            listen = ["--port", str(self.port)]
        return [
            binary() or "redis-server",
            *listen,
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--requirepass",
            self.password,
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--logfile",
            str(self.folder / "redis.log"),
        ]

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.proc.stderr.read() if self.proc.stderr else b""
                log = self.folder / "redis.log"
                said += log.read_bytes()[-2000:] if log.exists() else b""
                if self.chosen_port and b"in use" in said and self.proc.returncode != 0:
                    # another process (a parallel test) bound the free port meanwhile
                    self.port = free_port()
                    return self.start(timeout)
                raise RuntimeError(f"redis-server exited {self.proc.returncode}: {said!r}")
            if self.ping():
                return self
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer in time")

    def ping(self) -> bool:
        """True when the server answers an authenticated PING (RESP over a socket)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw:
                s = raw
                if self.tls:
                    context = ssl.create_default_context(cafile=str(self.tls[2]))
                    s = context.wrap_socket(raw, server_hostname="127.0.0.1")
                s.sendall(
                    f"*2\r\n$4\r\nAUTH\r\n${len(self.password)}\r\n{self.password}\r\n"
                    "*1\r\n$4\r\nPING\r\n".encode()
                )
                data = b""
                while data.count(b"\r\n") < 2:
                    chunk = s.recv(256)
                    if not chunk:
                        return False
                    data += chunk
                return b"+PONG" in data
        except OSError:
            return False

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> RedisServer:
        self.kill9()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
