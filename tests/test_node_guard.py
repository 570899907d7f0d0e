"""The node answers only its owner: Host, Origin, the token, JSON only, capped bodies,
settings that choose a program locked, a queue cap, one backend action at a time.

The rules as functions first, then each against a real node process on 127.0.0.1 and a real
socket (the raw requests a web page or a rebinding attack would send)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from cantor_desktop.node.guard import host_allowed, origin_allowed, split_host

from support.http_files import FileServer
from support.node import SHORT, LONG, Node, until_state, write_config


@pytest.fixture
def home(cantor_home):
    write_config(cantor_home)
    return cantor_home


def run(coro):
    return asyncio.run(coro)


# -- the rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("127.0.0.1:7823", ("127.0.0.1", 7823)),
        ("localhost", ("localhost", None)),
        ("[::1]:7823", ("::1", 7823)),
        ("LocalHost.:80", ("localhost", 80)),
        ("", ("", None)),
        ("   ", ("", None)),
        (":7823", ("", 7823)),
        ("evil.example:7823", ("evil.example", 7823)),
        ("a@127.0.0.1", ("", None)),
        ("127.0.0.1:notaport", ("", None)),
        ("127.0.0.1/x", ("", None)),
    ],
)
def test_split_host(value, expected):
    assert split_host(value) == expected


@pytest.mark.parametrize(
    "name, local, declared, ok",
    [
        ("127.0.0.1", "127.0.0.1", [], True),
        ("127.0.0.2", "127.0.0.1", [], True),  # any loopback literal, on loopback
        ("::1", "127.0.0.1", [], True),
        ("localhost", "127.0.0.1", [], True),
        ("192.0.2.7", "192.0.2.7", [], True),  # the address the request arrived on
        ("192.0.2.8", "192.0.2.7", [], False),
        ("127.0.0.1", "192.0.2.7", [], False),
        ("evil.example", "127.0.0.1", [], False),  # DNS rebinding
        ("localhost.evil.example", "127.0.0.1", [], False),
        ("", "127.0.0.1", [], False),  # the empty host (ollama's bypass)
        ("studio.local", "192.0.2.7", ["Studio.Local"], True),
        ("studio.local", "192.0.2.7", ["other.local"], False),
    ],
)
def test_host_allowed(name, local, declared, ok):
    assert host_allowed(name, local, declared) is ok


@pytest.mark.parametrize(
    "origin, ok",
    [
        ("http://127.0.0.1:7823", True),
        ("http://localhost:7823", True),
        ("http://127.0.0.1:8000", False),  # another local page, another origin
        ("https://evil.example", False),
        ("http://evil.example:7823", False),
        ("null", False),
        ("file://", False),
        ("chrome-extension://abc", False),
        ("", False),
    ],
)
def test_origin_allowed(origin, ok):
    assert origin_allowed(origin, "127.0.0.1:7823", "127.0.0.1", [], 7823) is ok


# -- against a real node -------------------------------------------------------------------


def raw(port: int, head: str, body: bytes = b"") -> tuple[int, dict, bytes]:
    """Send one request exactly as written (any Host, any header) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n" + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head_part, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head_part.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    None,
                )
                if length is not None and len(rest) >= length:
                    break
    head_part, _, rest = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
    }
    return int(lines[0].split()[1]), headers, rest


def request(
    port: int,
    method: str,
    path: str,
    *,
    host: str | None = None,
    token: str | None = None,
    ctype: str | None = None,
    body: bytes = b"",
    extra: str = "",
) -> tuple[int, dict, bytes]:
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host if host is not None else f'127.0.0.1:{port}'}",
    ]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if ctype:
        lines.append(f"Content-Type: {ctype}")
    if body or method in ("POST", "PATCH", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    if extra:
        lines.append(extra)
    return raw(port, "\n".join(lines) + "\n", body)


SONG = json.dumps(
    {"caption": "a web page's song", "duration": 600, "format": "wav32", "batch": 4}
).encode()


def test_a_web_page_changes_nothing_whatever_it_sends(home):
    async def main():
        node = await Node(home).start()
        try:
            port, token = node.proc.port, node.proc.token
            toml = (home / "node.toml").read_bytes()
            answers = {}
            # plain cross-site requests: no preflight for these three body types
            for ctype, body in (
                ("text/plain", SONG),
                ("application/x-www-form-urlencoded", SONG),
                (
                    "multipart/form-data; boundary=x",
                    b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n"
                    + SONG
                    + b"\r\n--x--\r\n",
                ),
            ):
                answers[f"{ctype} without token"] = request(
                    port, "POST", "/v1/songs", ctype=ctype, body=body
                )[0]
                answers[f"{ctype} with the token"] = request(
                    port, "POST", "/v1/songs", token=token, ctype=ctype, body=body
                )[0]
            # DNS rebinding: the page's own name now points at 127.0.0.1
            for host in ("evil.example:%d" % port, "", f":{port}", "localhost.evil.example"):
                answers[f"host {host!r}"] = request(
                    port,
                    "POST",
                    "/v1/songs",
                    host=host,
                    token=token,
                    ctype="application/json",
                    body=SONG,
                )[0]
            answers["health on a rebinding host"] = request(
                port, "GET", "/v1/health", host="evil.example"
            )[0]
            answers["foreign origin"] = request(
                port,
                "POST",
                "/v1/songs",
                token=token,
                ctype="application/json",
                body=SONG,
                extra="Origin: https://evil.example",
            )[0]
            answers["null origin"] = request(
                port,
                "POST",
                "/v1/songs",
                token=token,
                ctype="application/json",
                body=SONG,
                extra="Origin: null",
            )[0]
            answers["no token"] = request(
                port, "POST", "/v1/songs", ctype="application/json", body=SONG
            )[0]
            answers["wrong token"] = request(
                port, "POST", "/v1/songs", token="x" * 43, ctype="application/json", body=SONG
            )[0]
            answers["a body with no type"] = request(
                port, "POST", "/v1/songs", token=token, body=SONG
            )[0]
            answers["restart with text/plain"] = request(
                port, "POST", "/v1/node/restart", token=token, ctype="text/plain", body=b"x"
            )[0]
            preflight = request(
                port,
                "OPTIONS",
                "/v1/songs",
                extra=("Origin: https://evil.example\nAccess-Control-Request-Method: POST"),
            )
            health = request(port, "GET", "/v1/health")
            async with node.client() as c:
                songs = await c.songs()
                system = await c.system()
            return answers, preflight, health, songs, system, toml
        finally:
            await node.stop()

    answers, preflight, health, songs, system, toml = run(main())
    expected = {
        k: 415
        for k in answers
        if "with the token" in k or k in ("a body with no type", "restart with text/plain")
    }
    expected.update(
        {k: 401 for k in answers if "without token" in k or k in ("no token", "wrong token")}
    )
    expected.update(
        {k: 403 for k in answers if k.startswith(("host", "health on", "foreign", "null"))}
    )
    assert answers == expected
    assert preflight[0] == 403
    assert not any(k.startswith("access-control") for k in preflight[1])
    assert health[0] == 200 and set(json.loads(health[2])) == {"status", "version"}
    assert songs == [] and not system["restarting"]
    assert (home / "node.toml").read_bytes() == toml


def test_the_rce_replayed_runs_nothing(home, tmp_path):
    """A page PATCHed engines.manifest (or engines.acestep.path) to its own, then asked for a
    backend: the node fetched the page's archive and its trial load ran the page's program."""
    marker = tmp_path / "pwned"
    evil_program = f"#!/bin/sh\ntouch {marker}\n".encode()

    async def main():
        with FileServer({"/engines.json": b"{}", "/ace-server": evil_program}) as evil:
            node = await Node(home).start()
            try:
                port, token = node.proc.port, node.proc.token
                toml = (home / "node.toml").read_bytes()
                got = {}
                for key, value in (
                    ("engines.manifest", evil.url("/engines.json")),
                    ("engines.acestep.path", str(tmp_path / "ace-server")),
                    ("songs.dir", "/tmp"),
                    ("app.node_url", evil.url("/")),
                    ("node.allowed_hosts", ["evil.example"]),
                    ("node.host", "0.0.0.0"),  # the whole network, with the token
                    ("node.port", 8123),
                ):
                    body = json.dumps({key: value}).encode()
                    got[f"{key} rebinding"] = request(
                        port,
                        "PATCH",
                        "/v1/config",
                        host="evil.example",
                        token=token,
                        ctype="application/json",
                        body=body,
                    )[0]
                    status, _h, answer = request(
                        port,
                        "PATCH",
                        "/v1/config",
                        token=token,
                        ctype="application/json",
                        body=body,
                    )
                    got[f"{key} with the token"] = (status, json.loads(answer)["error"])
                got["use cpu rebinding"] = request(
                    port,
                    "POST",
                    "/v1/backends/use",
                    host="evil.example",
                    token=token,
                    ctype="application/json",
                    body=b'{"backend":"cpu"}',
                )[0]
                got["keep_loaded"] = request(
                    port,
                    "PATCH",
                    "/v1/config",
                    token=token,
                    ctype="application/json",
                    body=b'{"node.keep_loaded": true}',
                )[0]
                after = (home / "node.toml").read_text()
                return got, toml, after, len(evil.requests), node.proc.running
            finally:
                await node.stop()

    got, toml, after, evil_hits, alive = run(main())
    for key in (
        "engines.manifest",
        "engines.acestep.path",
        "songs.dir",
        "app.node_url",
        "node.allowed_hosts",
        "node.host",
        "node.port",
    ):
        assert got[f"{key} rebinding"] == 403
        status, error = got[f"{key} with the token"]
        assert status == 403 and error["field"] == key
        assert f"cantor config set {key}" in error["message"]
    assert got["use cpu rebinding"] == 403 and evil_hits == 0 and not marker.exists()
    assert got["keep_loaded"] == 200 and "keep_loaded = true" in after  # the rest still works
    assert "engines" not in after and "evil" not in after and alive


def test_bodies_are_capped_while_they_stream_in(home):
    async def main():
        node = await Node(home).start()
        try:
            port, token = node.proc.port, node.proc.token
            declared = request(
                port,
                "POST",
                "/v1/songs",
                token=token,
                ctype="application/json",
                body=b" " * (2 * 2**20),
            )
            async with node.http(timeout=30) as http:

                async def chunks():
                    for _ in range(64):
                        yield b" " * 65536  # 4 MiB, no Content-Length

                streamed = await http.post(
                    "/v1/songs", content=chunks(), headers={"Content-Type": "application/json"}
                )
                fine = await http.post("/v1/songs", json={**SHORT, "lyrics": "la " * 20000})
            return declared, streamed, fine
        finally:
            await node.stop()

    declared, streamed, fine = run(main())
    assert declared[0] == 413 and json.loads(declared[2])["error"]["type"] == "too_large"
    assert streamed.status_code == 413
    assert fine.status_code in (202, 422)  # under the cap: the handler judged it


def test_the_queue_has_a_cap_named_in_the_refusal(home):
    with open(home / "node.toml", "a") as fh:
        fh.write("\n[node]\nmax_queue = 2\n")

    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                first = await c.submit_song(LONG)
                second = await c.submit_song(LONG)
                async with node.http() as http:
                    third = await http.post("/v1/songs", json=LONG)
                await c.cancel(first)
                await c.cancel(second)
                await until_state(c, second, ("cancelled",))
                fourth = await c.submit_song(SHORT)  # room again
                await c.cancel(fourth)
                return third
        finally:
            await node.stop()

    third = run(main())
    assert third.status_code == 429
    assert "node.max_queue = 2" in third.json()["error"]["message"]


def test_a_declared_host_name_is_answered(home):
    with open(home / "node.toml", "a") as fh:
        fh.write('\n[node]\nallowed_hosts = ["studio.local"]\n')

    async def main():
        node = await Node(home).start()
        try:
            port, token = node.proc.port, node.proc.token
            return (
                request(port, "GET", "/v1/songs", host=f"studio.local:{port}", token=token)[0],
                request(port, "GET", "/v1/songs", host=f"other.local:{port}", token=token)[0],
            )
        finally:
            await node.stop()

    assert run(main()) == (200, 403)


def test_one_backend_action_at_a_time(home):
    """A second install while one runs is a 409 naming the first (they shared engines/)."""
    held = asyncio.Event()

    async def main():
        with FileServer({"/engines.json": b"{}"}) as slow:
            slow.stall("/engines.json", after=0, seconds=5)
            node = await Node(home, env={"CANTOR_MANIFEST_URL": slow.url("/engines.json")}).start()
            try:
                async with node.http(timeout=30) as http:

                    async def first():
                        async with http.stream("POST", "/v1/backends/update") as r:
                            held.set()
                            return r.status_code, [line async for line in r.aiter_lines()]

                    task = asyncio.create_task(first())
                    await held.wait()
                    second = await http.post("/v1/backends/install", json={})
                    status, lines = await task
                    third = await http.post("/v1/backends/update")
                    async for _ in third.aiter_lines():
                        pass
                return second, status, third.status_code
            finally:
                await node.stop()

    second, first_status, third_status = run(main())
    assert first_status == 200
    assert second.status_code == 409 and "update is running" in second.json()["error"]["message"]
    assert third_status == 200  # free again once the first ended


def test_system_probes_the_hardware_once_not_on_every_call(home, tmp_path):
    """nvidia-smi (a fake one on PATH that counts its runs) runs once for many /v1/system."""
    import os
    import stat

    counter = tmp_path / "runs"
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho run >> {counter}\nexit 9\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    async def main():
        node = await Node(
            home, env={"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
        ).start()
        try:
            async with node.client() as c:
                for _ in range(5):
                    await c.system()
        finally:
            await node.stop()

    run(main())
    assert counter.read_text().count("run") == 1


def test_engines_start_with_an_allow_list_never_the_users_environment(monkeypatch):
    """An engine gets only what it needs: ours minus a list of names would hand it
    GITHUB_PAT and any other secret the user exports."""
    from cantor_desktop.engine.process_options import engine_environment

    for name in (
        "CANTOR_NODE_TOKEN",
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_PAT",
        "OPENAI_KEY",
        "DATABASE_URL",
        "CANTOR_HOME",
        "SSH_AUTH_SOCK",
        "GGML_SECRET_TOKEN",  # an allowed prefix, a secret's name: dropped all the same
    ):
        monkeypatch.setenv(name, "secret")
    for name in ("LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "VK_ICD_FILENAMES"):
        monkeypatch.setenv(name, "kept")
    env = engine_environment({"GGML_BACKEND": "CPU"})
    assert "secret" not in env.values(), sorted(k for k, v in env.items() if v == "secret")
    assert env["GGML_BACKEND"] == "CPU" and env["PATH"] == __import__("os").environ["PATH"]
    assert {"LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "VK_ICD_FILENAMES"} <= set(env)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_a_running_engine_holds_no_token(home):  # and no other variable of the user's
    """The real sketch engine child of a real node: its environment (read from /proc)."""
    import pathlib

    async def main():
        node = await Node(home, env={"HF_TOKEN": "hf_secret", "GITHUB_PAT": "ghp_x"}).start()
        try:
            async with node.client() as c:
                sid = await c.submit_song(LONG)
                await until_state(c, sid, ("running",))
                for _ in range(200):
                    pid = next(
                        (e["pid"] for e in (await c.system())["loaded"] if e.get("running")), None
                    )
                    if pid:
                        break
                    await asyncio.sleep(0.05)
                environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                await c.cancel(sid)
                return {e.split(b"=", 1)[0].decode() for e in environ if b"=" in e}
        finally:
            await node.stop()

    names = run(main())
    assert "PATH" in names and "CANTOR_OWNER_FD" in names  # what it needs: it ran a song
    assert not {"CANTOR_NODE_TOKEN", "HF_TOKEN", "GITHUB_PAT", "CANTOR_HOME"} & names


# -- the body timer stops with the body -------------------------------------------------------


def _guarded_stream(idle_s: float, stream_s: float):
    """The Guard over a JSON POST whose answer streams for ``stream_s`` (as a pull does),
    listening for the client's hang-up meanwhile, as Starlette's StreamingResponse does."""
    from starlette.requests import Request
    from starlette.responses import StreamingResponse

    from cantor_desktop.node.guard import Guard

    async def app(scope, receive, send):
        body = await Request(scope, receive).body()

        async def events():
            yield b"event: start\n\n"
            await asyncio.sleep(stream_s)
            yield b"event: done\ndata: " + body + b"\n\n"

        await StreamingResponse(events(), media_type="text/event-stream")(scope, receive, send)

    return Guard(app, token=lambda: "t", body_idle_s=idle_s)


def _scope(length: int) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1/models/pull",
        "query_string": b"",
        "server": ("127.0.0.1", 7823),
        "client": ("127.0.0.1", 50000),
        "headers": [
            (b"host", b"127.0.0.1:7823"),
            (b"authorization", b"Bearer t"),
            (b"content-type", b"application/json"),
            (b"content-length", str(length).encode()),
        ],
    }


def _drive(guard, scope: dict, parts: list[dict]) -> list[dict]:
    """One request through the Guard: ``parts`` arrive, then the client stays connected."""

    async def go():
        sent: list[dict] = []

        async def receive():
            if parts:
                return parts.pop(0)
            await asyncio.Event().wait()  # no more: the client just waits

        async def send(message):
            sent.append(message)

        await asyncio.wait_for(guard(scope, receive, send), 5)
        return sent

    return run(go())


def test_a_streamed_answer_outlives_the_body_timer():
    """A pull's progress stream lasts minutes; the 30-s body timer once cut it off mid-way
    (the app's 1 GiB pull ended 'peer closed connection' after every byte had arrived)."""
    body = b'{"name": "x"}'
    sent = _drive(
        _guarded_stream(idle_s=0.2, stream_s=0.8),
        _scope(len(body)),
        [{"type": "http.request", "body": body, "more_body": False}],
    )
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    streamed = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert streamed.endswith(b"event: done\ndata: " + body + b"\n\n")


def test_a_body_that_stops_arriving_is_still_dropped():
    sent = _drive(
        _guarded_stream(idle_s=0.2, stream_s=0.0),
        _scope(13),
        [{"type": "http.request", "body": b'{"na', "more_body": True}],
    )
    assert sent[0]["status"] == 408
    assert b"stopped arriving" in sent[1]["body"]


def test_a_body_that_trickles_is_dropped_at_its_total_deadline():
    """A whole body has a deadline besides the per-chunk one (with only that, one byte every
    20 s would stay open for ever): here a byte every 0.1 s (never idle for the 0.5-s
    per-chunk limit) is dropped once the 0.4-s total has passed."""
    from cantor_desktop.node.guard import Guard

    async def app(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = Guard(app, token=lambda: "t", body_idle_s=0.5, body_grace_s=0.4, body_min_rate=1e9)

    async def go():
        sent: list[dict] = []
        got = 0

        async def receive():
            nonlocal got
            await asyncio.sleep(0.1)
            got += 1
            return {"type": "http.request", "body": b" ", "more_body": True}

        async def send(message):
            sent.append(message)

        # the body never ends by itself: only the total deadline ends this call
        await asyncio.wait_for(guard(_scope(1000), receive, send), 5)
        return sent, got

    sent, got = run(go())
    assert sent[0]["status"] == 408 and b"did not arrive whole within" in sent[1]["body"]
    assert got >= 2  # bytes kept coming (the per-chunk limit never fired)


def test_the_body_deadline_grows_with_the_size_announced():
    from cantor_desktop.node.guard import BODY_GRACE_S, BODY_MIN_RATE, Guard

    guard = Guard(lambda *a: None, token=lambda: "t")
    assert guard.body_deadline_s(_scope(300), 2**20) == BODY_GRACE_S + 300 / BODY_MIN_RATE
    upload = guard.body_deadline_s(_scope(64 * 2**20), 256 * 2**20)
    assert upload == BODY_GRACE_S + 256  # 64 MiB at 256 KiB/s
    unannounced = {**_scope(0), "headers": [(b"host", b"127.0.0.1:7823")]}
    assert guard.body_deadline_s(unannounced, 2**20) == BODY_GRACE_S + 4  # its cap
