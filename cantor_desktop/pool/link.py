"""The connection to the pool's Redis, and whether it is there.

One :class:`PoolLink` per process: a redis-py asyncio client made from the pool's address
(TLS for ``rediss://``, a CA file from ``[pool] ca`` when the studio signs its own), and the
pool's reachability as one state the node reports (``GET /v1/system``, ``GET /v1/pool``)
and the app shows. Every task that talks to Redis runs through :meth:`PoolLink.attempt`:
a connection error marks the pool unreachable and the task waits, with a back-off, until a
``PING`` answers again; nothing is dropped meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import CantorError
from .address import PoolAddress

log = logging.getLogger(__name__)

T = TypeVar("T")
BACKOFF_FIRST, BACKOFF_MAX = 0.2, 5.0
CONNECT_TIMEOUT = 5.0
SOCKET_TIMEOUT = 10.0


class PoolUnavailable(CantorError):
    """The pool's Redis does not answer (the node says so and retries by itself)."""


def connection_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.BusyLoadingError,
        ConnectionError,
        OSError,
        asyncio.TimeoutError,
    )


def explain(exc: BaseException, address: PoolAddress, ca_file: str | None = None) -> str:
    """Why the pool's Redis cannot be used, for people: a TLS certificate that is not trusted
    names the CA it was checked against; anything else is redis-py's own message."""
    import ssl

    cause: BaseException | None = exc
    seen = 0
    while cause is not None and seen < 5:  # redis-py keeps the ssl error as the context
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or str(cause)
            trusted = (
                f"the CA of pool.ca ({ca_file})"
                if ca_file
                else "this system's CAs (a studio that signs its own gives its CA with "
                "`cantor pool join URL --ca FILE`, pool.ca)"
            )
            return (
                f"TLS: the certificate of Redis at {address.shown()} is not trusted by "
                f"{trusted}: {why}"
            )
        if isinstance(cause, ssl.SSLError):
            return (
                f"TLS with Redis at {address.shown()} failed ({cause.reason or cause}): does "
                f"Redis listen with TLS on port {address.port}?"
            )
        if ca_file and isinstance(cause, FileNotFoundError | PermissionError | IsADirectoryError):
            return f"the CA file of pool.ca ({ca_file}) cannot be read: {cause.strerror or cause}"
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return str(exc) or type(exc).__name__


def make_client(address: PoolAddress, password: str | None, ca_file: str | None = None):
    """A redis-py asyncio client of the pool (answers decoded as text).

    redis-py's own retries are off: a command whose connection drops may have run in Redis
    already (its answer lost), and sent again it would run twice. :class:`PoolLink` says the
    pool is unreachable and the work waits instead; the pool's scripts are fenced, and a
    change that comes back refused is checked against the record (it may be this node's
    own, already made)."""
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    options: dict[str, Any] = {
        "retry": Retry(NoBackoff(), 0),
        "host": address.host,
        "port": address.port,
        "db": address.db,
        "username": address.user,
        "password": password,
        "decode_responses": True,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "health_check_interval": 15,
        "client_name": "cantor-node",
    }
    if address.tls:
        options["ssl"] = True
        options["ssl_cert_reqs"] = "required"
        if ca_file:
            options["ssl_ca_certs"] = ca_file
    return redis.asyncio.Redis(**options)


class PoolLink:
    """The pool's Redis client and its reachability."""

    def __init__(self, address: PoolAddress, password: str | None, ca_file: str | None = None):
        self.address = address
        self.ca_file = ca_file
        self.redis = make_client(address, password, ca_file)
        self.up = asyncio.Event()
        self.error: str | None = "not connected yet"
        self.since = time.time()
        self._errors = connection_errors()
        self._probe: asyncio.Task | None = None
        self.on_up: list[Callable[[], None]] = []
        self.closed = False

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return "connected" if self.up.is_set() else "unreachable"

    def describe(self) -> dict[str, Any]:
        return {
            "url": self.address.shown(),
            "tls": self.address.tls,
            "state": self.state,
            "since": self.since,
            "error": None if self.up.is_set() else self.error,
        }

    def is_connection_error(self, exc: BaseException) -> bool:
        import redis.exceptions

        if isinstance(exc, redis.exceptions.AuthenticationError):
            return False  # a wrong password stays wrong: said once, not retried silently
        return isinstance(exc, self._errors)

    def down_if_lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` says Redis is out of reach; when it does, the link goes
        :meth:`down` (and starts reconnecting)."""
        if not self.is_connection_error(exc):
            return False
        self.down(exc)
        return True

    def down(self, exc: BaseException | str) -> None:
        """A command failed for want of Redis: unreachable until a PING answers."""
        text = exc if isinstance(exc, str) else explain(exc, self.address, self.ca_file)
        if self.up.is_set() or self.error != text:
            log.warning("pool %s unreachable: %s", self.address.shown(), text)
        if self.up.is_set():
            self.since = time.time()
        self.up.clear()
        self.error = text
        if not self.closed and (self._probe is None or self._probe.done()):
            self._probe = asyncio.get_running_loop().create_task(
                self._reconnect(), name="pool-reconnect"
            )

    async def _reconnect(self) -> None:
        wait = BACKOFF_FIRST
        try:
            # the idle connections went to the Redis that is gone: the next command on one
            # would fail at once (and mark the pool unreachable again right after the PING)
            await self.redis.connection_pool.disconnect(inuse_connections=False)
        except Exception as exc:  # closing dead sockets: nothing to act on
            log.debug("pool: closing the old connections: %s", exc)
        while not self.closed:
            try:
                await asyncio.wait_for(self.redis.ping(), CONNECT_TIMEOUT)
            except Exception as exc:  # any failure: try again later, say why
                import redis.exceptions

                self.error = explain(exc, self.address, self.ca_file)
                if isinstance(exc, redis.exceptions.AuthenticationError):
                    self.error = f"Redis refused the password: {exc}"
                await asyncio.sleep(wait)
                wait = min(wait * 2, BACKOFF_MAX)
                continue
            log.info("pool %s connected", self.address.shown())
            self.error = None
            self.since = time.time()
            self.up.set()
            for hook in list(self.on_up):
                hook()
            return

    def start(self) -> None:
        self.down("not connected yet")

    async def wait_up(self, timeout: float | None = None) -> bool:
        if self.up.is_set():
            return True
        try:
            await asyncio.wait_for(self.up.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def check_up(self) -> None:
        """PoolUnavailable when the pool is away (a request that needs it now)."""
        if not self.up.is_set():
            raise PoolUnavailable(
                f"pool unreachable: {self.address.shown()} does not answer ({self.error}); "
                f"this node retries by itself"
            )

    async def now(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one call for a request that waits for it: PoolUnavailable when Redis is away
        (the link starts reconnecting)."""
        self.check_up()
        try:
            return await call()
        except Exception as exc:
            if self.down_if_lost(exc):
                raise PoolUnavailable(f"pool unreachable: {self.error}") from None
            raise

    async def attempt(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """Run ``call`` until it succeeds, waiting out every absence of Redis (work that
        must not be lost: a finished song, a handed-back one)."""
        while True:
            await self.up.wait()
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self.is_connection_error(exc):
                    raise
                log.info("pool: %s waits for Redis (%s)", what, exc)
                self.down(exc)

    async def close(self) -> None:
        self.closed = True
        if self._probe is not None:
            self._probe.cancel()
        try:
            await self.redis.aclose()
        except Exception:
            pass
