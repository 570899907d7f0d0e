"""A real threaded HTTP/1.1 file server on 127.0.0.1 for tests, with fault injection.

Usage::

    from support.http_files import FileServer

    with FileServer({"/a.bin": data}) as srv:          # or FileServer(folder=Path(...))
        url = srv.url("/a.bin")                         # "http://127.0.0.1:<port>/a.bin"
        srv.cut("/a.bin", after=1000)                   # drop the connection once at byte 1000
        ...
        assert srv.requests_for("/a.bin")[-1].header("range") == "bytes=1000-"

Content
- ``FileServer(files=None, folder=None, json_routes=None)``: ``files`` maps a URL path to
  ``bytes`` or to a ``Path`` on disk (streamed, so big files are fine); ``folder`` serves
  every file below it (URL path = relative path). ``json_routes`` maps a path to a JSON-able
  object or to a callable ``(Request) -> object``.
- ``add_file(path, data)``, ``remove_file(path)``, ``add_json(path, obj)``.
  JSON routes match the full path with query first (``/api/x?recursive=true``), then the path
  without the query. File paths are matched without the query.
- ``redirect(src, dst, status=302, headers=None)``: a request whose path starts with ``src``
  is redirected to ``dst`` + the rest of the path (``redirect("/resolve/", "/cdn/")`` sends
  ``/resolve/m/f.bin`` to ``/cdn/m/f.bin``). ``dst`` may be a full URL (another host), or
  ``dst(rest) -> URL``; ``headers(path)`` gives extra headers of the redirect answer.
- ``require_token(path_prefix, token)``: requests under that prefix need
  ``Authorization: Bearer <token>``: none → 401, a wrong one → 403 (checked before any
  redirect, as a gated resolve URL does).
- ``guard = callable(Request) -> (status, body) | None``: asked first about every request;
  an answer is sent instead of anything else (a CDN that refuses what it must not get).

Every file response carries ``ETag`` (stable per content), ``Accept-Ranges: bytes`` and
``Content-Length``. HEAD answers the headers only. ``Range: bytes=N-`` and ``bytes=N-M``
give 206 with ``Content-Range: bytes N-M/size``; ``N >= size`` gives 416 with
``Content-Range: bytes */size``. ``If-Range`` with a different ETag gives the whole file
(200).

Faults, per exact path; ``times`` = how many responses are affected (None = every one).
Each is consumed when a GET response for that path starts.
- ``cut(path, after, times=1)``: send ``after`` bytes of this response's body (counted
  from the start of the response, so on a resumed request from the Range start), then
  close the connection.
- ``stall(path, after, seconds, times=1)``: send ``after`` bytes, send nothing for
  ``seconds`` (ended early by ``stop()``), then close the connection.
- ``corrupt(path, offset=None, times=None)``: flip one byte at absolute file ``offset``
  (default: the middle) in what is sent.
- ``throttle(path, bytes_per_second, times=None)``: pace the body.
- ``ignore_range(path, times=None)``: answer a Range request with 200 and the whole file.
- ``no_ranges(path)``: a server without range support: no ``Accept-Ranges`` header, and a
  Range request gets 200 and the whole file.
- ``shift_range(path, by, times=1)``: answer ``bytes=N-M`` with the bytes (and the
  Content-Range) of ``bytes=N+by-M``: another range than the one asked.
- ``widen_range(path, extra, times=1)``: answer ``bytes=N-M`` with ``bytes=N-(M+extra)``:
  more bytes than asked, past the range's end.
- ``fail(path, status, times=1)``: answer with that status (e.g. 500, 503) and a short body.
- ``clear_faults(path=None)``.
- Every fault takes ``ranged=True`` to affect only answers to requests with a Range header
  (the ranges of a parallel download, not its first plain GET).

Shaping, for every file this server sends (a CDN and the line to it): ``shape(rate=B/s,
first_byte=seconds, line=B/s)`` caps each response (each connection: HTTP/1.1 sends one
response at a time) at ``rate``, waits ``first_byte`` seconds before the headers of every
file response, and caps all responses together at ``line`` (the user's line). Unshaped and without faults, a file from disk is sent with ``socket.sendfile``
(the server is not what a benchmark measures).

Request log: ``srv.requests`` (list of ``Request(method, path, headers, status,
bytes_sent)``; ``headers`` keys are lower-case, ``.header(name)`` reads one),
``srv.requests_for(path)``, ``srv.clear_log()``. ``srv.port``, ``srv.base_url``.
``start()`` / ``stop()`` are what the context manager calls.
``write_random_file(path, size, seed=0) -> sha256 hex`` makes test files.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHUNK = 64 * 1024


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    status: int = 0
    bytes_sent: int = 0

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class _Fault:
    kind: str
    times: int | None
    after: int = 0
    seconds: float = 0.0
    offset: int | None = None
    rate: float = 0.0
    status: int = 0
    by: int = 0
    ranged: bool = False


@dataclass
class _Plan:
    """What to do to one response body."""

    cut_at: int | None = None  # absolute body-relative count of bytes to send, then close
    stall_at: int | None = None
    stall_seconds: float = 0.0
    flip_offsets: list[int] = field(default_factory=list)  # absolute file offsets
    rate: float = 0.0


class _Source:
    """A file's bytes, from memory or from disk."""

    def __init__(self, data: bytes | Path):
        self.data = data
        if isinstance(data, (bytes, bytearray)):
            self.size = len(data)
            self.etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        else:
            st = Path(data).stat()
            self.size = st.st_size
            self.etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'

    def chunks(self, start: int, end: int):
        """Yield (offset, bytes) for [start, end)."""
        if isinstance(self.data, (bytes, bytearray)):
            view = memoryview(self.data)
            pos = start
            while pos < end:
                n = min(CHUNK, end - pos)
                yield pos, bytes(view[pos : pos + n])
                pos += n
            return
        with open(self.data, "rb") as fh:
            fh.seek(start)
            pos = start
            while pos < end:
                buf = fh.read(min(CHUNK, end - pos))
                if not buf:
                    return
                yield pos, buf
                pos += len(buf)


class FileServer:
    def __init__(
        self,
        files: dict[str, bytes | Path] | None = None,
        folder: Path | None = None,
        json_routes: dict[str, Any] | None = None,
    ):
        self._lock = threading.Lock()
        self._files: dict[str, _Source] = {}
        for path, data in (files or {}).items():
            self.add_file(path, data)
        self.folder = Path(folder) if folder is not None else None
        self._json: dict[str, Any] = dict(json_routes or {})
        self._redirects: list[tuple[str, str, int, Any]] = []
        self.guard: Any = None
        self._tokens: list[tuple[str, str]] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._no_ranges: set[str] = set()
        self.rate = 0.0  # shape(): bytes/s per response
        self.first_byte = 0.0  # shape(): seconds before each file response
        self.line: _Line | None = None  # shape(): all responses together
        self.requests: list[Request] = []
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -----
    def start(self) -> "FileServer":
        self._stop.clear()
        handler = _make_handler(self)
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="FileServer",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FileServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        if not path.startswith("/"):
            path = "/" + path
        return self.base_url + path

    # ----- content -----
    def add_file(self, path: str, data: bytes | Path) -> None:
        with self._lock:
            self._files[path] = _Source(data)

    def remove_file(self, path: str) -> None:
        with self._lock:
            self._files.pop(path, None)

    def add_json(self, path: str, obj: Any) -> None:
        with self._lock:
            self._json[path] = obj

    def redirect(self, src: str, dst: Any, status: int = 302, headers: Any = None) -> None:
        with self._lock:
            self._redirects.append((src, dst, status, headers))

    def require_token(self, path_prefix: str, token: str) -> None:
        with self._lock:
            self._tokens.append((path_prefix, token))

    # ----- faults -----
    def _add_fault(self, path: str, fault: _Fault) -> None:
        with self._lock:
            self._faults.setdefault(path, []).append(fault)

    def cut(self, path: str, after: int, times: int | None = 1, ranged: bool = False) -> None:
        self._add_fault(path, _Fault("cut", times, after=after, ranged=ranged))

    def stall(
        self, path: str, after: int, seconds: float, times: int | None = 1, ranged: bool = False
    ) -> None:
        self._add_fault(path, _Fault("stall", times, after=after, seconds=seconds, ranged=ranged))

    def corrupt(
        self, path: str, offset: int | None = None, times: int | None = None, ranged: bool = False
    ) -> None:
        self._add_fault(path, _Fault("corrupt", times, offset=offset, ranged=ranged))

    def throttle(
        self, path: str, bytes_per_second: float, times: int | None = None, ranged: bool = False
    ) -> None:
        self._add_fault(path, _Fault("throttle", times, rate=bytes_per_second, ranged=ranged))

    def ignore_range(self, path: str, times: int | None = None) -> None:
        self._add_fault(path, _Fault("ignore_range", times))

    def no_ranges(self, path: str) -> None:
        with self._lock:
            self._no_ranges.add(path)

    def shift_range(self, path: str, by: int, times: int | None = 1) -> None:
        self._add_fault(path, _Fault("shift_range", times, by=by, ranged=True))

    def widen_range(self, path: str, extra: int, times: int | None = 1) -> None:
        self._add_fault(path, _Fault("widen_range", times, by=extra, ranged=True))

    def fail(self, path: str, status: int, times: int | None = 1, ranged: bool = False) -> None:
        self._add_fault(path, _Fault("fail", times, status=status, ranged=ranged))

    def shape(self, rate: float = 0.0, first_byte: float = 0.0, line: float = 0.0) -> None:
        """Cap every file response at ``rate`` bytes/s (0: no cap), wait ``first_byte``
        seconds before answering each file request, as a CDN far away does, and cap all
        of them together at ``line`` bytes/s (0: no cap)."""
        with self._lock:
            self.rate, self.first_byte = float(rate), float(first_byte)
            self.line = _Line(line) if line else None

    def clear_faults(self, path: str | None = None) -> None:
        with self._lock:
            if path is None:
                self._faults.clear()
                self._no_ranges.clear()
            else:
                self._faults.pop(path, None)
                self._no_ranges.discard(path)

    def _take_faults(self, path: str, kinds: set[str], ranged: bool = False) -> list[_Fault]:
        """Consume one use of each active fault of the given kinds for this path (faults
        marked ``ranged`` only for a request with a Range header: ``ranged`` True)."""
        taken = []
        with self._lock:
            for f in list(self._faults.get(path, [])):
                if f.kind not in kinds or (f.ranged and not ranged):
                    continue
                taken.append(f)
                if f.times is not None:
                    f.times -= 1
                    if f.times <= 0:
                        self._faults[path].remove(f)
        return taken

    # ----- log -----
    def requests_for(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # ----- lookup -----
    def _source(self, path: str) -> _Source | None:
        with self._lock:
            src = self._files.get(path)
        if src is not None or self.folder is None:
            return src
        rel = path.lstrip("/")
        candidate = (self.folder / rel).resolve()
        root = self.folder.resolve()
        if root not in candidate.parents or not candidate.is_file():
            return None
        return _Source(candidate)


def _make_handler(server: FileServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "CantorTestFiles/1"

        def log_message(self, format, *args):  # noqa: A002 - quiet test output
            pass

        # --- helpers ---
        def _log(self) -> Request:
            req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
            with server._lock:
                server.requests.append(req)
            return req

        def _simple(
            self,
            req: Request,
            status: int,
            body: bytes = b"",
            ctype: str = "text/plain; charset=utf-8",
            extra: dict[str, str] | None = None,
        ) -> None:
            req.status = status
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD" and body:
                self.wfile.write(body)
                req.bytes_sent = len(body)

        def do_HEAD(self):
            self._handle()

        def do_GET(self):
            self._handle()

        def _handle(self) -> None:
            req = self._log()
            full = self.path
            path = urlsplit(full).path
            try:
                self._dispatch(req, full, path)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True

        def _dispatch(self, req: Request, full: str, path: str) -> None:
            with server._lock:
                redirects = list(server._redirects)
                tokens = list(server._tokens)
                json_obj = server._json.get(full, server._json.get(path, _MISSING))
            guard = server.guard
            refused = guard(req) if guard is not None else None
            if refused is not None:
                self._simple(req, refused[0], refused[1])
                return
            for prefix, token in tokens:
                if path.startswith(prefix):
                    auth = self.headers.get("Authorization")
                    if not auth:
                        self._simple(
                            req,
                            401,
                            b"authorization required\n",
                            extra={"WWW-Authenticate": "Bearer"},
                        )
                        return
                    if auth != f"Bearer {token}":
                        self._simple(req, 403, b"forbidden\n")
                        return
            for src, dst, status, extra in redirects:
                if path.startswith(src):
                    rest = full[len(src) :]
                    target = dst(rest) if callable(dst) else dst + rest
                    self._simple(
                        req,
                        status,
                        b"",
                        extra={"Location": target, **(extra(path) if extra else {})},
                    )
                    return
            if self.command == "GET":
                fails = server._take_faults(path, {"fail"}, bool(self.headers.get("Range")))
                if fails:
                    self._simple(req, fails[0].status, f"injected {fails[0].status}\n".encode())
                    return
            if json_obj is not _MISSING:
                obj = json_obj(req) if callable(json_obj) else json_obj
                body = json.dumps(obj).encode()
                self._simple(req, 200, body, ctype="application/json")
                return
            source = server._source(path)
            if source is None:
                self._simple(req, 404, b"not found\n")
                return
            self._send_file(req, path, source)

        def _send_file(self, req: Request, path: str, source: _Source) -> None:
            size = source.size
            start, end, status = 0, size, 200
            rng = self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            with server._lock:
                ranges_ok = path not in server._no_ranges
                delay = server.first_byte
            if delay and self.command == "GET":
                server._stop.wait(delay)
            ignore = not ranges_ok or (
                bool(rng)
                and self.command == "GET"
                and bool(server._take_faults(path, {"ignore_range"}))
            )
            if rng and not ignore and (if_range is None or if_range == source.etag):
                parsed = _parse_range(rng)
                if parsed is None:
                    self._simple(
                        req, 416, b"bad range\n", extra={"Content-Range": f"bytes */{size}"}
                    )
                    return
                first, last = parsed
                if first >= size:
                    self._simple(
                        req,
                        416,
                        b"range not satisfiable\n",
                        extra={"Content-Range": f"bytes */{size}"},
                    )
                    return
                start = first
                end = size if last is None else min(last + 1, size)
                status = 206
                if self.command == "GET":
                    for f in server._take_faults(path, {"shift_range", "widen_range"}, True):
                        if f.kind == "shift_range":
                            start = min(max(0, start + f.by), size - 1)
                        else:
                            end = min(size, end + f.by)
            req.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start))
            self.send_header("ETag", source.etag)
            if ranges_ok:
                self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return
            plan = _Plan(rate=server.rate)
            kinds = {"cut", "stall", "corrupt", "throttle"}
            for f in server._take_faults(path, kinds, status == 206):
                if f.kind == "cut":
                    plan.cut_at = f.after if plan.cut_at is None else min(plan.cut_at, f.after)
                elif f.kind == "stall":
                    plan.stall_at, plan.stall_seconds = f.after, f.seconds
                elif f.kind == "corrupt":
                    plan.flip_offsets.append(size // 2 if f.offset is None else f.offset)
                elif f.kind == "throttle":
                    plan.rate = f.rate
            self._stream(req, source, start, end, plan)

        def _stream(self, req: Request, source: _Source, start: int, end: int, plan: _Plan) -> None:
            # cut/stall counts are bytes of THIS response's body; flips are file offsets.
            marks = [m for m in (plan.cut_at, plan.stall_at) if m is not None]
            stop_at = min(marks) if marks else None
            line = server.line
            plain = stop_at is None and not plan.flip_offsets and not plan.rate and not line
            if plain and isinstance(source.data, Path):
                self.wfile.flush()
                with open(source.data, "rb") as fh:
                    req.bytes_sent = self.connection.sendfile(fh, start, end - start)
                return
            if stop_at is None and not plan.flip_offsets and isinstance(source.data, Path):
                self._paced_sendfile(req, source.data, start, end, plan.rate, line)
                return
            sent = 0
            t0 = time.monotonic()
            for off, buf in source.chunks(start, end):
                if plan.flip_offsets:
                    b = bytearray(buf)
                    for flip in plan.flip_offsets:
                        if off <= flip < off + len(buf):
                            b[flip - off] ^= 0xFF
                    buf = bytes(b)
                if stop_at is not None and sent + len(buf) >= stop_at:
                    head = buf[: stop_at - sent]
                    if head:
                        self.wfile.write(head)
                        sent += len(head)
                        req.bytes_sent = sent
                    self.wfile.flush()
                    if plan.stall_at == stop_at and plan.stall_seconds:
                        server._stop.wait(plan.stall_seconds)
                    self._drop()
                    return
                if line is not None and line.take(len(buf), server._stop):
                    self._drop()
                    return
                self.wfile.write(buf)
                sent += len(buf)
                req.bytes_sent = sent
                if plan.rate:
                    ahead = sent / plan.rate - (time.monotonic() - t0)
                    if ahead > 0 and server._stop.wait(ahead):
                        self._drop()
                        return
            self.wfile.flush()

        def _paced_sendfile(
            self, req: Request, path: Path, start: int, end: int, rate: float, line: _Line | None
        ) -> None:
            """A shaped file from disk: sendfile in steps of ~1/32 s of ``rate`` (at least
            64 KiB), each step waiting for its turn on the line and its connection's pace,
            so that serving many shaped connections costs this process little."""
            step = max(CHUNK, int(rate / 32) if rate else 256 * 1024)
            sent = 0
            t0 = time.monotonic()
            self.wfile.flush()
            with open(path, "rb") as fh:
                while start + sent < end:
                    n = min(step, end - start - sent)
                    if line is not None and line.take(n, server._stop):
                        self._drop()
                        return
                    sent += self.connection.sendfile(fh, start + sent, n)
                    req.bytes_sent = sent
                    if rate:
                        ahead = sent / rate - (time.monotonic() - t0)
                        if ahead > 0 and server._stop.wait(ahead):
                            self._drop()
                            return

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.wfile.flush()
            except OSError:
                pass
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


_MISSING = object()


class _Line:
    """A line of ``rate`` bytes/s shared by every response: each chunk waits its turn."""

    def __init__(self, rate: float):
        self.rate = rate
        self.lock = threading.Lock()
        self.free_at = 0.0

    def take(self, n: int, stop: threading.Event) -> bool:
        """Wait until ``n`` more bytes fit the line; True when the server is stopping."""
        with self.lock:
            now = time.monotonic()
            start = max(now, self.free_at)
            self.free_at = start + n / self.rate
            wait = start - now
        return wait > 0 and stop.wait(wait)


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a download cancelled, a first answer closed after its first
    range) is normal here, not a traceback in the test output."""

    def handle_error(self, request, client_address) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def _parse_range(value: str) -> tuple[int, int | None] | None:
    value = value.strip()
    if not value.startswith("bytes=") or "," in value:
        return None
    spec = value[len("bytes=") :]
    first, _, last = spec.partition("-")
    try:
        if first == "":
            return None  # suffix ranges are not needed by Cantor
        a = int(first)
        b = int(last) if last else None
    except ValueError:
        return None
    if a < 0 or (b is not None and b < a):
        return None
    return a, b


def write_random_file(path: Path, size: int, seed: int = 0) -> str:
    """Write ``size`` pseudo-random bytes to ``path``; return their sha256 hex."""
    import random

    rng = random.Random(seed)
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        left = size
        while left:
            n = min(1 << 20, left)
            buf = rng.randbytes(n)
            fh.write(buf)
            h.update(buf)
            left -= n
    return h.hexdigest()
