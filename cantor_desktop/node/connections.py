"""The node's connections: who holds one, for how long, and who gives way when they run out.

uvicorn counts every connection alike (``limit_concurrency``), so a program that opens a
thousand tokenless ones locks the owner out with 503s; and it has no deadline for a request's
head (``timeout_keep_alive`` starts only after a first answer and is reset by every byte:
Kludex/uvicorn#157, #160), so a half-sent request holds its connection forever. This module
is the node's own answer, at the socket level:

- every connection must deliver a whole request head within :data:`HEAD_TIMEOUT_S` of being
  opened or of its last answer, or it is closed;
- at most :attr:`Connections.most` are open at once (below the open-file limit); when one
  more arrives, the oldest connection that is *not* serving the owner — one still waiting
  for its head, then an idle keep-alive one — is closed to make room. A connection serving
  the owner (a request with the node's token) is never closed for another.

The Guard (:mod:`.guard`) tells it when a request starts and ends and whether it carries
the token; it finds the connection by the client's address, which is unique per open TCP
connection. uvicorn still speaks HTTP: :meth:`Connections.protocol` gives the class that
``uvicorn.Config(http=…)`` takes, which runs uvicorn's own h11 protocol inside it (composed,
not subclassed: only asyncio's public Protocol methods are called on it, with the keyword
arguments uvicorn gives any ``http`` class).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any, cast

log = logging.getLogger(__name__)

HEAD_TIMEOUT_S = 10.0
"""A request's head must be whole this long after its connection opened or was last
answered."""
MOST_CONNECTIONS = 4096
MOST_BACKLOG = 2048
RESERVED_FILES = 128
"""Open files kept for everything else (logs, the songs, the engines' pipes, the state)."""

Address = tuple[str, int]


def address_of(peer: Any) -> Address | None:
    """(host, port) of a peer address as asyncio gives it (IPv6 adds two fields)."""
    if isinstance(peer, (tuple, list)) and len(peer) >= 2:
        return str(peer[0]), int(peer[1])
    return None


class _Connection:
    __slots__ = ("address", "busy", "owner", "timer", "transport")

    def __init__(self, address: Address | None, transport: asyncio.Transport):
        self.address = address
        self.transport = transport
        self.timer: asyncio.TimerHandle | None = None
        self.busy = False  # a request is being answered
        self.owner = False  # the last request carried the node's token


class Connections:
    """Every open connection of the node (one per node, shared by its protocols and its
    Guard). All of it runs on the event loop's thread."""

    def __init__(
        self,
        most: int = MOST_CONNECTIONS,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        backlog: int = MOST_BACKLOG,
    ):
        self.most = most
        self.backlog = backlog
        self.head_timeout_s = head_timeout_s
        self.by_address: dict[Address, _Connection] = {}
        self.open = 0
        # connections that may be closed to make room, oldest first: waiting for a head,
        # then idle ones that last served the owner
        self.waiting: OrderedDict[int, _Connection] = OrderedDict()
        self.idle_owner: OrderedDict[int, _Connection] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self.late_heads = 0

    @classmethod
    def for_open_files(cls, soft_limit: int | None, **kw: Any) -> Connections:
        """Sized to this process's open-file limit (None: no such limit, Windows).

        asyncio accepts up to ``backlog`` connections at a time before any of them reaches
        :meth:`opened` (which makes room), so the connections kept, the backlog and the
        reserve together stay within the limit: the node never runs out of files to
        accept with (EMFILE: asyncio stops accepting for a second, the owner included).
        With 8,192 files: 4,096 connections, a backlog of 1,008; with 1,024: 560 and 112."""
        most, backlog = MOST_CONNECTIONS, MOST_BACKLOG
        if soft_limit is not None and soft_limit > 0:
            usable = max(64, soft_limit - RESERVED_FILES)
            backlog = max(8, min(backlog, usable // 8))
            # a batch accepted, a batch made room for (closed on the next turn of the loop)
            # and one more batch on its way: at most three backlogs beyond those kept
            most = max(16, min(most, usable - 3 * backlog))
        return cls(most=most, backlog=backlog, **kw)

    # -- from the protocol ------------------------------------------------------------

    def opened(self, transport: asyncio.Transport) -> _Connection | None:
        """A new connection; None when there is no room (it has been closed)."""
        self.open += 1
        if self.open > self.most and not self._make_room():
            self.open -= 1
            self.refused += 1
            transport.abort()
            return None
        conn = _Connection(address_of(transport.get_extra_info("peername")), transport)
        if conn.address is not None:
            self.by_address[conn.address] = conn
        self._wait_for_head(conn)
        return conn

    def closed(self, conn: _Connection | None) -> None:
        if conn is None:
            return
        self.open -= 1
        self._not_evictable(conn)
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        if conn.address is not None and self.by_address.get(conn.address) is conn:
            del self.by_address[conn.address]

    # -- from the Guard ---------------------------------------------------------------

    def request_started(self, client: Any, owner: bool) -> None:
        conn = self._find(client)
        if conn is None:
            return
        self._not_evictable(conn)
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        conn.busy, conn.owner = True, owner

    def request_done(self, client: Any) -> None:
        conn = self._find(client)
        if conn is None or not conn.busy:
            return
        conn.busy = False
        self._wait_for_head(conn)

    def stats(self) -> dict[str, int]:
        return {
            "open": self.open,
            "most": self.most,
            "backlog": self.backlog,
            "evicted": self.evicted,
            "refused": self.refused,
            "late_heads": self.late_heads,
        }

    # -- inside -----------------------------------------------------------------------

    def _find(self, client: Any) -> _Connection | None:
        address = address_of(client)
        return self.by_address.get(address) if address is not None else None

    def _wait_for_head(self, conn: _Connection) -> None:
        """Until its next request starts: closed after the head timeout, and evictable."""
        (self.idle_owner if conn.owner else self.waiting)[id(conn)] = conn
        loop = asyncio.get_running_loop()
        conn.timer = loop.call_later(self.head_timeout_s, self._head_late, conn)

    def _head_late(self, conn: _Connection) -> None:
        conn.timer = None
        if not conn.busy and not conn.transport.is_closing():
            self.late_heads += 1
            self._not_evictable(conn)
            conn.transport.close()

    def _not_evictable(self, conn: _Connection) -> None:
        self.waiting.pop(id(conn), None)
        self.idle_owner.pop(id(conn), None)

    def _make_room(self) -> bool:
        """Close the oldest connection that serves no one (True), if there is one."""
        for pool in (self.waiting, self.idle_owner):
            while pool:
                _key, victim = pool.popitem(last=False)
                if victim.busy or victim.transport.is_closing():
                    continue
                self.evicted += 1
                victim.transport.abort()  # connection_lost follows: closed() counts it
                return True
        return False

    # -- the protocol uvicorn runs ----------------------------------------------------

    def protocol(self) -> type[asyncio.Protocol]:
        """The class for ``uvicorn.Config(http=…)``: uvicorn's h11 protocol, run inside a
        protocol that tells these connections when it opens and closes."""
        from uvicorn.protocols.http.h11_impl import H11Protocol

        connections = self

        class CountedProtocol(asyncio.Protocol):
            def __init__(self, **uvicorn_kwargs: Any) -> None:
                self.http = H11Protocol(**uvicorn_kwargs)
                self.conn: _Connection | None = None

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                # a stream socket's transport: asyncio.Transport (abort() included)
                self.conn = connections.opened(cast(asyncio.Transport, transport))
                if self.conn is not None:
                    self.http.connection_made(transport)  # type: ignore[arg-type]

            def connection_lost(self, exc: Exception | None) -> None:
                if self.conn is not None:
                    connections.closed(self.conn)
                    self.conn = None
                    self.http.connection_lost(exc)

            def data_received(self, data: bytes) -> None:
                self.http.data_received(data)

            def eof_received(self) -> None:
                self.http.eof_received()  # None: the transport closes itself

            def pause_writing(self) -> None:
                self.http.pause_writing()

            def resume_writing(self) -> None:
                self.http.resume_writing()

        return CountedProtocol
