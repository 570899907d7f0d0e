"""The app's, the CLI's and node_process's link to a node — NodeClient over httpx — against
real sockets: servers on 127.0.0.1 that answer the way a node (or a node in trouble, or a
stranger) does, and a real node. What the hand-written HTTP/1.1 client (node_http.py) did
well stays true here: kept-alive connections, no redirect and no proxy, percent-encoded
paths, a song never sent twice, a refusal seen over a broken upload, SSE lines whole,
timeouts in words, and a cancellation never lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile

import pytest

from cantor_desktop.client.nodeclient import NO_NODE, STRANGER, NodeClient, NodeError, which_node

from support.node import Node, write_config

SONG_ID = "0123456789abcdef"


def health_proof(token: str, challenge: str, port: int) -> bytes:
    """What a node that holds ``token`` answers to a challenge (cantor_desktop.auth.proof)."""
    import json

    from cantor_desktop.auth import proof

    answer = proof.answer(token, challenge, port)
    return json.dumps({"status": "ok", "version": "x", "port": port, "proof": answer}).encode()


async def _server(handle, holds: str | None = "t"):
    """A TCP server on 127.0.0.1 running ``handle(reader, writer)`` per connection; it
    counts the connections it accepted. A server that ``holds`` a token proves it, as a node
    does: a connection whose first request is the client's challenge to ``/v1/health`` gets
    the proof and is closed, and is not counted (``holds=None``: the handler answers it)."""
    accepted = []

    async def serve(reader, writer):
        pump = None
        try:
            if holds is not None:
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n")[0].decode()
                if "/v1/health?challenge=" in line:
                    challenge = line.split("challenge=")[1].split()[0]
                    port = writer.get_extra_info("sockname")[1]
                    writer.write(_answer(health_proof(holds, challenge, port)))
                    await writer.drain()
                    return
                replay = asyncio.StreamReader()  # the handler reads the request from its start
                replay.feed_data(head)
                pump = asyncio.create_task(_pump(reader, replay))
                reader = replay
            accepted.append(writer)
            await handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if pump is not None:
                pump.cancel()
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", accepted


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamReader) -> None:
    while data := await source.read(65536):
        sink.feed_data(data)
    sink.feed_eof()


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


async def _answer_forever(reader, writer, body: bytes = b'{"status": "ok"}') -> None:
    while True:  # kept alive, as a node does
        await _read_request(reader)
        writer.write(_answer(body))
        await writer.drain()


def test_a_kept_alive_connection_serves_the_next_request():
    async def go():
        server, url, accepted = await _server(_answer_forever)
        async with server, NodeClient(url, token="t") as node:
            answers = [await node.health() for _ in range(5)]
        return answers, len(accepted)

    answers, connections = asyncio.run(go())
    assert answers == [{"status": "ok"}] * 5 and connections == 1


def test_a_connection_the_node_closed_while_idle_is_not_used_again():
    """uvicorn closes a kept-alive connection after a while idle: the next request goes on
    a new connection, not into the closed one."""

    async def go():
        hung_up = asyncio.Event()

        async def handle(reader, writer):
            await _read_request(reader)
            writer.write(_answer(b'{"ok": true}'))  # keep-alive by HTTP/1.1's default…
            await writer.drain()
            writer.close()  # …then closed while idle
            await writer.wait_closed()
            hung_up.set()

        server, url, accepted = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            first = await node.system()
            await hung_up.wait()
            second = await node.system()
        return first, second, len(accepted)

    first, second, connections = asyncio.run(go())
    assert first == second == {"ok": True} and connections == 2


def test_a_song_is_never_queued_twice():
    """The node read the POST and the connection broke before its answer: the client says
    so; it does not send the song again (the node may have queued it)."""
    posts = []

    async def handle(reader, writer):
        while True:
            _head, body = await _read_request(reader)
            posts.append(body)
            if len(posts) == 1:
                writer.write(_answer(b'{"id": "%s", "state": "queued"}' % SONG_ID.encode()))
                await writer.drain()
            else:
                return  # read it, then hang up unanswered

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            await node.submit_song({"caption": "one"})
            with pytest.raises(NodeError) as caught:
                await node.submit_song({"caption": "two"})
        return caught.value

    error = asyncio.run(go())
    assert posts == [b'{"caption":"one"}', b'{"caption":"two"}']  # "two" sent once
    assert error.unreachable and "cannot reach the node" in error.message


def test_a_file_that_cannot_be_read_fails_the_upload_at_once_with_its_own_error(tmp_path):
    """The body's source fails (here a folder given for a file): its own error, now — not
    the node's 408 (nor a wait for it, the node here never answers)."""

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # a node waiting for the rest

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            with pytest.raises(IsADirectoryError):
                await asyncio.wait_for(node.upload(tmp_path), 30)

    asyncio.run(go())


def test_a_refusal_sent_before_the_upload_was_read_is_named_as_far_as_it_can_be(tmp_path):
    """The node refuses an upload from its head (too large for it, a wrong token), answers
    and hangs up while the client still sends. Over httpx the answer is read only when it
    came before the write failed (over asyncio the unread bytes go with the connection; the
    hand-written client kept them): whichever happens, the user learns what was refused and
    why, or where to look."""
    song = tmp_path / "long.wav"
    song.write_bytes(b"x" * (16 << 20))  # far more than the sockets hold

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            _answer(
                b'{"error": {"message": "too big (at most 1 MiB)", "field": "file"}}',
                b"413 Payload Too Large",
                b"connection: close\r\n",
            )
        )
        await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            with pytest.raises(NodeError) as caught:
                await node.upload(song)
        return caught.value

    error = asyncio.run(go())
    if error.status:  # the answer was read
        assert (error.status, error.message, error.field) == (
            413,
            "too big (at most 1 MiB)",
            "file",
        )
    else:
        assert error.message.startswith("the upload of long.wav to the node at http://127.0.0.1:")
        assert " of 16.0 MiB (" in error.message and error.message.endswith("its log says why")


def test_sse_lines_split_anywhere_arrive_whole():
    """Chunked, with each line's ending cut between two chunks (\\r here, \\n there)."""
    events = (
        b'event: hello\r\ndata: {"songs": 0}\r\n\r\n'
        b": a comment\r\n\r\n"
        b'event: progress\r\ndata: {"p": 1}\r\n\r\n'
        b"event: note\r\ndata: two\r\ndata: lines\r\n\r\n"
    )
    # every \r\n cut in two (a piece ends on \r, the next begins with \n), and the pieces
    # cut again mid-line
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
        async with server, NodeClient(url, token="t") as node:
            return [pair async for pair in node.all_events()]

    assert asyncio.run(go()) == [
        ("hello", {"songs": 0}),
        ("progress", {"p": 1}),
        ("note", "two\nlines"),
    ]


def test_a_stream_waits_for_a_quiet_node_past_the_read_timeout():
    """A song's events may be minutes apart (a long render): a stream has no read timeout,
    only the connect one; the same client's plain requests keep theirs."""

    async def handle(reader, writer):
        head, _ = await _read_request(reader)
        if b"/v1/events" not in head:
            await reader.read()  # a plain request: never answered
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1.0)  # five read timeouts of silence
        writer.write(b'event: progress\ndata: {"p": 1}\n\n')
        await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t", timeout=0.2) as node:
            events = [pair async for pair in node.all_events()]
            with pytest.raises(NodeError) as caught:
                await node.system()
        return events, caught.value

    events, error = asyncio.run(go())
    assert events == [("progress", {"p": 1})]
    assert error.unreachable and "the node sent nothing for 0.2 s" in error.message


def test_an_answer_cut_short_is_an_error(tmp_path):
    async def handle(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
        await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            with pytest.raises(NodeError) as caught:
                await node.audio(SONG_ID, tmp_path / "takes" / "take.flac")
        return caught.value

    error = asyncio.run(go())
    assert error.unreachable and "lost the node" in error.message
    assert list((tmp_path / "takes").iterdir()) == []  # no take, nor a part of one


def test_a_stream_left_before_its_end_takes_its_connection_with_it():
    """A reader that stops early (an SSE stream closed, a download cancelled) leaves the
    rest of the answer on the wire: that connection must never carry the next request."""
    requests = []

    async def handle(reader, writer):
        while True:
            head, _ = await _read_request(reader)
            requests.append(head.split(b" ")[1])
            if b"/v1/events" in head:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: 100000\r\n\r\nevent: hello\ndata: {}\n\n"
                )
                await writer.drain()
                await reader.read()  # open until the client lets go
                return
            writer.write(_answer(b'{"status": "ok"}'))
            await writer.drain()

    async def go():
        server, url, accepted = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            for _ in range(2):
                async with contextlib.aclosing(node.all_events()) as events:
                    async for event, _data in events:
                        assert event == "hello"
                        break
            health = await node.health()
            return health, len(accepted)

    health, connections = asyncio.run(go())
    assert health == {"status": "ok"} and connections == 3
    assert requests == [b"/v1/events", b"/v1/events", b"/v1/health"]


def test_silence_past_the_read_timeout_and_a_closed_port_are_named():
    async def handle(reader, writer):
        await _read_request(reader)
        await reader.read()  # silent until the client lets go

    async def go():
        server, url, _ = await _server(handle)
        async with server:
            async with NodeClient(url, token="t", timeout=0.2) as node:
                with pytest.raises(NodeError) as slow:
                    await node.health()
        async with NodeClient(url, token="t") as node:  # the server is gone: nothing listens
            with pytest.raises(NodeError) as gone:
                await node.health()
        assert await which_node(url) == NO_NODE
        return url, slow.value, gone.value

    url, slow, gone = asyncio.run(go())
    assert slow.unreachable and slow.message.endswith("the node sent nothing for 0.2 s")
    assert gone.unreachable and gone.message.startswith(f"cannot reach the node at {url}: ")
    assert "All connection attempts failed" not in gone.message  # the OS's reason instead


def test_the_nodes_refusal_keeps_its_message_and_field():
    answers = {
        b"/v1/songs": (
            b"422 Unprocessable Entity",
            b'{"error": {"message": "must be from 30 to 300", "field": "bpm", '
            b'"type": "invalid_request"}}',
        ),
        b"/v1/config": (b"500 Internal Server Error", b"the node broke"),  # not JSON
    }

    async def handle(reader, writer):
        while True:
            head, _ = await _read_request(reader)
            status, body = answers[head.split(b" ")[1]]
            writer.write(_answer(body, status))
            await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url, token="t") as node:
            with pytest.raises(NodeError) as refused:
                await node.submit_song({"caption": "x", "bpm": 3})
            with pytest.raises(NodeError) as broken:
                await node.config()
        return refused.value, broken.value

    refused, broken = asyncio.run(go())
    assert (refused.status, refused.field, refused.type) == (422, "bpm", "invalid_request")
    assert refused.message == "must be from 30 to 300" and not refused.unreachable
    assert (broken.status, broken.message, broken.field) == (500, "the node broke", None)


def test_a_node_behind_a_path_gets_its_requests_there_percent_encoded():
    seen = []

    async def handle(reader, writer):
        while True:  # kept alive, as a node does
            head, body = await _read_request(reader)
            seen.append((head.split(b"\r\n")[0], body))
            writer.write(_answer(b'{"songs": []}'))
            await writer.drain()

    async def go():
        server, url, _ = await _server(handle)
        async with server, NodeClient(url + "/cantor/", token="t") as node:
            await node.delete_song(SONG_ID, delete_files=True)
            await node.songs(state="done")
            await node.patch_config({"songs.format": "flac"})
            await node.delete_model("my song é?#1")  # named after a file
            await node.remove_adapter("a/b")

    asyncio.run(go())
    assert seen == [
        (b"DELETE /cantor/v1/songs/%s?delete_files=true HTTP/1.1" % SONG_ID.encode(), b""),
        (b"GET /cantor/v1/songs?state=done HTTP/1.1", b""),
        (b"PATCH /cantor/v1/config HTTP/1.1", b'{"songs.format":"flac"}'),
        (b"DELETE /cantor/v1/models/my%20song%20%C3%A9%3F%231 HTTP/1.1", b""),
        (b"DELETE /cantor/v1/adapters/a%2Fb HTTP/1.1", b""),
    ]


def test_a_redirect_is_never_followed_and_the_token_stays_with_the_node():
    """A node never redirects; an address that does (a captive portal, a stranger's server)
    gets no second request, and whoever it names never sees the token."""

    async def go():
        elsewhere, other_url, reached = await _server(_answer_forever)

        async def redirect(reader, writer):
            while True:
                await _read_request(reader)
                writer.write(
                    b"HTTP/1.1 307 Temporary Redirect\r\nlocation: %s/v1/health\r\n"
                    b"content-length: 0\r\n\r\n" % other_url.encode()
                )
                await writer.drain()

        server, url, _ = await _server(redirect, holds="secret")
        async with elsewhere, server, NodeClient(url, token="secret") as node:
            with pytest.raises(NodeError) as caught:
                await node.health()
            with pytest.raises(NodeError):
                async for _ in node.all_events():
                    pass
            who = await which_node(url)
        return caught.value, who, len(reached), other_url

    error, who, reached, other_url = asyncio.run(go())
    assert error.status == 307 and f"{other_url}/v1/health" in error.message
    assert "redirect" in error.message
    assert who == STRANGER and reached == 0  # it answers, and is not this home's node


def test_no_proxy_from_the_environment_sees_the_node_or_its_token(monkeypatch):
    """A proxy set for the browser (HTTP_PROXY, ALL_PROXY) is not the way to the node: a
    request for it goes straight there, and the proxy never sees the token."""

    async def go():
        proxy, proxy_url, through_proxy = await _server(_answer_forever)
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy_url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        server, url, direct = await _server(_answer_forever, holds="secret")
        async with proxy, server, NodeClient(url, token="secret") as node:
            await node.system()
            return len(direct), len(through_proxy)

    assert asyncio.run(go()) == (1, 0)


def test_a_cancelled_request_is_cancelled_and_closes_its_connection():
    """The app cancels a request (a page left, a click again): the task ends cancelled —
    never with an answer as if nothing had been asked — at whatever point the cancellation
    lands, and a request cut short closes its connection (the node sees it go)."""
    hung_up = []

    async def go():
        arrived = asyncio.Event()

        async def silent(reader, writer):
            await _read_request(reader)
            arrived.set()
            hung_up.append(await reader.read() == b"")  # the client's side closed

        server, url, _ = await _server(silent)
        async with server, NodeClient(url, token="t") as node:
            waiting = asyncio.create_task(node.health())
            await arrived.wait()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            for _ in range(200):
                if hung_up:
                    break
                await asyncio.sleep(0.01)

        fast, fast_url, _ = await _server(_answer_forever)
        lost = []
        async with fast, NodeClient(fast_url, token="t") as node:
            for steps in range(60):  # the cancellation at each await a request makes, in turn

                async def ask():
                    return await node.health()

                task = asyncio.create_task(ask())
                for _ in range(steps):
                    await asyncio.sleep(0)
                if task.cancel():
                    try:
                        answer = await task
                        lost.append((steps, answer))
                    except asyncio.CancelledError:
                        pass
            assert await node.health() == {"status": "ok"}  # the client still works
        return lost

    lost = asyncio.run(go())
    assert hung_up == [True]
    assert lost == []


def test_a_401_makes_the_client_look_up_this_homes_newer_token_once(cantor_home, monkeypatch):
    """The app's first run: its client started before the node made the token. After a
    401 it looks the token up again and sends the request once more; a node that still
    refuses gets its 401 through."""
    from cantor_desktop.auth.access import TOKEN_ENV

    monkeypatch.setenv(TOKEN_ENV, "old")
    seen = []

    async def handle(reader, writer):
        while True:
            head, _ = await _read_request(reader)
            line = head.split(b"\r\n")[0].decode()
            if "/v1/health?challenge=" in line:  # it proves the token it holds now
                challenge = line.split("challenge=")[1].split()[0]
                port = writer.get_extra_info("sockname")[1]
                held = os.environ[TOKEN_ENV]
                writer.write(_answer(health_proof(held, challenge, port)))
                await writer.drain()
                continue
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
        server, url, _ = await _server(handle, holds=None)
        async with server, NodeClient(url) as node:
            first = await node.system()
            with pytest.raises(NodeError) as refused:
                await node.config()
            return first, refused.value.status

    first, status = asyncio.run(go())
    assert first == {"ok": True} and status == 401
    assert seen == [b"old", b"new", b"new"]  # once more after the first 401 only


def test_a_whole_conversation_with_a_real_node(cantor_home):
    """Health, a song queued, its events to the end, its audio, a refusal: with the node
    itself (uvicorn) on the other side."""
    write_config(cantor_home)

    async def go():
        node = await Node(cantor_home).start()
        try:
            async with NodeClient(node.url, token=node.proc.token) as client:
                health = await client.health()
                sid = await client.submit_song(
                    {
                        "caption": "a short test",
                        "lyrics": "[Instrumental]",
                        "duration": 10,
                        "model": "sketch",
                        "seed": 1,
                    }
                )
                events = [event async for event, _ in client.events(sid)]
                with tempfile.TemporaryDirectory() as tmp:
                    path = await client.audio(sid, tmp)
                    size = path.stat().st_size
                with pytest.raises(NodeError) as refused:
                    await client.submit_song({"caption": "x", "duration": -1})
            return health, events, size, refused.value
        finally:
            await node.stop()

    health, events, size, refused = asyncio.run(go())
    assert health["status"] == "ok" and "home" not in health  # it tells strangers nothing
    assert events[-1] == "done" and size > 1000
    assert refused.status == 422 and refused.field == "duration"
