"""The one downloader: engines and models both fetch through `download()`.

What it guarantees:
- Bytes go to ``<dest>.part``; the file appears at ``dest`` only after its sha256 (and its
  size, when known) matched, via fsync + ``os.replace``. A failed hash deletes the part.
- A ``.part`` left by an earlier call (cancelled, cut, crashed) is resumed with
  ``Range: bytes=N-``: 206 → append (the total comes from Content-Range); 200 → the server
  ignored the range, start over; 416 → the part is complete (size equals the total) or
  stale (dropped, start over).
- No data for ``stall_timeout`` seconds, a network error, a 5xx, 408 or 429 → retry with
  exponential backoff, at most ``retries`` times in a row without progress (an attempt that
  added bytes resets the count, so a long download over a flaky link still finishes).
  Other 4xx are final; 401/403 raise `AuthRequired`. A host name that does not resolve
  before any byte of this call arrived (offline, no DNS) is final at once: retrying for
  half a minute would only make an offline user wait for the same error.
- Redirects are followed one by one; every hop must pass `config.check_download_url`
  (https, or http only to loopback). httpx drops ``Authorization`` on a hop to another
  origin.
- Free space is checked before the first byte when the size is known; ENOSPC while
  writing raises `DiskFull` and keeps what was written.
- Cancelling the task keeps the part for the next call.

Hashing and writing run on two worker threads so the event loop (the app's Qt loop) only
receives; they overlap on a multi-core machine. The receive path is tuned for fast links
(2 MiB socket reads while a body streams, no extra copies in h11, no loop wake-up per
finished batch): on loopback it costs ~1.2 CPU-s/GiB including sha256 (bench/download.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import hashlib
import os
import socket
import shutil
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from . import config
from .errors import CantorError
from .units import human_size  # noqa: F401 - the CLI and models import it from here

__all__ = [
    "Progress",
    "DownloadError",
    "HashMismatch",
    "HTTPStatus",
    "AuthRequired",
    "Stalled",
    "NotEnoughSpace",
    "DiskFull",
    "download",
    "check_free_space",
    "sha256_file",
    "part_path",
    "human_size",
]

BATCH = 1 << 20  # bytes handed to the writer and hash threads at a time
MAX_IN_FLIGHT = 8  # batches queued to each thread before the receiver waits
READ_SIZE = 2 << 20  # most bytes taken from the socket per read (see _widen_reads)
HASH_BLOCK = 1 << 20  # read size when hashing a file from disk
PROGRESS_INTERVAL = 0.1  # seconds between progress callbacks (≤ 10/s, plus a final one)
MAX_REDIRECTS = 20
MAX_BACKOFF = 60.0
RETRY_STATUSES = {408, 425, 429}


@dataclass(frozen=True)
class Progress:
    url: str
    dest: Path
    received: int  # bytes in the file so far (including a resumed part)
    total: int | None  # whole file size when known
    speed: float  # bytes/s, smoothed
    eta: float | None  # seconds left when total and speed are known
    resumed_from: int  # offset this transfer started from (0 = from scratch)

    @property
    def fraction(self) -> float | None:
        return self.received / self.total if self.total else None


class DownloadError(CantorError):
    """A download failed; the message names the URL or file and the reason."""

    def __init__(self, message: str, *, url: str | None = None, dest: Path | None = None):
        super().__init__(message)
        self.url = url
        self.dest = dest


class HashMismatch(DownloadError):
    pass


class HTTPStatus(DownloadError):
    def __init__(self, message: str, status: int, **kw):
        super().__init__(message, **kw)
        self.status = status


class AuthRequired(HTTPStatus):
    pass


class Stalled(DownloadError):
    pass


class NotEnoughSpace(DownloadError):
    def __init__(self, message: str, needed: int, free: int, **kw):
        super().__init__(message, **kw)
        self.needed = needed
        self.free = free


class DiskFull(DownloadError):
    pass


def check_free_space(folder: Path, needed: int) -> None:
    """Raise NotEnoughSpace when ``folder``'s file system has less than ``needed`` bytes free."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise NotEnoughSpace(
            f"Not enough disk space in {folder}: need {human_size(needed)}, "
            f"{human_size(free)} free",
            needed=needed,
            free=free,
        )


def sha256_file(path: Path | str, *, limit: int | None = None) -> str:
    """sha256 hex of a file (of its first ``limit`` bytes when given)."""
    return _hash_file(Path(path), limit).hexdigest()


def part_path(dest: Path) -> Path:
    dest = Path(dest)
    return dest.with_name(dest.name + ".part")


def _hash_file(path: Path, limit: int | None = None):
    h = hashlib.sha256()
    left = limit
    with open(path, "rb", buffering=0) as fh:
        while left is None or left > 0:
            buf = fh.read(HASH_BLOCK if left is None else min(HASH_BLOCK, left))
            if not buf:
                break
            h.update(buf)
            if left is not None:
                left -= len(buf)
    return h


class _Retry(Exception):
    """One attempt failed in a way worth retrying; ``error`` is what to raise if we give up."""

    def __init__(
        self,
        error: DownloadError,
        *,
        immediate: bool = False,
        retry_after: float | None = None,
        unresolved: bool = False,
    ):
        super().__init__(str(error))
        self.error = error
        self.immediate = immediate
        self.retry_after = retry_after
        self.unresolved = unresolved  # the host name did not resolve


class _Sink:
    """The .part file and its running sha256.

    Writing and hashing each have one worker thread, fed in order with the same batches, so
    the event loop only receives and the two overlap (hashlib and os.write release the GIL).
    Work handed to a thread is never cancelled (a skipped batch followed by a later one would
    leave a hole in the part): a cancelled task stops waiting, the threads finish, and
    close_now() waits for them.
    """

    def __init__(self, part: Path, url: str, dest: Path):
        self.part = part
        self.url = url
        self.dest = dest
        self.writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="download-write")
        self.hashing = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="download-hash")
        self.hasher = hashlib.sha256()
        self.length = 0  # bytes in the part (written)
        self.hashed = 0  # bytes fed to the hasher
        self.fd: int | None = None
        self.broken: DownloadError | None = None  # after a failed write nothing more is written
        self.pending: deque[concurrent.futures.Future] = deque()

    # --- worker-thread functions ---
    def _open(self, restart: bool) -> int:
        self._close()
        self.broken = None
        if restart or not self.part.exists():
            self.fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_BINARY, 0o644)
            self.hasher = hashlib.sha256()
            self.length = self.hashed = 0
        else:
            on_disk = self.part.stat().st_size
            if on_disk != self.length or self.hashed != self.length:
                # A part from an earlier call (or a short write): hash what is really there.
                self.hasher = _hash_file(self.part)
                self.length = self.hashed = on_disk
            self.fd = os.open(self.part, os.O_WRONLY | os.O_APPEND | _O_BINARY)
        return self.length

    def _hash(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.hasher.update(piece)
            self.hashed += len(piece)

    def _write(self, pieces: list[bytes]) -> None:
        if self.broken is not None:
            raise self.broken
        try:
            self._write_all(pieces)
        except DownloadError as exc:
            self.broken = exc
            raise

    def _write_all(self, pieces: list[bytes]) -> None:
        fd = self.fd
        assert fd is not None
        for piece in pieces:
            view = memoryview(piece)
            while view:
                try:
                    n = os.write(fd, view)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
                        raise DiskFull(
                            f"Disk full while writing {self.part}: {human_size(self.length)} "
                            f"were saved and kept; free some space and retry to resume "
                            f"({self.url})",
                            url=self.url,
                            dest=self.dest,
                        ) from exc
                    raise DownloadError(
                        f"Cannot write {self.part}: {exc.strerror or exc} ({self.url})",
                        url=self.url,
                        dest=self.dest,
                    ) from exc
                self.length += n
                view = view[n:]

    def _sync(self) -> None:
        assert self.fd is not None
        os.fsync(self.fd)
        self._close()

    def _close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    # --- event-loop side ---
    @staticmethod
    async def _wait(fut: concurrent.futures.Future):
        return await asyncio.shield(asyncio.wrap_future(fut))

    async def open(self, restart: bool) -> int:
        await self.drain()
        return await self._wait(self.writer.submit(self._open, restart))

    async def write(self, pieces: list[bytes]) -> None:
        self.pending.append(self.writer.submit(self._write, pieces))
        self.pending.append(self.hashing.submit(self._hash, pieces))
        pending = self.pending
        while pending and pending[0].done():
            # Finished work: take its result here. Awaiting a done future through
            # wrap_future would still wake the loop through its self-pipe, once per batch.
            pending.popleft().result()
        while len(pending) > 2 * MAX_IN_FLIGHT:
            await self._wait(pending[0])
            pending.popleft()

    async def drain(self) -> None:
        while self.pending:
            await self._wait(self.pending[0])
            self.pending.popleft()

    async def finish(self) -> str:
        """fsync and close the part; return the sha256 of everything in it."""
        await self.drain()
        await self._wait(self.writer.submit(self._sync))
        if self.hashed != self.length:  # a check, not an assert: kept under python -OO
            raise RuntimeError(f"{self.hashed} bytes hashed of {self.length} written")
        return self.hasher.hexdigest()

    def close_now(self) -> None:
        """Synchronous cleanup (also on cancellation): finish queued work, close the file."""
        self.pending.clear()
        self.writer.submit(self._close)
        self.writer.shutdown(wait=True)  # runs every queued write, then the close
        self.hashing.shutdown(wait=True)


_O_BINARY = getattr(os, "O_BINARY", 0)


def _tune_httpcore() -> None:
    """Let httpcore's HTTP/1.1 reader take up to READ_SIZE per socket read (default 64 KiB).

    A read returns whatever is already there, so small responses and SSE are unaffected;
    on a fast link the per-read overhead of 64 KiB reads capped httpx at ~0.6 GiB/s on
    loopback. Process-wide by design: every client, including one a caller passes in,
    benefits. Only ever raised."""
    try:
        from httpcore._async.http11 import AsyncHTTP11Connection
    except ImportError:  # pragma: no cover - a future httpcore; the default still works
        return
    if getattr(AsyncHTTP11Connection, "READ_NUM_BYTES", 0) < READ_SIZE:
        AsyncHTTP11Connection.READ_NUM_BYTES = READ_SIZE


def _tune_h11() -> None:
    """Make h11 hand a body chunk that empties its receive buffer over without copying it.

    h11 returns ``data[:n]`` and deletes it from its buffer, copying the chunk twice
    (``maybe_extract_at_most`` slices once to test for emptiness and again to extract).
    When the chunk is the whole buffer, the buffer object itself is the answer and a
    fresh empty one takes its place: the same bytes, the same state after, no copies.
    Process-wide (like `_tune_httpcore`); any other case runs h11's own code."""
    try:
        from h11._receivebuffer import ReceiveBuffer
    except ImportError:  # pragma: no cover - a future h11; its own code still works
        return
    original = ReceiveBuffer.maybe_extract_at_most
    if getattr(original, "_cantor_fast_path", False):
        return
    probe = ReceiveBuffer()
    if not all(hasattr(probe, a) for a in ("_data", "_next_line_search", "_multiple_lines_search")):
        return  # pragma: no cover - internals changed; leave h11 alone

    def maybe_extract_at_most(self, count: int):
        data = self._data
        if 0 < len(data) <= count and type(data) is bytearray:
            self._data = bytearray()
            self._next_line_search = 0
            self._multiple_lines_search = 0
            return data
        return original(self, count)

    maybe_extract_at_most._cantor_fast_path = True
    maybe_extract_at_most.__doc__ = original.__doc__
    ReceiveBuffer.maybe_extract_at_most = maybe_extract_at_most


_tune_h11()


def _widen_reads(response: httpx.Response) -> Callable[[], None]:
    """Let this connection's asyncio transport receive up to READ_SIZE per recv().

    asyncio reads at most 256 KiB per wake-up, and anyio pauses and resumes reading (two
    epoll_ctl calls) around every read, so at 1 GiB/s the loop spent more time on wake-ups
    and syscalls than on the bytes. A recv returns only what is already buffered, so a
    slow link is unaffected. Only this connection's plain-TCP transport is changed (an
    instance attribute; TLS or another backend keeps its defaults), and only while the body
    streams: the returned function puts the old size back before the connection returns to
    the pool."""
    stream = response.extensions.get("network_stream")
    transport = getattr(getattr(stream, "_stream", None), "_transport", None)
    before = getattr(transport, "max_size", 0)
    if transport is None or not isinstance(before, int) or not 0 < before < READ_SIZE:
        return lambda: None
    transport.max_size = READ_SIZE

    def restore() -> None:
        transport.max_size = before

    return restore


_tune_httpcore()


class _Meter:
    """Throttled progress with a smoothed speed."""

    def __init__(self, url: str, dest: Path, on_progress: Callable[[Progress], None] | None):
        self.url, self.dest, self.cb = url, dest, on_progress
        self.total: int | None = None
        self.resumed_from = 0
        self.received = 0
        self.speed = 0.0
        self._t = self._t0 = time.monotonic()
        self._bytes_at_t = 0

    def start(self, offset: int, total: int | None) -> None:
        self.resumed_from = offset
        self.received = offset
        self.total = total
        self._t = self._t0 = time.monotonic()
        self._bytes_at_t = offset

    def add(self, n: int) -> None:
        self.received += n
        if self.cb is None:
            return
        now = time.monotonic()
        dt = now - self._t
        if dt >= PROGRESS_INTERVAL:
            self._sample(now, dt)
            self._emit()

    def _sample(self, now: float, dt: float) -> None:
        rate = (self.received - self._bytes_at_t) / dt if dt > 0 else 0.0
        self.speed = rate if self.speed == 0.0 else 0.3 * rate + 0.7 * self.speed
        self._t, self._bytes_at_t = now, self.received

    def _emit(self) -> None:
        if self.cb is None:
            return
        eta = None
        if self.total is not None and self.speed > 0:
            eta = max(0.0, (self.total - self.received) / self.speed)
        self.cb(
            Progress(
                self.url, self.dest, self.received, self.total, self.speed, eta, self.resumed_from
            )
        )

    def final(self) -> None:
        now = time.monotonic()
        if now - self._t > 0.01:
            self._sample(now, now - self._t)
        if self.speed == 0.0:  # finished before the first sample: the overall rate
            self.speed = (self.received - self.resumed_from) / max(now - self._t0, 1e-6)
        self._emit()


def _parse_content_range(value: str | None) -> tuple[int | None, int | None] | None:
    """'bytes 100-199/1000' → (100, 1000); '*' gives None for that part ('bytes */1000')."""
    if not value or not value.startswith("bytes "):
        return None
    rng, _, total = value[len("bytes ") :].partition("/")
    first = rng.strip().partition("-")[0]
    try:
        start = None if first == "*" else int(first)
        return start, (None if total.strip() == "*" else int(total))
    except ValueError:
        return None


def _check_url(url: str, original: str) -> None:
    reason = config.check_download_url(url)
    if reason is not None:
        if url == original:
            raise DownloadError(f"Refusing to download {url}: expected {reason}", url=original)
        raise DownloadError(
            f"Refusing to follow a redirect from {original} to {url}: expected {reason}",
            url=original,
        )


async def download(
    url: str,
    dest: Path,
    *,
    sha256: str | None,
    size: int | None = None,
    headers: dict[str, str] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    stall_timeout: float = 30.0,
    retries: int = 5,
    backoff: float = 1.0,
    client: httpx.AsyncClient | None = None,
) -> Path:
    """Fetch ``url`` to ``dest`` (replacing it) and return ``dest``; see the module doc."""
    dest = Path(dest)
    _check_url(url, url)
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise DownloadError(
                f"Bad sha256 for {url}: {sha256!r} is not 64 hex digits", url=url, dest=dest
            )
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    if size is not None:
        have = part.stat().st_size if part.exists() else 0
        check_free_space(dest.parent, max(0, size - have))

    own_client = client is None
    if own_client:
        client = httpx.AsyncClient(timeout=httpx.Timeout(stall_timeout), follow_redirects=False)
    sink = _Sink(part, url, dest)
    meter = _Meter(url, dest, on_progress)
    state = _State()
    failures = 0
    try:
        while True:
            state.progressed = False
            try:
                digest = await _attempt(
                    client,
                    url,
                    dest,
                    part,
                    sink,
                    meter,
                    state,
                    sha256=sha256,
                    size=size,
                    headers=headers or {},
                    stall_timeout=stall_timeout,
                )
                break
            except httpx.HTTPError as exc:  # not a transport failure: nothing to retry
                raise DownloadError(
                    f"{url}: {exc or type(exc).__name__}", url=url, dest=dest
                ) from exc
            except _Retry as r:
                # Bounded: `retries` failures in a row; an attempt that saved bytes resets
                # the count (each reset needs new bytes, so this always ends).
                failures = 1 if state.progressed else failures + 1
                if r.unresolved and not state.received_any:
                    raise r.error from r.__cause__
                if failures > retries:
                    err = r.error
                    err.args = (f"{err} (gave up after {failures} attempts in a row)",)
                    raise err from r.__cause__
                if not r.immediate:
                    delay = backoff * 2 ** (failures - 1)
                    if r.retry_after is not None:  # the server's Retry-After, if longer
                        delay = max(delay, r.retry_after)
                    await asyncio.sleep(min(MAX_BACKOFF, delay))
        await _install(part, dest, digest, sha256, size, sink.length, url)
        meter.received = sink.length
        meter.final()
        return dest
    finally:
        sink.close_now()
        if own_client:
            await client.aclose()
        try:
            if part.stat().st_size == 0:
                part.unlink()  # nothing was saved: leave no empty .part behind
        except OSError:
            pass


@dataclass
class _State:
    etag: str | None = None  # validator of the bytes in the part, seen in this call
    progressed: bool = False  # the current attempt received file bytes
    received_any: bool = False  # some attempt of this call received file bytes


async def _open_response(
    client: httpx.AsyncClient, url: str, req_headers: dict[str, str], stall_timeout: float
) -> httpx.Response:
    request = client.build_request(
        "GET", url, headers=req_headers, timeout=httpx.Timeout(stall_timeout)
    )
    for _ in range(MAX_REDIRECTS + 1):
        response = await client.send(request, stream=True, follow_redirects=False)
        if not response.is_redirect:
            return response
        nxt = response.next_request
        await response.aclose()
        if nxt is None:
            raise DownloadError(f"{url}: redirect without a Location", url=url)
        _check_url(str(nxt.url), url)
        nxt.extensions["timeout"] = request.extensions.get("timeout", nxt.extensions.get("timeout"))
        request = nxt
    raise DownloadError(f"{url}: more than {MAX_REDIRECTS} redirects", url=url)


def _unresolved(exc: BaseException) -> bool:
    """True when a transport error comes from a host name that did not resolve."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, socket.gaierror):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


async def _attempt(
    client,
    url,
    dest,
    part,
    sink: _Sink,
    meter: _Meter,
    state: _State,
    *,
    sha256,
    size,
    headers,
    stall_timeout,
) -> str:
    offset = await sink.open(restart=False)
    req_headers = {"Accept-Encoding": "identity", **headers}
    if offset > 0:
        req_headers["Range"] = f"bytes={offset}-"
        if state.etag:
            req_headers["If-Range"] = state.etag
    try:
        response = await _open_response(client, url, req_headers, stall_timeout)
    except httpx.TimeoutException as exc:
        raise _Retry(
            Stalled(f"{url}: no answer for {stall_timeout:g} s", url=url, dest=dest)
        ) from exc
    except httpx.TransportError as exc:
        host = httpx.URL(url).host
        if _unresolved(exc):
            raise _Retry(
                DownloadError(
                    f"{url}: cannot reach {host}: the name does not "
                    f"resolve (offline, or no DNS?); check the network "
                    f"and try again",
                    url=url,
                    dest=dest,
                ),
                unresolved=True,
            ) from exc
        raise _Retry(
            DownloadError(f"{url}: network error: {exc or type(exc).__name__}", url=url, dest=dest)
        ) from exc
    try:
        status = response.status_code
        if status == 416 and offset > 0:
            cr = _parse_content_range(response.headers.get("Content-Range"))
            if cr and cr[1] is not None and cr[1] == offset and (size is None or size == offset):
                meter.start(offset, offset)
                return await sink.finish()  # the part already holds the whole file
            await sink.open(restart=True)  # stale part: start over
            state.etag = None
            raise _Retry(
                DownloadError(f"{url}: the server refused to resume", url=url, dest=dest),
                immediate=True,
            )
        if status in (401, 403):
            raise AuthRequired(
                f"{url}: access denied (HTTP {status}); this download needs a valid token",
                status,
                url=url,
                dest=dest,
            )
        if status >= 500 or status in RETRY_STATUSES:
            after = response.headers.get("Retry-After", "").strip()
            raise _Retry(
                HTTPStatus(
                    f"{url}: HTTP {status} {response.reason_phrase}", status, url=url, dest=dest
                ),
                retry_after=float(after) if after.isdigit() else None,
            )
        if status not in (200, 206):
            raise HTTPStatus(
                f"{url}: HTTP {status} {response.reason_phrase}".rstrip(),
                status,
                url=url,
                dest=dest,
            )

        total: int | None = None
        start = 0
        if status == 206:
            cr = _parse_content_range(response.headers.get("Content-Range"))
            if cr is None or cr[0] != offset:
                start = -1  # a range we did not ask for: start over
            else:
                start, total = cr
        if status == 200 or start == -1:
            if offset > 0 or start == -1:
                # The server ignored the range (or the file changed): start from scratch.
                await sink.open(restart=True)
                if start == -1:
                    raise _Retry(
                        DownloadError(
                            f"{url}: unexpected Content-Range "
                            f"{response.headers.get('Content-Range')!r}",
                            url=url,
                            dest=dest,
                        ),
                        immediate=True,
                    )
            start = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        state.etag = response.headers.get("ETag")

        if size is not None and total is not None and total != size:
            raise DownloadError(
                f"{url}: the server offers {total} bytes but {size} were "
                f"expected; refusing the file",
                url=url,
                dest=dest,
            )
        if total is not None:
            check_free_space(dest.parent, total - start)
        meter.start(start, total if total is not None else size)
        restore_reads = _widen_reads(response)

        pieces: list[bytes] = []
        queued = 0
        # We ask for identity; raw bytes skip httpx's decoder layer unless a server encodes anyway.
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        body = response.aiter_raw() if encoding in ("", "identity") else response.aiter_bytes()
        try:
            async for piece in body:
                pieces.append(piece)
                queued += len(piece)
                state.progressed = state.received_any = True
                meter.add(len(piece))
                if queued >= BATCH:
                    await sink.write(pieces)
                    pieces, queued = [], 0
            if pieces:
                await sink.write(pieces)
                pieces = []
        except httpx.TimeoutException as exc:
            if pieces:
                await sink.write(pieces)
            raise _Retry(
                Stalled(
                    f"{url}: no data for {stall_timeout:g} s at {human_size(meter.received)}",
                    url=url,
                    dest=dest,
                )
            ) from exc
        except httpx.TransportError as exc:
            if pieces:
                await sink.write(pieces)
            raise _Retry(
                DownloadError(
                    f"{url}: connection lost at "
                    f"{human_size(meter.received)}: "
                    f"{exc or type(exc).__name__}",
                    url=url,
                    dest=dest,
                )
            ) from exc
        finally:
            restore_reads()
        await sink.drain()
        expected = total if total is not None else size
        if expected is not None and sink.length < expected:
            raise _Retry(
                DownloadError(
                    f"{url}: the connection ended at {sink.length} of {expected} bytes",
                    url=url,
                    dest=dest,
                )
            )
        return await sink.finish()
    finally:
        await response.aclose()


async def _install(
    part: Path, dest: Path, digest: str, sha256: str | None, size: int | None, length: int, url: str
) -> None:
    if size is not None and length != size:
        part.unlink(missing_ok=True)
        raise DownloadError(
            f"{url}: got {length} bytes, expected {size}; the download was discarded",
            url=url,
            dest=dest,
        )
    if sha256 is not None and digest != sha256:
        part.unlink(missing_ok=True)
        raise HashMismatch(
            f"{url}: sha256 mismatch for {dest.name}: expected {sha256}, got "
            f"{digest}; the download was discarded",
            url=url,
            dest=dest,
        )
    os.replace(part, dest)
    _fsync_dir(dest.parent)


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
