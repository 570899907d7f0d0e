"""The node's HTTP/1.1 client (h11 over asyncio streams) against real sockets: servers on
127.0.0.1 that answer the way a node — or a node in trouble — does, and a real node."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from cantor_desktop.node_http import ConnectError, NodeHTTP, ReadTimeout, TransportError

from support.node import Node, write_config


async def _server(handle):
    """A TCP server on 127.0.0.1 running ``handle(reader, writer)`` per connection; it
    counts the connections it accepted."""
    accepted = []

    async def serve(reader, writer):
        accepted.append(writer)
        try:
            await handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", accepted


async def _read_request(reader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, await reader.readexactly(length) if length else b""


def _answer(body: bytes, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\ncontent-type: application/json\r\n"
        + extra
        + b"content-length: %d\r\n\r\n" % len(body)
        + body
    )


def test_a_kept_alive_connection_serves_the_next_request():
    async def handle(reader, writer):
        while True:
            head, _ = await _read_request(reader)
            writer.write(_answer(b'{"n": 1}'))
            await writer.drain()

    async def go():
        server, url, accepted = await _server(handle)
        async with server, NodeHTTP(url) as http:
            answers = [(await http.request("GET", "/v1/health")).json() for _ in range(5)]
        return answers, len(accepted)

    answers, connections = asyncio.run(go())
    assert answers == [{"n": 1}] * 5 and connections == 1


def test_a_connection_the_node_closed_as_it_was_reused_is_replaced_for_a_get():
    """uvicorn closes a kept-alive connection after a while idle; when the close crosses
    the next request, a request that may be sent twice is sent again on a new connection."""

    async def handle(reader, writer):
        await _read_request(reader)
        writer.write(_answer(b'{"ok": true}'))  # keep-alive by HTTP/1.1's default…
        await writer.drain()
        await reader.read(1)  # …then hang up at the next request

    async def go():
        server, url, accepted = await _server(handle)
        async with server, NodeHTTP(url) as http:
            first = (await http.request("GET", "/v1/songs")).json()
            second = (await http.request("GET", "/v1/songs")).json()
        return first, second, len(accepted)

    first, second, connections = asyncio.run(go())
    assert first == second == {"ok": True} and connections == 2


def test_a_song_is_never_queued_twice_by_a_retry():
    """The node read the POST and the connection broke before its answer: the client says
    so; it does not send the song again (the node may have queued it)."""
    posts = []

    async def handle(reader, writer):
        while True:
            head, body = await _read_request(reader)
            posts.append(body)
            if len(posts) == 1:
                writer.write(_answer(b'{"id": "a"}'))
                await writer.drain()
            else:
                return  # read it, then hang up unanswered

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url) as http:
            await http.request("POST", "/v1/songs", json={"caption": "one"})
            with pytest.raises(TransportError) as caught:
                await http.request("POST", "/v1/songs", json={"caption": "two"})
        return str(caught.value)

    message = asyncio.run(go())
    assert posts == [b'{"caption":"one"}', b'{"caption":"two"}']  # "two" sent once
    assert "without an answer" in message


def test_a_file_that_cannot_be_read_fails_the_upload_at_once_with_its_own_error():
    """The body's source fails (a drive unplugged, no permission): its error, now — not the
    node's 408 thirty seconds later."""

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # a node waiting for the rest

    async def body():
        yield b"x" * 1000
        raise PermissionError(13, "Permission denied", "song.wav")

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url) as http:
            started = asyncio.get_running_loop().time()
            with pytest.raises(PermissionError):
                await http.request("POST", "/v1/uploads", content=body(), timeout=None)
            return asyncio.get_running_loop().time() - started

    assert asyncio.run(go()) < 5


def test_sse_lines_split_anywhere_arrive_whole():
    """Chunked, with each line's ending cut between two chunks (\\r here, \\n there)."""
    events = b'event: progress\r\ndata: {"p": 1}\r\n\r\nevent: done\r\ndata: {"p": 2}\r\n\r\n'
    # every \r\n cut in two (a piece ends on \r, the next begins with \n), and the
    # pieces cut again mid-line
    halves = events.replace(b"\r\n", b"\r\0\n").split(b"\0")
    pieces = [p for half in halves for p in (half[:5], half[5:]) if p]

    async def handle(reader, writer):
        await _read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url) as http:
            async with http.stream("GET", "/v1/events", timeout=None) as response:
                return [line async for line in response.aiter_lines()]

    assert asyncio.run(go()) == [
        "event: progress",
        'data: {"p": 1}',
        "",
        "event: done",
        'data: {"p": 2}',
        "",
    ]


def test_a_refusal_sent_before_the_upload_was_read_is_what_the_caller_sees():
    """The node's size cap answers 413 and hangs up mid-upload: the answer, not the broken
    pipe, is what the client reports."""

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            _answer(
                b'{"error": {"message": "too big"}}',
                b"413 Payload Too Large",
                b"connection: close\r\n",
            )
        )
        await writer.drain()

    async def body():
        for _ in range(256):
            yield b"x" * 65536  # 16 MiB: far more than the socket holds
            await asyncio.sleep(0)

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url) as http:
            response = await http.request(
                "POST", "/v1/uploads", content=body(), headers={"content-length": str(256 * 65536)}
            )
            return response.status_code, response.json()

    status, answer = asyncio.run(go())
    assert status == 413 and answer["error"]["message"] == "too big"


def test_an_answer_cut_short_is_an_error():
    async def handle(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
        await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url) as http:
            with pytest.raises(TransportError):
                await http.request("GET", "/v1/songs/x/audio")

    asyncio.run(go())


def test_a_stream_left_before_its_end_takes_its_connection_with_it():
    """A reader that stops early (an SSE stream closed, a download cancelled) leaves the
    rest of the answer on the wire: that connection must never carry the next request."""

    async def handle(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n" + b"x" * 10)
        await writer.drain()
        await reader.read()  # open until the client lets go

    async def go():
        server, url, accepted = await _server(handle)
        async with server, NodeHTTP(url, timeout=5) as http:
            for _ in range(2):
                async with http.stream("GET", "/v1/events") as response:
                    async for chunk in response.aiter_bytes():
                        assert chunk == b"x" * 10
                        break
            return len(accepted)

    assert asyncio.run(go()) == 2


def test_silence_past_the_read_timeout_and_a_closed_port_are_named():
    async def handle(reader, writer):
        await _read_request(reader)
        await reader.read()  # silent until the client lets go

    async def go():
        server, url, _ = await _server(handle)
        async with server:
            async with NodeHTTP(url, timeout=0.2) as http:
                with pytest.raises(ReadTimeout):
                    await http.request("GET", "/v1/health")
        async with NodeHTTP(url) as http:  # the server is gone: nothing listens there
            with pytest.raises(ConnectError):
                await http.request("GET", "/v1/health")

    asyncio.run(go())


def test_the_apps_node_link_loads_no_httpx_and_no_openssl(cantor_home):
    """The app's whole conversation with a real node — health, a song queued, its events to
    the end, its audio — without httpx, httpcore or anyio in the process (~8 MiB of the
    idle window), nor OpenSSL (~5 MiB) when asyncio was imported as the app imports it."""
    write_config(cantor_home)
    code = r"""
from cantor_desktop.openssl_later import import_asyncio_without_ssl
assert import_asyncio_without_ssl()
import asyncio, sys, tempfile
import cantor_desktop.ui.node_link, cantor_desktop.node_process, cantor_desktop.ui.instance
from cantor_desktop.access import home_key
from cantor_desktop.ui.instance import instance_name
from cantor_desktop.nodeclient import NodeClient

async def main(url, token):
    async with NodeClient(url, token=token) as node:     # as the app's child node tells it
        assert (await node.health())["status"] == "ok"
        sid = await node.submit_song({"caption": "a short test", "lyrics": "[Instrumental]",
                                      "duration": 10, "model": "sketch", "seed": 1})
        final = [e async for e, _ in node.events(sid)][-1]
        with tempfile.TemporaryDirectory() as tmp:
            path = await node.audio(sid, tmp)
            size = path.stat().st_size
    heavy = sorted({m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}
                   & {"httpx", "httpcore", "anyio", "click", "rich", "pygments", "_ssl",
                      "_hashlib"})
    print(final, size > 1000, heavy, len(home_key()), len(instance_name()))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

    async def go():
        node = await Node(cantor_home).start()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                code,
                node.url,
                node.proc.token,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 120)
            return out.decode().strip(), err.decode()
        finally:
            await node.stop()

    out, err = asyncio.run(go())
    assert out == "done True [] 16 23", err


def test_a_node_behind_a_path_gets_its_requests_there_with_their_query():
    seen = []

    async def handle(reader, writer):
        while True:  # kept alive, as a node does
            head, body = await _read_request(reader)
            seen.append((head.split(b"\r\n")[0], body))
            writer.write(_answer(b"{}"))
            await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeHTTP(url + "/cantor/") as http:
            await http.request(
                "DELETE", "/v1/songs/abc", params={"delete_files": True, "skip": None}
            )
            await http.request("PATCH", "/v1/config", json={"songs.format": "flac"})
            await http.request("DELETE", "/v1/models/my song é")  # a file's name

    asyncio.run(go())
    assert seen == [
        (b"DELETE /cantor/v1/songs/abc?delete_files=true HTTP/1.1", b""),
        (b"PATCH /cantor/v1/config HTTP/1.1", b'{"songs.format":"flac"}'),
        (b"DELETE /cantor/v1/models/my%20song%20%C3%A9 HTTP/1.1", b""),
    ]


def test_lines_are_split_in_one_pass_however_many_a_chunk_holds():
    """A pull's progress arrives in bursts: one read can hold thousands of SSE lines. Cutting
    them one by one off the front of the text was quadratic, and stalled the app's window
    for ~90 ms a burst (bench/app.py); four times the lines must take about four times as
    long, not sixteen."""
    import time

    from cantor_desktop.node_http import Response

    def seconds(lines: int) -> float:
        blob = b'data: {"p": 1}\n' * lines

        async def read() -> int:
            response = Response.__new__(Response)

            async def one_chunk():
                yield blob

            response.aiter_bytes = one_chunk
            return sum([1 async for _ in response.aiter_lines()])

        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            assert asyncio.run(read()) == lines
            best = min(best, time.perf_counter() - start)
        return best

    small, large = seconds(8_000), seconds(32_000)
    assert large / small < 8, (small, large)


def test_a_401_makes_the_client_look_up_this_homes_newer_token_once(cantor_home, monkeypatch):
    """The app's first run: its client started before the node made the token. After a
    401 it looks the token up again and sends the request once more; a node that still
    refuses gets its 401 through."""
    from cantor_desktop.access import TOKEN_ENV
    from cantor_desktop.nodeclient import NodeClient, NodeError

    monkeypatch.setenv(TOKEN_ENV, "old")
    seen = []

    async def handle(reader, writer):
        while True:
            head, _ = await _read_request(reader)
            token = next(
                (
                    line.split(b" ")[-1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"authorization:")
                ),
                b"",
            )
            seen.append(token)
            if token == b"old":
                os.environ[TOKEN_ENV] = "new"  # the node made its token meanwhile
            ok = token == b"new" and b"/v1/system" in head
            writer.write(
                _answer(b'{"ok": true}')
                if ok
                else _answer(b'{"error": {"message": "a token is needed"}}', b"401 Unauthorized")
            )
            await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url) as node:
            first = await node.system()
            with pytest.raises(NodeError) as refused:
                await node.config()
            return first, refused.value.status

    first, status = asyncio.run(go())
    assert first == {"ok": True} and status == 401
    assert seen == [b"old", b"new", b"new"]  # once more after the first 401 only
