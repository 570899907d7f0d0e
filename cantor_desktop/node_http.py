"""HTTP/1.1 to a Cantor node: h11 over asyncio streams, the transport under ``NodeClient``.

The node speaks plain HTTP/1.1 with JSON and Server-Sent Events, and the app talks to it
for as long as it runs. httpx (with httpcore, anyio, idna and their 150 modules) cost the
app's idle window about 8 MiB for that; h11 — the protocol engine httpcore itself drives —
parses the same messages in 11 modules. The node keeps httpx for the downloads it makes on
the internet (redirects, proxies, HTTP/2-era servers); a node is none of those things.

What this does: keep-alive connections reused while idle (one retry when a reused one
turns out closed, for a request whose body can be sent again), streamed request bodies
(uploads) and streamed responses (SSE, audio), a connect timeout and a per-read timeout,
and TLS with certificate checks for an ``https://`` node. It never follows redirects and
never uses a proxy: requests go only to the node it was given.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import json as jsonlib
import re
import select
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Mapping
from urllib.parse import quote, urlencode, urlsplit

import h11

from .errors import CantorError
from .openssl_later import ssl_for_asyncio

READ_SIZE = 64 * 1024
IDLE_CONNECTIONS = 4
"""Kept open per client: the app's health poll, a song list and an event stream at once."""
DEFAULT = object()
"""``timeout=DEFAULT``: the client's own timeout (``None`` means no read timeout at all)."""
_LINE_END = re.compile(r"\r\n|\r|\n")
# Timeouts are asyncio.timeout(), never wait_for: on Python 3.11 wait_for loses a
# cancellation that arrives as its inner wait completes, and every read here waits — a
# cancelled song download or self-test carried on as if nothing had been asked.
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
"""Methods a request may be sent again with (RFC 9110 9.2.2) when its connection failed."""
PATH_SAFE = "/:@!$&'()*+,;=~%"
"""Kept as they are in a request's path; everything else is percent-encoded (as httpx did):
a model named after a file with a space or an accent must still reach the node."""


class TransportError(CantorError):
    """The node could not be reached, or the connection to it broke."""


class ConnectError(TransportError):
    """Nothing answered at the node's address (refused, unknown host, TLS refused)."""


class ReadTimeout(TransportError):
    """The node stopped answering for longer than the read timeout."""


class ConnectTimeout(ConnectError, ReadTimeout):
    """The connection was not made in time (both a connect and a timeout failure)."""


class Headers(dict):
    """Response headers by lower-case name; a repeated header's values joined by ", "."""

    def __init__(self, raw: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__()
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            self[key] = f"{self[key]}, {text}" if key in self else text

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass(frozen=True)
class Target:
    """Where the node is: scheme, host, port, the path it is served under (behind a reverse
    proxy), and the Host header for it."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> "Target":
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not a node address: {url!r} (expected http://HOST:PORT)")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@functools.lru_cache(maxsize=1)
def _tls_context():
    """Certificate checks as httpx made them: certifi's authorities when installed (a frozen
    app on macOS has no system store Python can find), else the system's. The app imports
    asyncio without ssl (openssl_later): this is where it gets it."""
    ssl = ssl_for_asyncio()
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


class _Wire(asyncio.Protocol):
    """A connection's bytes both ways. Unlike asyncio's StreamReader, it hands over what
    arrived before the node hung up, and only then the hang-up: a node that refuses an
    upload answers 413 and closes while the client still sends, and the reset must not
    swallow the answer that came first."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.ended = False  # the node sent EOF or the connection is lost
        self.lost: BaseException | None = None
        self._arrived = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        if len(self.received) > 4 * READ_SIZE and self.transport is not None:
            self.transport.pause_reading()  # the reader is behind: let TCP wait
        self._arrived.set()

    def eof_received(self) -> bool:
        self.ended = True
        self._arrived.set()
        return False  # close our side too

    def connection_lost(self, exc: BaseException | None) -> None:
        self.ended = True
        self.lost = exc or ConnectionResetError("the node closed the connection")
        self._arrived.set()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def read(self, timeout: float | None) -> bytes:
        """What arrived (waiting up to ``timeout`` for something), b"" at the end."""
        while not self.received and not self.ended:
            self._arrived.clear()
            async with asyncio.timeout(timeout):
                await self._arrived.wait()
        data = bytes(self.received)
        self.received.clear()
        if self.transport is not None and not self.ended:
            self.transport.resume_reading()
        return data

    async def write(self, data: bytes, timeout: float | None) -> None:
        if self.lost is not None or self.transport is None or self.transport.is_closing():
            raise self.lost or ConnectionResetError("the connection is closed")
        self.transport.write(data)
        if not self._writable.is_set():
            async with asyncio.timeout(timeout):
                await self._writable.wait()
        if self.lost is not None:
            raise self.lost


class Connection:
    """One TCP (or TLS) connection and its h11 state."""

    def __init__(self, wire: _Wire):
        self.wire = wire
        self.h11 = h11.Connection(h11.CLIENT)
        self.reused = False
        self.closed = False

    @classmethod
    async def open(cls, target: Target, timeout: float | None) -> "Connection":
        tls = _tls_context() if target.scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _transport, wire = await loop.create_connection(
                    _Wire,
                    target.host,
                    target.port,
                    ssl=tls,
                    server_hostname=target.host if tls else None,
                )
        except asyncio.TimeoutError:
            raise ConnectTimeout(
                f"no answer from {target.host}:{target.port} within {timeout:g} s"
            ) from None
        except OSError as exc:  # refused, unreachable, unknown host, certificate refused
            raise ConnectError(_words(exc)) from None
        return cls(wire)

    @property
    def can_reuse(self) -> bool:
        """Idle, and the node has not hung up: asked of the socket itself, since its EOF may
        not have reached this loop yet (an idle connection the node closed must not carry a
        POST: that is not sent twice)."""
        if (
            self.closed
            or self.wire.ended
            or self.h11.our_state is not h11.IDLE
            or self.h11.their_state is not h11.IDLE
        ):
            return False
        sock = self.wire.transport.get_extra_info("socket") if self.wire.transport else None
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable  # an idle connection has nothing to say but EOF

    async def send(self, event: Any, timeout: float | None) -> None:
        data = self.h11.send(event)
        if data:
            await self.wire.write(data, timeout)

    async def next_event(self, timeout: float | None) -> Any:
        """The answer's next h11 event; the wire's failures as TransportError (the one place
        they are put in words)."""
        try:
            while True:
                event = self.h11.next_event()
                if event is not h11.NEED_DATA:
                    return event
                try:
                    data = await self.wire.read(timeout)
                except asyncio.TimeoutError:
                    raise ReadTimeout(f"the node sent nothing for {timeout:g} s") from None
                if (
                    not data
                    and self.wire.lost is not None
                    and not isinstance(self.wire.lost, ConnectionResetError)
                ):
                    raise self.wire.lost
                self.h11.receive_data(data)
        except h11.RemoteProtocolError as exc:
            raise TransportError(f"the node's answer broke off: {exc}") from None
        except OSError as exc:
            raise TransportError(_words(exc)) from None

    def close(self) -> None:
        """Drop the connection now (abort: nothing half-sent is flushed to a node that may
        have stopped reading)."""
        if not self.closed:
            self.closed = True
            if self.wire.transport is not None:
                self.wire.transport.abort()


def _words(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _write(conn: Connection, event: Any, timeout: float | None) -> BaseException | None:
    """Send one h11 event; the wire's failure returned (a write timeout as a ReadTimeout:
    the node stopped taking the request), a misuse of h11 raised."""
    try:
        await conn.send(event, timeout)
    except asyncio.TimeoutError:
        return ReadTimeout(f"the node took nothing of the request for {timeout:g} s")
    except OSError as exc:
        return exc
    except h11.LocalProtocolError as exc:
        raise TransportError(f"could not send the request: {exc}") from None
    return None


class Response:
    """A node's answer. ``content``/``json()`` once read (:meth:`aread`, or a non-streamed
    request); ``aiter_bytes``/``aiter_lines`` while streaming. :meth:`aclose` hands the
    connection back when the answer was read to its end, and closes it otherwise."""

    def __init__(
        self, client: "NodeHTTP", conn: Connection, head: h11.Response, timeout: float | None
    ):
        self.status_code = head.status_code
        self.reason_phrase = head.reason.decode("latin-1")
        self.headers = Headers(head.headers)
        self._client = client
        self._conn: Connection | None = conn
        self._timeout = timeout
        self._content: bytes | None = None
        self._ended = False

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise RuntimeError("the response was not read (await aread() first)")
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode(self._charset(), "replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)

    def _charset(self) -> str:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                try:
                    return codecs.lookup(value.strip('"')).name
                except LookupError:
                    break
        return "utf-8"

    async def aread(self) -> bytes:
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self._content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None or self._ended:
            return
        try:
            while True:
                event = await conn.next_event(self._timeout)
                if isinstance(event, h11.Data):
                    if event.data:
                        yield bytes(event.data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    self._ended = True
                    return
        finally:
            if self._ended:
                await self.aclose()

    async def aiter_lines(self) -> AsyncIterator[str]:
        """Lines without their ending (``\\r\\n``, ``\\n`` or ``\\r``), decoded as UTF-8."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = ""
        async with contextlib.aclosing(self.aiter_bytes()) as chunks:
            async for chunk in chunks:
                text = pending + decoder.decode(chunk)
                start = 0  # one pass: a chunk holds thousands of lines
                for end in _LINE_END.finditer(text):
                    if end.group() == "\r" and end.end() == len(text):
                        break  # maybe the first half of a \r\n
                    yield text[start : end.start()]
                    start = end.end()
                pending = text[start:]
        pending += decoder.decode(b"", final=True)
        for line in _LINE_END.split(pending.removesuffix("\r")) if pending else ():
            yield line

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._ended and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
            self._client._release(conn)
        else:
            conn.close()  # read only in part: the connection cannot be reused


Body = bytes | AsyncIterator[bytes] | None


class NodeHTTP:
    """Requests to one node (``base_url``); paths are relative to it."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float | None = 30.0,
        connect_timeout: float = 5.0,
        user_agent: str = "cantor",
    ):
        self.target = Target.parse(base_url)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.user_agent = user_agent
        self._idle: list[Connection] = []
        self._closed = False

    async def __aenter__(self) -> "NodeHTTP":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _release(self, conn: Connection) -> None:
        if self._closed or len(self._idle) >= IDLE_CONNECTIONS:
            conn.close()
        else:
            conn.reused = True
            self._idle.append(conn)

    async def _connection(self) -> Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.can_reuse:
                return conn
            conn.close()  # the node closed it while it was idle
        return await Connection.open(self.target, self.connect_timeout)

    def _head(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        length: int | None,
        streamed: bool,
    ) -> h11.Request:
        target = quote(
            self.target.prefix + (path if path.startswith("/") else "/" + path), safe=PATH_SAFE
        )
        if params:
            query = urlencode({k: _param(v) for k, v in params.items() if v is not None})
            if query:
                target += ("&" if "?" in target else "?") + query
        given = {k.lower(): v for k, v in (headers or {}).items()}
        given.setdefault("host", self.target.host_header)
        given.setdefault("user-agent", self.user_agent)
        given.setdefault("accept", "*/*")
        given.setdefault("accept-encoding", "identity")
        if "content-length" not in given:
            if length is not None:
                given["content-length"] = str(length)
            elif streamed:
                given["transfer-encoding"] = "chunked"
        return h11.Request(method=method, target=target, headers=list(given.items()))

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: Body = None,
        headers: Mapping[str, str] | None = None,
        timeout: Any = DEFAULT,
    ) -> Response:
        """Send a request and return its response with the body not yet read (stream it, or
        ``await response.aread()``); close it with ``await response.aclose()``."""
        if timeout is DEFAULT:
            timeout = self.timeout
        headers = dict(headers or {})
        if json is not None:
            content = jsonlib.dumps(json, separators=(",", ":")).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        streamed = content is not None and not isinstance(content, (bytes, bytearray))
        head = self._head(
            method, path, params, headers, None if streamed else len(content or b""), streamed
        )
        for attempt in (1, 2):
            conn = (
                await self._connection()
                if not streamed
                else await Connection.open(self.target, self.connect_timeout)
            )
            try:
                return await self._exchange(conn, head, content, timeout)
            except TransportError as exc:
                conn.close()
                # a kept-alive connection the node closed just as it was reused (no answer
                # began): once more on a new one, for a request that may be sent twice; a
                # song queued or cancelled is never sent again, nor a slow node asked twice
                if (
                    conn.reused
                    and attempt == 1
                    and method in IDEMPOTENT
                    and not isinstance(exc, ReadTimeout)
                ):
                    continue
                raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    async def _exchange(
        self, conn: Connection, head: h11.Request, content: Body, timeout: float | None
    ) -> Response:
        """Send the request and read the answer's head. A failure to write is kept, not
        raised: the node may have answered already (a refusal before it read the body), and
        that answer says more than the broken pipe. A failure of the body's own source (a
        file that cannot be read) is raised at once: the caller's error, not the wire's."""
        write_error = await _write(conn, head, timeout)
        if write_error is None and isinstance(content, (bytes, bytearray)):
            if content:
                write_error = await _write(conn, h11.Data(data=bytes(content)), timeout)
        elif write_error is None and content is not None:
            chunks = aiter(content)
            while write_error is None:
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                if chunk:
                    write_error = await _write(conn, h11.Data(data=chunk), timeout)
        if write_error is None:
            write_error = await _write(conn, h11.EndOfMessage(), timeout)
        try:
            while True:
                event = await conn.next_event(timeout)
                if isinstance(event, h11.Response):
                    return Response(self, conn, event, timeout)
                # an InformationalResponse (100 Continue): read on
        except TransportError as exc:
            if isinstance(write_error, TransportError):
                raise write_error from None
            if isinstance(exc, ReadTimeout):
                raise
            if conn.wire.ended:  # no answer began: the node hung up first
                raise TransportError(
                    "the node closed the connection without an answer"
                    + (f" ({_words(write_error)})" if write_error else "")
                ) from None
            raise TransportError(_words(write_error or exc)) from None

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, **kw: Any) -> AsyncIterator[Response]:
        """:meth:`send` as ``async with``: the response is closed when the block ends."""
        response = await self.send(method, path, **kw)
        try:
            yield response
        finally:
            await response.aclose()

    async def request(self, method: str, path: str, **kw: Any) -> Response:
        """:meth:`send`, with the body read and the connection handed back."""
        response = await self.send(method, path, **kw)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
