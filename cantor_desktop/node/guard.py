"""The node's door: who may send it a request, and how much (an ASGI middleware).

Checked in this order, before any handler runs (``tests/faults/test_attack_faults.py`` tries
each attack on a real node; docs/reliability.md has what it found):

1. ``Host`` — IP literals the connection arrived on (any loopback address on loopback),
   ``localhost``, and names the user declared in ``node.allowed_hosts``. Anything else,
   an empty host included, is 403: that is what stops DNS rebinding.
2. ``Origin`` — when a browser sends one it must be the node's own origin; anything else
   (``null`` included) is 403. No CORS headers are ever sent, so ``OPTIONS`` grants nothing.
3. The token — ``Authorization: Bearer TOKEN`` on every request; only ``GET /v1/health``
   answers without it (and says no more than that the node is up). Else 401.
4. The body — a request that carries one must say ``Content-Type: application/json``
   (or a type its endpoint declares in :data:`BODY_RULES`), else 415: a web page can send
   text/plain, form and multipart bodies without a preflight, never JSON. Bodies are capped
   while they stream in (413 past the cap, memory bounded). A body that stops arriving for
   :data:`BODY_IDLE_S` is dropped (408), and so is one not whole within its deadline:
   :data:`BODY_GRACE_S` plus its size (announced, else its cap) at :data:`BODY_MIN_RATE` —
   a trickle of one byte every few seconds cannot hold a request open.

Everything refused is answered in the node's error shape and logged once at INFO.

Capacity is kept apart: requests that carry the node's token (the owner's) may run
:data:`OWNER_CONCURRENCY` at once, all others (health checks, refusals) only
:data:`STRANGER_CONCURRENCY`, each answered with ``Connection: close`` — a flood of tokenless
requests is refused (503) long before the owner's share is touched. Which connection serves
whom is told to :class:`.connections.Connections`, which closes the others first when
connections run out.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from ..auth import access
from .connections import Connections

log = logging.getLogger(__name__)

JSON_CAP = 1 * 2**20
BODY_IDLE_S = 10.0
"""No byte of a body for this long: the request is dropped (408)."""
BODY_GRACE_S = 10.0
BODY_MIN_RATE = 256 * 2**10
"""A whole body must arrive within BODY_GRACE_S plus its size at this rate (a song request:
10 s; a 64 MiB upload: 4 min 26 s)."""
OPEN_PATHS = {("GET", "/v1/health"), ("HEAD", "/v1/health")}
OWNER_CONCURRENCY = 1024
"""Requests with the token answered at once; more are 503 (the owner's own flood)."""
STRANGER_CONCURRENCY = 32
"""Requests without it answered at once (a health check takes a millisecond)."""
CLOSE = (b"connection", b"close")
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class BodyRule:
    """What a path (or a path prefix ending in ``/``) accepts as a body, and how much."""

    path: str
    types: tuple[str, ...]
    cap: int

    def applies(self, path: str) -> bool:
        return path == self.path or (self.path.endswith("/") and path.startswith(self.path))


def _body_rules() -> list[BodyRule]:
    from ..models import adapters
    from ..models.importer import UPLOAD_CAP
    from .http_common import FILE_BODY
    from .styles import EXPORT_MAX
    from .uploads import CONTENT_TYPES, MAX_BYTES

    return [
        BodyRule("/v1/uploads", CONTENT_TYPES, MAX_BYTES),
        BodyRule("/v1/models/upload", (FILE_BODY,), UPLOAD_CAP),
        BodyRule("/v1/adapters/upload", (FILE_BODY,), adapters.UPLOAD_CAP),
        BodyRule("/v1/styles/import", (FILE_BODY,), EXPORT_MAX),
    ]


BODY_RULES: list[BodyRule] = _body_rules()
"""Endpoints that take something other than JSON (uploads) declare it here."""


class BodyTooLarge(Exception):
    pass


class BodyStalled(Exception):
    pass


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


def split_host(value: str) -> tuple[str, int | None]:
    """``Host`` header value → (lower-case name or IP text, port or None); ("", None) when
    it is empty or malformed."""
    value = value.strip()
    if not value:
        return "", None
    try:
        parsed = urlsplit("//" + value)
        name = (parsed.hostname or "").rstrip(".").lower()
        port = parsed.port
    except ValueError:
        return "", None
    if parsed.username is not None or parsed.path or parsed.query:
        return "", None
    return name, port


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip


def host_allowed(name: str, local_ip: str | None, declared: Iterable[str]) -> bool:
    """May a request naming ``name`` as its host be answered on a connection that arrived at
    ``local_ip``? IP literals of that connection (any loopback on loopback), ``localhost``
    and the declared names; never an empty name."""
    if not name:
        return False
    if name == "localhost":
        return True
    ip = _ip(name)
    if ip is not None:
        local = _ip(local_ip or "")
        if local is None:
            return ip.is_loopback
        return ip == local or (ip.is_loopback and local.is_loopback)
    return name in {d.strip().rstrip(".").lower() for d in declared if d.strip()}


def origin_allowed(
    origin: str, host_header: str, local_ip: str | None, declared: Iterable[str], port: int | None
) -> bool:
    """A browser's ``Origin`` must be the node's own: http(s), an allowed host, the node's
    port."""
    if origin.strip().lower() == "null":
        return False
    try:
        parsed = urlsplit(origin.strip())
        o_port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return False
    if not host_allowed(parsed.hostname.rstrip(".").lower(), local_ip, declared):
        return False
    return port is None or o_port == port


def media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


def _type_ok(mtype: str, allowed: tuple[str, ...]) -> bool:
    for a in allowed:
        if a.endswith("/*") and mtype.startswith(a[:-1]):
            return True
        if mtype == a:
            return True
    return False


class Guard:
    """ASGI middleware in front of the node app (see the module docstring).

    ``token()`` gives the token every request must carry (None: no token check, for tests
    of the handlers alone); ``declared_hosts()`` the names node.toml allows."""

    def __init__(
        self,
        app: Callable[..., Awaitable[None]],
        *,
        token: Callable[[], str | None],
        declared_hosts: Callable[[], Iterable[str]] = lambda: (),
        json_cap: int = JSON_CAP,
        body_idle_s: float = BODY_IDLE_S,
        body_grace_s: float = BODY_GRACE_S,
        body_min_rate: float = BODY_MIN_RATE,
        rules: list[BodyRule] | None = None,
        connections: Connections | None = None,
        owner_concurrency: int = OWNER_CONCURRENCY,
        stranger_concurrency: int = STRANGER_CONCURRENCY,
    ):
        self.app = app
        self.token = token
        self.connections = connections
        self.limits = {True: owner_concurrency, False: stranger_concurrency}
        self.in_flight = {True: 0, False: 0}
        self.busy_refusals = {True: 0, False: 0}
        self.declared_hosts = declared_hosts
        self.json_cap = json_cap
        self.body_idle_s = body_idle_s
        self.body_grace_s = body_grace_s
        self.body_min_rate = body_min_rate
        self.rules = BODY_RULES if rules is None else rules

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner = self.has_token(scope)
        client = scope.get("client")
        if self.connections is not None:
            self.connections.request_started(client, owner)
        self.in_flight[owner] += 1
        try:
            if not owner:
                send = _closing(send)  # a stranger's connection ends with its answer
            if self.in_flight[owner] > self.limits[owner]:
                self.busy_refusals[owner] += 1
                await _error(
                    send,
                    503,
                    "the node is answering as many requests as it takes; try again",
                    "busy",
                )
                return
            refusal = self.check(scope)
            if refusal is not None:
                status, message, kind = refusal
                log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), message)
                await _error(send, status, message, kind)
                return
            cap = self.body_cap(scope)
            if cap is None:
                await self.app(scope, receive, send)
                return
            await self._with_capped_body(scope, receive, send, cap)
        finally:
            self.in_flight[owner] -= 1
            if self.connections is not None:
                self.connections.request_done(client)

    # -- the checks, in order -----------------------------------------------------------

    def has_token(self, scope: dict[str, Any]) -> bool:
        """The request carries the node's token (always True for a node without one: the
        tests of its handlers alone)."""
        expected = self.token()
        if not expected:
            return True
        header = _header(scope, b"authorization") or ""
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and access.matches(given.strip(), expected)

    def check(self, scope: dict[str, Any]) -> tuple[int, str, str] | None:
        method, path = scope.get("method", ""), scope.get("path", "")
        server = scope.get("server") or (None, None)
        local_ip, local_port = server[0], server[1]
        declared = list(self.declared_hosts())
        host_header = _header(scope, b"host") or ""
        name, _port = split_host(host_header)
        if not host_allowed(name, local_ip, declared):
            shown = host_header if host_header.strip() else "(empty)"
            return (
                403,
                f"host {shown[:80]!s} is not allowed: use an IP address or localhost, "
                f"or add the name to node.allowed_hosts in node.toml",
                "forbidden_host",
            )
        origin = _header(scope, b"origin")
        if origin is not None and not origin_allowed(
            origin, host_header, local_ip, declared, local_port
        ):
            return 403, f"origin {origin[:80]} may not use the node", "forbidden_origin"
        if (method, path) not in OPEN_PATHS and not self.has_token(scope):
            return (
                401,
                "a valid bearer token is required (the app and the CLI find it "
                "themselves; for another machine see `cantor node token`)",
                "unauthorized",
            )
        if method in BODY_METHODS:
            ctype = _header(scope, b"content-type")
            length = _header(scope, b"content-length")
            chunked = "chunked" in (_header(scope, b"transfer-encoding") or "").lower()
            has_body = chunked or (length is not None and length.strip() not in ("", "0"))
            allowed = self.allowed_types(path)
            mtype = media_type(ctype)
            if (ctype is not None and mtype and not _type_ok(mtype, allowed)) or (
                has_body and not mtype
            ):
                return (
                    415,
                    f"the body must be {' or '.join(allowed)} (got {mtype or 'no Content-Type'})",
                    "unsupported_media_type",
                )
            cap = self.body_cap(scope)
            if length is not None and cap is not None:
                try:
                    size = int(length)
                except ValueError:
                    return 400, "Content-Length is not a number", "invalid_request"
                if size > cap:
                    return (
                        413,
                        f"the body is {size} bytes; at most {cap} are taken here",
                        "too_large",
                    )
        return None

    def _rule(self, path: str) -> BodyRule | None:
        return next((r for r in self.rules if r.applies(path)), None)

    def allowed_types(self, path: str) -> tuple[str, ...]:
        rule = self._rule(path)
        return rule.types if rule else ("application/json",)

    def body_cap(self, scope: dict[str, Any]) -> int | None:
        if scope.get("method") not in BODY_METHODS:
            return None
        rule = self._rule(scope.get("path", ""))
        return rule.cap if rule else self.json_cap

    # -- the body, counted as it streams in ---------------------------------------------

    def body_deadline_s(self, scope: dict[str, Any], cap: int) -> float:
        """How long the whole body of this request may take to arrive."""
        try:
            size = min(int(_header(scope, b"content-length") or cap), cap)
        except ValueError:
            size = cap
        return self.body_grace_s + max(0, size) / self.body_min_rate

    async def _with_capped_body(self, scope, receive, send, cap: int) -> None:
        seen = 0
        started = False
        body_in = False
        loop = asyncio.get_running_loop()
        allowed = self.body_deadline_s(scope, cap)
        deadline = loop.time() + allowed

        async def capped_receive():
            nonlocal seen, body_in
            if body_in:
                # The body is whole: what comes now is the client hanging up, which a
                # streamed answer (a pull's progress) waits for as long as it runs.
                return await receive()
            left = deadline - loop.time()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, min(self.body_idle_s, left)))
            except asyncio.TimeoutError:
                if left <= self.body_idle_s:
                    raise BodyStalled(
                        f"the body did not arrive whole within {allowed:.0f} s "
                        f"({self.body_grace_s:g} s, plus 1 s per "
                        f"{self.body_min_rate / 2**10:.0f} KiB it holds)"
                    ) from None
                raise BodyStalled(f"the body stopped arriving for {self.body_idle_s:g} s") from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    raise BodyTooLarge(f"the body is larger than {cap} bytes, the most taken here")
                body_in = not message.get("more_body", False)
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, capped_receive, tracking_send)
        except BodyTooLarge as exc:  # raised where no handler of the app saw it
            if not started:
                await _error(send, 413, str(exc), "too_large")
        except BodyStalled as exc:
            if not started:
                await _error(send, 408, str(exc), "timeout")


def _closing(send):
    """``send`` with ``Connection: close`` added to the answer's head."""

    async def closing_send(message):
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            if CLOSE not in headers:
                headers.append(CLOSE)
            message = {**message, "headers": headers}
        await send(message)

    return closing_send


async def _error(send, status: int, message: str, kind: str) -> None:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
