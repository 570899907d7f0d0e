"""NodeClient against a real node: the catalogue listing, and SSE responses closed by the
task that opened them however the reader stops (end, early stop, cancellation)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys

import pytest

import httpx

from cantor_desktop.client.nodeclient import NodeClient

from support.node import LONG, SHORT, Node, wait_for, write_config


class RecordingTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, noting which task opened and which first closed each
    response (the body's stream is closed when the response is)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(trust_env=False)
        self.responses: list[dict] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        record = {"path": request.url.path, "opened_by": asyncio.current_task(), "closed_by": None}
        self.responses.append(record)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_RecordedStream(response, record),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _RecordedStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, record: dict) -> None:
        self.response = response
        self.record = record

    async def __aiter__(self):
        async for chunk in self.response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        if self.record["closed_by"] is None:
            self.record["closed_by"] = asyncio.current_task()
        await self.response.aclose()


@pytest.fixture
def recorded() -> RecordingTransport:
    """A transport for NodeClient(transport=...) that records each response's tasks."""
    return RecordingTransport()


def _watch_unraisable():
    seen: list[str] = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(
        f"{u.exc_type.__name__}: {u.exc_value} ({u.object!r})"
    )
    return seen, old


def test_streams_are_closed_by_the_task_that_opened_them(cantor_home, recorded):
    write_config(cantor_home)
    seen, old_hook = _watch_unraisable()
    loop_errors: list[str] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, ctx: loop_errors.append(str(ctx.get("message")))
        )
        node = await Node(cantor_home).start()
        try:
            async with NodeClient(node.url, transport=recorded) as c:
                long_id = await c.submit_song(LONG)

                # 1. the reader stops early (aclosing closes the stream in this task)
                async with contextlib.aclosing(c.events(long_id)) as events:
                    async for event, _data in events:
                        if event == "progress":
                            break

                # 2. the reader is cancelled while waiting for the next event
                async def read_forever():
                    async for _event, _data in c.events(long_id):
                        pass

                reader = asyncio.create_task(read_forever())
                while not any(r["opened_by"] is reader for r in recorded.responses):
                    await asyncio.sleep(0.01)  # its stream is open: it waits in it
                reader.cancel()
                try:
                    await reader
                except asyncio.CancelledError:
                    pass
                await c.cancel(long_id)

                # 3. read to the final event, and stop the moment it arrives
                short_id = await c.submit_song(SHORT)
                final = None
                async for event, _data in c.events(short_id):
                    if event in ("done", "failed", "cancelled"):
                        final = event
                        break
                gc.collect()
                await wait_for(
                    lambda: all(
                        r["closed_by"] is not None
                        for r in recorded.responses
                        if r["path"].endswith("/events")
                    ),
                    what="every event stream closed",
                )
                gc.collect()
                await c.health()  # the client still works
                return recorded.responses, reader, final
        finally:
            await node.stop()

    try:
        responses, reader, final = asyncio.run(main())
        gc.collect()
    finally:
        sys.unraisablehook = old_hook
    assert final == "done"
    streams = [r for r in responses if r["path"].endswith("/events")]
    assert len(streams) == 3
    for record in streams:
        assert record["closed_by"] is not None, record
        assert record["closed_by"] is record["opened_by"], record
    assert streams[1]["opened_by"] is reader
    assert seen == [] and loop_errors == []


def test_the_final_event_comes_after_the_response_is_closed(cantor_home, recorded):
    """A reader that returns on ``done`` without closing the generator leaves nothing open."""
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with NodeClient(node.url, transport=recorded) as c:
                sid = await c.submit_song(SHORT)
                stream = c.events(sid)
                async for event, _data in stream:
                    if event == "done":
                        record = recorded.responses[-1]
                        at_done = (record["opened_by"], record["closed_by"])
                        break
                await stream.aclose()
                return at_done, asyncio.current_task()
        finally:
            await node.stop()

    (opened_by, closed_by), reader = asyncio.run(main())
    # closed before the reader saw "done", by the reading task itself
    assert closed_by is not None and closed_by is opened_by is reader


def test_models_all_lists_the_catalogue(cantor_home):
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                return await c.models(), await c.models(all=True)
        finally:
            await node.stop()

    local, everything = asyncio.run(main())
    assert [m["name"] for m in local["models"]] == ["sketch"]
    names = {m["name"] for m in everything["models"]}
    assert "sketch" in names and "acestep-v15-turbo-Q8_0" in names
    assert len(names) > 10
    assert everything["default"] == "sketch"


def test_early_stops_on_the_qt_loop_leave_no_generator_behind(cantor_home, qloop):
    """qasync's loop installs no async-generator hooks: without the client's care, a stream's
    inner generators were closed by the garbage collector ("async generator ignored
    GeneratorExit", when the client was httpx)."""
    from support.ui import run as run_on_qt

    write_config(cantor_home)
    seen, old_hook = _watch_unraisable()
    loop_errors: list[str] = []
    qloop.set_exception_handler(lambda _loop, ctx: loop_errors.append(str(ctx.get("message"))))

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                sid = await c.submit_song(LONG)
                for _ in range(3):
                    async with contextlib.aclosing(c.events(sid)) as events:
                        async for event, _data in events:
                            if event == "progress":
                                break
                gc.collect()
                # a window for a wrongly closed generator to be reported: what is checked is
                # that nothing comes (no event to wait for)
                await asyncio.sleep(0.2)
                gc.collect()
                await c.cancel(sid)
        finally:
            await node.stop()

    hooks = sys.get_asyncgen_hooks()
    try:
        run_on_qt(qloop, main(), timeout=60)
        gc.collect()
    finally:
        sys.unraisablehook = old_hook
        sys.set_asyncgen_hooks(*hooks)
    assert seen == [] and loop_errors == []
