"""The one downloader: engines and models both fetch through :func:`download` — a large
file in ranges over shared connections, into a ``.part`` that the next call resumes, and
in place only once its sha256 matched; retries, redirects checked hop by hop, free space
checked first. What it guarantees, point by point: docs/downloads.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import hashlib
import os
import sys
import shutil
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import ssl

from .. import config
from . import partfile
from .connection_slots import Turn
from ..errors import CantorError
from ..units import human_size

__all__ = [
    "AuthRequired",
    "DiskFull",
    "DownloadError",
    "HTTPStatus",
    "HashMismatch",
    "NotEnoughSpace",
    "all_or_first_error",
    "Progress",
    "Stalled",
    "check_free_space",
    "discard_part",
    "download",
    "part_path",
    "part_received",
    "sha256_file",
]

BATCH = 1 << 20  # bytes handed to the writer and hash threads at a time
MAX_IN_FLIGHT = 8  # batches queued to each thread before the receiver waits (one stream)
HASH_BLOCK = 1 << 20  # read size when hashing a file from disk
CHUNK = 16 << 20  # a range of a ranged download (the first and last ones are smaller)
HASH_AHEAD = 64 << 20  # batches this far past the hash frontier are kept in memory
PROGRESS_INTERVAL = 0.1  # seconds between progress callbacks (≤ 10/s, plus a final one)
MAX_REDIRECTS = 20
MAX_BACKOFF = 60.0
RETRY_STATUSES = {408, 425, 429}
GONE_STATUSES = {401, 403, 404, 410}  # from a resolved (signed) address: resolve it again


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


def part_received(dest: Path) -> int:
    """Bytes the ``.part`` of ``dest`` holds (a ranged part is sized to the whole file: its
    ranges file says how much of it is there)."""
    return partfile.received(part_path(dest))


def discard_part(dest: Path) -> int:
    """Delete the ``.part`` of ``dest`` and its ranges file; the bytes they held."""
    return partfile.discard(part_path(dest))


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every download of this process: making one reads the whole CA
    bundle (a pull of four files made four), and a context serves any number of clients."""
    return httpx.create_ssl_context()


def configured_connections() -> int:
    """node.toml's ``downloads.connections`` (the default when node.toml is unreadable)."""
    cfg, _problem = config.current()
    return int(cfg.get("downloads.connections"))


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
        self.closed = False

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
        if self.closed:
            return
        self.closed = True
        self.pending.clear()
        self.writer.submit(self._close)
        self.writer.shutdown(wait=True)  # runs every queued write, then the close
        self.hashing.shutdown(wait=True)


_O_BINARY = getattr(os, "O_BINARY", 0)


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


@dataclass
class Stats:
    """How a download went (``download(..., stats=Stats())`` fills it): for the bench."""

    mode: str = ""  # "ranges" or "stream"
    connections: int = 0
    ranges: int = 0
    requests: int = 0
    resumed_from: int = 0
    reread: int = 0  # bytes read back from the part for the hash (arrived too far ahead)
    read_saved: int = 0  # bytes an earlier call saved, read from the part for the hash


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
    connections: int | None = None,
    chunk: int = CHUNK,
    stats: Stats | None = None,
    slots: Turn | None = None,
) -> Path:
    """Fetch ``url`` to ``dest`` (replacing it) and return ``dest``; see the module doc.

    ``connections``: ranges fetched at once (default: node.toml ``downloads.connections``);
    ``chunk``: the size of a range (files up to one chunk come in one stream); ``slots``:
    this file's turn in connections shared with other downloads (`connection_slots`):
    each request holds a slot while it runs."""
    dest = Path(dest)
    _check_url(url, url)
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise DownloadError(
                f"Bad sha256 for {url}: {sha256!r} is not 64 hex digits", url=url, dest=dest
            )
    if connections is None:
        connections = configured_connections()
    connections = max(1, int(connections))
    chunk = max(1, int(chunk))
    stats = stats if stats is not None else Stats()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    saved = partfile.load(part)
    if saved is not None and (
        (size is not None and saved.size != size) or (saved.sha256 not in (None, sha256))
    ):
        partfile.discard(part)  # a part of another version of the file
        saved = None
    elif saved is None and partfile.ranges_path(part).exists():
        partfile.discard(part)  # a ranges file that does not match its part: start over
    if size is not None:
        have = saved.received if saved is not None else part_received(dest)
        check_free_space(dest.parent, max(0, size - have))

    own_client = client is None
    http = client or httpx.AsyncClient(
        timeout=httpx.Timeout(stall_timeout),
        follow_redirects=False,
        limits=httpx.Limits(max_connections=max(10, connections + 2)),
        verify=_tls_context(),
    )
    meter = _Meter(url, dest, on_progress)
    job = _Job(
        http,
        url,
        dest,
        part,
        meter,
        stats,
        sha256=sha256,
        size=size,
        headers=headers or {},
        stall_timeout=stall_timeout,
        retries=retries,
        backoff=backoff,
        turn=slots,
    )
    try:
        if saved is not None:
            try:
                await _Ranged(job, connections, chunk).run(saved=saved)
                job.asked_all()
                return dest
            except _OneStream:
                pass  # the server stopped honouring Range, or the file changed: start over
        elif connections > 1 and not part.exists() and (size is None or size > chunk):
            job.ranged = (connections, chunk)  # decided by the first answer (see _attempt)
        await _stream(job)
        job.asked_all()  # (a failure is for the caller to pass on: see models.pull)
        return dest
    finally:
        if own_client:
            await http.aclose()
        try:
            if part.stat().st_size == 0 and not partfile.ranges_path(part).exists():
                part.unlink()  # nothing was saved: leave no empty .part behind
        except OSError:
            pass


class _OneStream(Exception):
    """Fetch the file in one stream instead (the ranged part is discarded)."""


@dataclass
class _Job:
    """One call of download(): what every attempt needs."""

    client: httpx.AsyncClient
    url: str
    dest: Path
    part: Path
    meter: _Meter
    stats: Stats
    sha256: str | None
    size: int | None
    headers: dict[str, str]
    stall_timeout: float
    retries: int
    backoff: float
    turn: Turn | None = None  # this file's share of a pull's connections
    received_any: bool = False  # some attempt of this call received file bytes
    ranged: tuple[int, int] | None = None  # (connections, chunk) when ranges may be used

    def hold(self) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of the pull's shared connections for one request (none to hold alone)."""
        return self.turn.hold() if self.turn is not None else contextlib.nullcontext()

    def asked_all(self) -> None:
        """Every byte left is asked for: the pull's next file may start."""
        if self.turn is not None:
            self.turn.asked_all.set()

    async def pause(self, r: _Retry, failures: int) -> None:
        """After a failed attempt: give up (raise) or wait before the next one."""
        if r.unresolved and not self.received_any:
            raise r.error from r.__cause__
        if failures > self.retries:
            err = r.error
            err.args = (f"{err} (gave up after {failures} attempts in a row)",)
            raise err from r.__cause__
        if not r.immediate:
            delay = self.backoff * 2 ** (failures - 1)
            if r.retry_after is not None:  # the server's Retry-After, if longer
                delay = max(delay, r.retry_after)
            await asyncio.sleep(min(MAX_BACKOFF, delay))


@dataclass
class _State:
    etag: str | None = None  # validator of the bytes in the part, seen in this call
    progressed: bool = False  # the current attempt received file bytes


async def _stream(job: _Job) -> None:
    """The whole file over one connection, appended to a clean-prefix part; or, when the
    first answer offers ranges of a file bigger than a chunk, a ranged download that
    starts with that answer."""
    job.stats.mode, job.stats.connections = "stream", 1
    sink = _Sink(job.part, job.url, job.dest)
    state = _State()
    failures = 0
    try:
        while True:
            state.progressed = False
            try:
                async with job.hold():
                    digest = await _attempt(job, sink, state)
                break
            except _GoRanged as go:
                assert job.ranged is not None
                sink.close_now()
                job.part.unlink(missing_ok=True)  # empty: the ranged part replaces it
                try:
                    await _Ranged(job, *job.ranged).run(first=go.response)
                    return
                except _OneStream:
                    # a range came back whole (200) or the file changed: one stream
                    job.ranged = None
                    job.stats.mode, job.stats.connections = "stream", 1
                    sink = _Sink(job.part, job.url, job.dest)
                    state = _State()
            except httpx.HTTPError as exc:  # not a transport failure: nothing to retry
                raise DownloadError(
                    f"{job.url}: {exc or type(exc).__name__}", url=job.url, dest=job.dest
                ) from exc
            except _Retry as r:
                # Bounded: `retries` failures in a row; an attempt that saved bytes resets
                # the count (each reset needs new bytes, so this always ends).
                failures = 1 if state.progressed else failures + 1
                await job.pause(r, failures)
        await _install(job.part, job.dest, digest, job.sha256, job.size, sink.length, job.url)
        job.meter.received = sink.length
        job.meter.final()
    finally:
        sink.close_now()


class _GoRanged(Exception):
    """The first answer offers ranges of a big file: continue as a ranged download."""

    def __init__(self, response: httpx.Response):
        super().__init__("ranged")
        self.response = response


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


async def _request(
    job: _Job, req_headers: dict[str, str], *, direct: tuple[str, dict[str, str]] | None = None
) -> httpx.Response:
    """GET with the job's redirect policy (or straight to ``direct``: an address and the
    headers its last redirect hop carried); network failures become `_Retry`."""
    url, dest = job.url, job.dest
    try:
        if direct is None:
            return await _open_response(job.client, url, req_headers, job.stall_timeout)
        merged = httpx.Headers(direct[1])
        merged.update(req_headers)
        request = job.client.build_request(
            "GET", direct[0], headers=merged, timeout=httpx.Timeout(job.stall_timeout)
        )
        return await job.client.send(request, stream=True, follow_redirects=False)
    except httpx.TimeoutException as exc:
        raise _Retry(
            Stalled(f"{url}: no answer for {job.stall_timeout:g} s", url=url, dest=dest)
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


def _check_status(job: _Job, response: httpx.Response) -> None:
    """Raise for what is not a 200 or a 206: AuthRequired, `_Retry` (5xx, 408, 429), or
    HTTPStatus (final)."""
    url, dest = job.url, job.dest
    status = response.status_code
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
            f"{url}: HTTP {status} {response.reason_phrase}".rstrip(), status, url=url, dest=dest
        )


def _body(response: httpx.Response):
    """The body's bytes: raw unless a server encoded it anyway (we ask for identity)."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    return response.aiter_raw() if encoding in ("", "identity") else response.aiter_bytes()


async def _attempt(job: _Job, sink: _Sink, state: _State) -> str:
    url, dest, size, meter = job.url, job.dest, job.size, job.meter
    offset = await sink.open(restart=False)
    req_headers = {"Accept-Encoding": "identity", **job.headers}
    if offset > 0:
        req_headers["Range"] = f"bytes={offset}-"
        if state.etag:
            req_headers["If-Range"] = state.etag
    if job.ranged is None:
        job.asked_all()  # one stream: this request asks for every byte left
    response = await _request(job, req_headers)
    job.stats.requests += 1
    handed_over = False
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
        _check_status(job, response)

        total: int | None = None
        start = 0
        if status == 206:
            cr = _parse_content_range(response.headers.get("Content-Range"))
            if cr is None or cr[0] != offset:
                start = -1  # a range we did not ask for: start over
            else:
                start, total = offset, cr[1]
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
        if (
            job.ranged is not None
            and status == 200
            and offset == 0
            and total is not None
            and total > job.ranged[1]
            and "bytes" in response.headers.get("Accept-Ranges", "").lower()
            and response.headers.get("Content-Encoding", "identity").strip().lower()
            in ("", "identity")
        ):
            handed_over = True
            raise _GoRanged(response)
        meter.start(start, total if total is not None else size)
        job.stats.resumed_from = start
        job.asked_all()

        pieces: list[bytes] = []
        queued = 0
        try:
            async for piece in _body(response):
                pieces.append(piece)
                queued += len(piece)
                state.progressed = job.received_any = True
                meter.add(len(piece))
                if queued >= BATCH:
                    await sink.write(pieces)
                    pieces, queued = [], 0
            if pieces:
                await sink.write(pieces)
                pieces = []
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            if pieces:
                await sink.write(pieces)
            raise _retry_after_loss(job, exc, meter.received) from exc
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
        if not handed_over:
            await response.aclose()


def _retry_after_loss(job: _Job, exc: Exception, at: int) -> _Retry:
    """A body that stopped: a stall or a lost connection, worth another attempt."""
    if isinstance(exc, httpx.TimeoutException):
        return _Retry(
            Stalled(
                f"{job.url}: no data for {job.stall_timeout:g} s at {human_size(at)}",
                url=job.url,
                dest=job.dest,
            )
        )
    return _Retry(
        DownloadError(
            f"{job.url}: connection lost at {human_size(at)}: {exc or type(exc).__name__}",
            url=job.url,
            dest=job.dest,
        )
    )


class _Ranged:
    """A ranged download: ``connections`` workers take the ranges of a `partfile.PartFile`
    in file order, each range over its own request (see the module doc)."""

    def __init__(self, job: _Job, connections: int, chunk: int):
        self.job = job
        self.connections = connections
        self.chunk = chunk
        self.pf: partfile.PartFile | None = None
        self.todo: deque[int] = deque()
        self.direct: tuple[str, dict[str, str]] | None = None  # the resolved address
        self.etag: str | None = None

    async def run(
        self, *, first: httpx.Response | None = None, saved: partfile.Saved | None = None
    ) -> None:
        """Resume ``saved``, or start with ``first`` (a 200 answer for the whole file, whose
        first bytes make the first range; it is closed after them)."""
        job = self.job
        job.stats.mode = "ranges"
        try:
            if saved is not None:
                self.etag = saved.etag
                # opened here, not on a thread: a cancellation must not lose the open part
                self.pf = partfile.PartFile.resume(job.part, saved, ahead=HASH_AHEAD)
            else:
                assert first is not None
                await self._create(first)
            pf = self.pf
            assert pf is not None
            job.stats.ranges = len(pf.ranges)
            job.stats.resumed_from = pf.resumed
            job.meter.start(pf.resumed, pf.size)
            self.todo = deque(pf.todo())
            if first is not None:
                self.todo.remove(0)
            workers = max(1, min(self.connections, len(self.todo) + (first is not None)))
            job.stats.connections = workers
            tasks = [
                asyncio.create_task(self._worker(first if k == 0 else None)) for k in range(workers)
            ]
            first = None  # the first worker owns it now
            try:
                await all_or_first_error(tasks)
            except _Changed as exc:
                await asyncio.to_thread(pf.close, save=False)
                self.pf = None
                partfile.discard(job.part)
                raise _OneStream(str(exc)) from exc
            digest = await pf.digest()
            job.stats.reread, job.stats.read_saved = pf.reread, pf.read_saved
            await asyncio.to_thread(pf.close, save=False)
            self.pf = None
            try:
                await _install(job.part, job.dest, digest, job.sha256, job.size, pf.size, job.url)
            finally:
                partfile.ranges_path(job.part).unlink(missing_ok=True)
            job.meter.received = pf.size
            job.meter.final()
        except partfile.WriteFailed as exc:
            raise self._write_error(exc) from None
        finally:
            if first is not None:
                await first.aclose()
            if self.pf is not None:
                # runs on cancellation too: finishes queued writes and saves the ranges
                # file, so the next call resumes
                self.pf.close()

    def _write_error(self, exc: partfile.WriteFailed) -> DownloadError:
        message = f"{exc} ({self.job.url})" + (
            "; free some space and retry to resume" if exc.disk_full else ""
        )
        cls = DiskFull if exc.disk_full else DownloadError
        return cls(message, url=self.job.url, dest=self.job.dest)

    async def _create(self, first: httpx.Response) -> None:
        """The part and its ranges for the file ``first`` answers with (its first range:
        the bytes ``first`` brings before it is closed)."""
        job = self.job
        total = int(first.headers["Content-Length"])
        self.etag = first.headers.get("ETag")
        self._remember(first)
        first_end = max(1, self.chunk // self.connections)
        ranges = partfile.plan(total, self.connections, self.chunk, first=first_end)
        # made here, not on a thread: a cancellation must not lose the open part (a few
        # milliseconds: a sparse file and a small JSON file)
        self.pf = partfile.PartFile.create(
            job.part, total, ranges, job.sha256, self.etag, ahead=HASH_AHEAD
        )

    def _remember(self, response: httpx.Response) -> None:
        """Send the next ranges straight to where the redirects led, with that hop's
        headers (without the hub's token when that is another origin)."""
        request = response.request
        if str(request.url) == self.job.url:
            self.direct = None
            return
        keep = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("range", "if-range", "host", "content-length")
        }
        self.direct = (str(request.url), keep)

    async def _worker(self, response: httpx.Response | None) -> None:
        """Ranges one after another over one connection. Its slot of shared connections is
        kept from range to range and given up when no range is left, so the next file of
        a pull gets it only then."""
        index = 0 if response is not None else None
        try:
            async with self.job.hold():
                while True:
                    if index is None:
                        if not self.todo:
                            return
                        index = self.todo.popleft()
                        if not self.todo:
                            self.job.asked_all()
                    await self._fetch(index, response)
                    response, index = None, None
        finally:
            if response is not None:  # stopped while waiting for a slot: close the first
                await response.aclose()

    async def _fetch(self, index: int, response: httpx.Response | None) -> None:
        """Range ``index`` to the end, over as many attempts as it takes (see `_Job.pause`)."""
        job, pf = self.job, self.pf
        assert pf is not None
        r = pf.ranges[index]
        failures = 0
        while not r.done:
            had = r.got
            try:
                if response is None:
                    response = await self._open(r)
                await self._receive(index, r, response)
                if not r.done:
                    raise _Retry(
                        DownloadError(
                            f"{job.url}: the answer for bytes {r.start}-{r.end - 1} ended "
                            f"at {r.next_offset}",
                            url=job.url,
                            dest=job.dest,
                        )
                    )
            except httpx.HTTPError as exc:  # not a transport failure: nothing to retry
                raise DownloadError(
                    f"{job.url}: {exc or type(exc).__name__}", url=job.url, dest=job.dest
                ) from exc
            except _Retry as retry:
                failures = 1 if r.got > had else failures + 1
                await job.pause(retry, failures)
            finally:
                if response is not None:
                    await response.aclose()
                    response = None

    async def _open(self, r: partfile.Range) -> httpx.Response:
        job = self.job
        req = {
            "Accept-Encoding": "identity",
            **job.headers,
            "Range": f"bytes={r.next_offset}-{r.end - 1}",
        }
        if self.etag and not self.etag.startswith("W/"):
            req["If-Range"] = self.etag
        direct = self.direct
        if direct is not None:
            req.pop("Authorization", None)
            req.pop("authorization", None)
        response = await _request(job, req, direct=direct)
        job.stats.requests += 1
        if direct is not None and response.status_code in GONE_STATUSES:
            # a signed address that expired: resolve it again through the original URL
            await response.aclose()
            self.direct = None
            raise _Retry(
                HTTPStatus(
                    f"{job.url}: HTTP {response.status_code} from {direct[0]}",
                    response.status_code,
                    url=job.url,
                    dest=job.dest,
                ),
                immediate=True,
            )
        try:
            self._check_range(r, response)
        except BaseException:
            await response.aclose()
            raise
        if direct is None:
            self._remember(response)
        return response

    def _check_range(self, r: partfile.Range, response: httpx.Response) -> None:
        job, pf = self.job, self.pf
        assert pf is not None
        status = response.status_code
        if status == 200 or status == 416:
            raise _Changed(
                f"HTTP {status} to a range request"
            )  # Range ignored, or the file changed
        _check_status(job, response)
        cr = _parse_content_range(response.headers.get("Content-Range"))
        if cr is not None and cr[1] is not None and cr[1] != pf.size:
            raise _Changed(f"the file is now {cr[1]} bytes, not {pf.size}")
        etag = response.headers.get("ETag")
        if self.etag and etag and etag != self.etag and not etag.startswith("W/"):
            raise _Changed(f"its ETag changed from {self.etag} to {etag}")
        if cr is None or cr[0] != r.next_offset:
            raise _Retry(
                DownloadError(
                    f"{job.url}: asked for bytes {r.next_offset}-{r.end - 1}, got "
                    f"Content-Range {response.headers.get('Content-Range')!r}",
                    url=job.url,
                    dest=job.dest,
                ),
                immediate=True,
            )
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise _Changed(f"a range came encoded ({encoding})")

    async def _receive(self, index: int, r: partfile.Range, response: httpx.Response) -> None:
        """Write the body of an answer for range ``r`` in place, up to the range's end. A 206
        that goes past it is asked again; a 200 (the whole file, the first answer) is
        expected to, and is closed there."""
        job, pf = self.job, self.pf
        assert pf is not None
        end = r.end
        at = r.next_offset
        pieces: list[bytes] = []
        queued = 0

        async def flush() -> None:
            nonlocal at, pieces, queued
            if pieces:
                await pf.write(index, at, pieces)
                job.meter.add(queued)
                at += queued
                pieces, queued = [], 0

        try:
            async for piece in response.aiter_raw():
                if at + queued + len(piece) > end:
                    pieces.append(piece[: end - at - queued])
                    queued = end - at
                    await flush()
                    if response.status_code == 200:
                        return
                    raise _Retry(
                        DownloadError(
                            f"{job.url}: the answer for bytes {r.start}-{end - 1} went past "
                            f"its end",
                            url=job.url,
                            dest=job.dest,
                        ),
                        immediate=True,
                    )
                pieces.append(piece)
                queued += len(piece)
                job.received_any = True
                if queued >= BATCH:
                    await flush()
            await flush()
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            await flush()
            raise _retry_after_loss(job, exc, job.meter.received) from exc
        finally:
            await pf.drain(index)  # r.got counts what the writer saved


class _Changed(Exception):
    """The file under a ranged download changed, or the server stopped honouring Range."""


async def all_or_first_error(tasks: list[asyncio.Task]) -> None:
    """Wait for every task; on the first failure (or a cancellation of this wait) cancel
    the rest, wait for them, and raise that failure."""
    if not tasks:
        return
    try:
        _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


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
    if sys.platform == "win32":
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
