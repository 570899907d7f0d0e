"""The node's connections and capacity: strangers give way to the owner, a head has a
deadline, tokenless requests have a budget of their own; and the node's proof of its token.

The rules on their own first (fake transports, the Guard driven directly), then a real node
on 127.0.0.1. The 2,000-connection flood against a real node is in
tests/faults/test_trust_faults.py."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import time

import pytest
from support.node import Node, wait_for, write_config

from cantor_desktop.auth import proof
from cantor_desktop.node.connections import Connections
from cantor_desktop.node.guard import Guard


class FakeTransport(asyncio.Transport):
    next_port = 40000

    def __init__(self):
        super().__init__()
        FakeTransport.next_port += 1
        self.peer = ("127.0.0.1", FakeTransport.next_port)
        self.closed = self.aborted = False

    def get_extra_info(self, name, default=None):
        return self.peer if name == "peername" else default

    def is_closing(self):
        return self.closed or self.aborted

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted = True


def test_when_connections_run_out_the_oldest_stranger_gives_way_never_the_owner():
    async def main():
        conns = Connections(most=3, head_timeout_s=60)
        a, b, c = FakeTransport(), FakeTransport(), FakeTransport()
        ca, cb, cc = conns.opened(a), conns.opened(b), conns.opened(c)
        conns.request_started(a.peer, owner=True)  # the owner's request on the oldest
        d = FakeTransport()
        cd = conns.opened(d)  # one too many: b (oldest waiting) is closed
        assert cd is not None and b.aborted and not a.aborted and not c.aborted
        conns.closed(cb)
        conns.request_done(a.peer)  # a is idle now: evictable, after the waiting ones
        e = FakeTransport()
        conns.opened(e)
        assert c.aborted and not a.aborted
        conns.closed(cc)
        conns.request_started(d.peer, owner=True)
        conns.request_started(e.peer, owner=True)
        f = FakeTransport()
        conns.opened(f)  # only an idle owner's connection is left to give way
        assert a.aborted
        conns.closed(ca)
        conns.request_started(f.peer, owner=True)
        g = FakeTransport()
        assert conns.opened(g) is None and g.aborted  # all three busy: the new one waits
        return conns.stats()

    stats = asyncio.run(main())
    assert stats["evicted"] == 3 and stats["refused"] == 1 and stats["open"] == 3


def test_a_head_that_does_not_arrive_in_time_closes_its_connection():
    async def main():
        conns = Connections(most=10, head_timeout_s=0.1)
        served, slow = FakeTransport(), FakeTransport()
        conns.opened(served), conns.opened(slow)  # served's head deadline comes first
        conns.request_started(served.peer, owner=False)
        await wait_for(lambda: slow.closed, what="the slow head's connection to close")
        busy_kept = not served.closed  # its deadline, had it been kept, has passed too
        conns.request_done(served.peer)  # after an answer, the next head has 0.1 s too
        await wait_for(lambda: served.closed, what="the idle connection to close")
        return busy_kept, conns.stats()["late_heads"]

    assert asyncio.run(main()) == (True, 2)


def test_uvicorn_builds_its_http_protocol_the_way_the_node_composes_it():
    """The node runs uvicorn's h11 protocol inside its own (connections.protocol), built
    with the keyword arguments uvicorn gives any ``http=`` class. If a uvicorn release
    changes them, this fails before a node does."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import Server

    assert list(inspect.signature(H11Protocol).parameters) == [
        "config",
        "server_state",
        "app_state",
        "_loop",
    ]
    source = inspect.getsource(Server.startup)
    assert "config.http_protocol_class(" in source
    for keyword in ("config=config", "server_state=self.server_state", "app_state="):
        assert keyword in source


def _scope(token: str | None, path: str = "/v1/health") -> dict:
    headers = [(b"host", b"127.0.0.1:7823")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "server": ("127.0.0.1", 7823),
        "client": ("127.0.0.1", 50000),
        "headers": headers,
    }


def test_tokenless_requests_have_a_budget_of_their_own():
    """Strangers past their small budget are 503 (and their connection closes); the owner's
    request meanwhile is answered."""

    release = asyncio.Event()
    waiting = []  # the requests the guard let through to the app

    async def app(scope, receive, send):
        waiting.append(scope)
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = Guard(app, token=lambda: "t", stranger_concurrency=2)

    async def one(token):
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        await guard(_scope(token), receive, send)
        return sent[0]["status"], dict(sent[0]["headers"]).get(b"connection")

    async def main():
        strangers = [asyncio.create_task(one(None)) for _ in range(5)]
        # two in the app, three refused: the budget is full before the owner asks
        await wait_for(lambda: len(waiting) == 2 and sum(t.done() for t in strangers) == 3)
        owner = asyncio.create_task(one("t"))
        await wait_for(lambda: len(waiting) == 3, what="the owner's request in the app")
        release.set()
        return [await t for t in strangers], await owner

    strangers, owner = asyncio.run(main())
    assert sorted(s for s, _ in strangers) == [200, 200, 503, 503, 503]
    assert all(close == b"close" for _, close in strangers)
    assert owner == (200, None)  # kept alive: the owner's connection is reused


# -- a real node ----------------------------------------------------------------------------


@pytest.fixture
def home(cantor_home):
    write_config(cantor_home)
    return cantor_home


def _get(port: int, target: str, token: str | None = None) -> tuple[int, dict, dict]:
    lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(
        line.decode().lower().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line
    )
    return status, headers, json.loads(body) if body else {}


def test_the_node_proves_its_token_and_tells_nothing_else(home):
    async def main():
        node = await Node(home).start()
        try:
            port, token = node.proc.port, node.proc.token
            challenge = proof.new_challenge()
            return (
                port,
                token,
                challenge,
                _get(port, "/v1/health"),
                _get(port, f"/v1/health?challenge={challenge}"),
                _get(port, "/v1/health?challenge=abc"),
                _get(port, f"/v1/health?challenge={challenge.upper()}"),
            )
        finally:
            await node.stop()

    port, token, challenge, plain, proved, short, upper = asyncio.run(main())
    assert plain[0] == 200 and set(plain[2]) == {"status", "version"}
    assert plain[1]["connection"] == "close"  # a stranger's connection ends with its answer
    status, _h, body = proved
    assert (
        status == 200
        and body["port"] == port
        and set(body)
        == {
            "status",
            "version",
            "port",
            "proof",
        }
    )
    assert proof.verify(token, challenge, port, body["proof"])
    assert not proof.verify(token, challenge, port + 1, body["proof"])  # bound to the port
    assert not proof.verify("another token", challenge, port, body["proof"])
    assert token not in json.dumps(body)
    for status, _h, body in (short, upper):
        assert status == 422 and body["error"]["field"] == "challenge"


def test_a_half_sent_head_is_dropped_and_an_idle_stranger_is_not_kept(home):
    """No H11Protocol subclass any more: the head deadline is the node's own (connections)."""
    from cantor_desktop.node.connections import HEAD_TIMEOUT_S

    async def main():
        node = await Node(home).start()
        try:
            port = node.proc.port
            half = socket.create_connection(("127.0.0.1", port), timeout=HEAD_TIMEOUT_S + 5)
            half.sendall(f"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
            start = time.monotonic()
            closed = await asyncio.to_thread(half.recv, 1)
            took = time.monotonic() - start
            half.close()
            return closed, took
        finally:
            await node.stop()

    closed, took = asyncio.run(main())
    assert closed == b"" and HEAD_TIMEOUT_S - 1 <= took <= HEAD_TIMEOUT_S + 4
