"""A real HTTP/1.1 server on 127.0.0.1 that misbehaves the way a hostile manifest host would.

    with HostileServer() as evil:
        evil.endless("/m.json")                     # chunked, never ends (no Content-Length)
        evil.endless("/big.json", declare=10**9)    # says 1 GB up front, then streams
        evil.encoded("/gz.json", gzip_bytes, "gzip")
        evil.redirect("/hop", "http://127.0.0.1:1234/next")
        ...
        evil.sent("/m.json")                        # body bytes written for that path

Routes match the request's path, also when the request line holds an absolute URI (the
server is then used as an HTTP proxy for a made-up host, e.g. ``http://evil.example``: a
client mounts it with ``httpx.AsyncHTTPTransport(proxy=evil.base_url)``). ``hits(path)``
counts the requests for a path.
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

CHUNK = 64 * 1024


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # hang-ups are expected
            super().handle_error(request, client_address)


class HostileServer:
    def __init__(self):
        self._routes: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._sent: Counter[str] = Counter()
        self._hits: Counter[str] = Counter()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- routes ---------------------------------------------------------------------------
    def endless(self, path: str, declare: int | None = None, limit: int = 2 * 2**30) -> None:
        """Stream spaces until the client goes away (or ``limit`` bytes): chunked, or with a
        ``Content-Length: declare`` header when given."""
        self._routes[path] = ("endless", declare, limit)

    def encoded(self, path: str, body: bytes, encoding: str) -> None:
        self._routes[path] = ("encoded", body, encoding)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self._routes[path] = ("redirect", location, status)

    def sent(self, path: str) -> int:
        with self._lock:
            return self._sent[path]

    def hits(self, path: str) -> int:
        with self._lock:
            return self._hits[path]

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "HostileServer":
        self._httpd = _Quiet(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "HostileServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + path


def _handler(server: HostileServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002
            pass

        def finish(self):
            try:  # the client hangs up mid-body: that is the point
                super().finish()
            except ConnectionError:
                pass

        def do_GET(self):
            path = urlsplit(self.path).path
            with server._lock:
                server._hits[path] += 1
            route = server._routes.get(path)
            try:
                if route is None:
                    self._plain(404, b"not found\n")
                elif route[0] == "redirect":
                    self.send_response(route[2])
                    self.send_header("Location", route[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif route[0] == "encoded":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Encoding", route[2])
                    self.send_header("Content-Length", str(len(route[1])))
                    self.end_headers()
                    self.wfile.write(route[1])
                    self._count(path, len(route[1]))
                else:
                    self._endless(path, declare=route[1], limit=route[2])
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True

        def _plain(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _count(self, path: str, n: int) -> None:
            with server._lock:
                server._sent[path] += n

        def _endless(self, path: str, declare: int | None, limit: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            chunked = declare is None
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(declare))
            self.end_headers()
            block = b" " * CHUNK
            sent = 0
            while sent < limit and not server._stop.is_set():
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                else:
                    self.wfile.write(block)
                sent += len(block)
                self._count(path, len(block))
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

    return Handler
