"""The connection to the node: which node (its address, ours or the user's), its client, the
child node we start and supervise, and the link's state.

The state is one :class:`~cantor_desktop.client.link_state.LinkState`, moved by one machine
(:class:`~cantor_desktop.client.link_state.LinkMachine`) that the child's supervisor, the
health check and the songs (idle or generating) all report to.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from PySide6.QtCore import QObject, Signal

from ... import config
from ...client.link_state import LinkMachine, LinkState
from ..tasks import Tasks, describe_error

if TYPE_CHECKING:
    from ...client.node_process import NodeProcess
    from ...client.nodeclient import NodeClient

log = logging.getLogger(__name__)

HEALTH_EVERY = 2.0
START_WAIT_S = 60.0
"""How long a request made while the node starts waits for it (a cold start of the frozen
app on a slow disk takes seconds; the node's own start-up gives up long before this)."""
REMOTE_TOKEN = "remote-node-token"


def node_url(cfg: config.Config) -> str:
    """The address the app drives: ``app.node_url``, else the local node from node.toml."""
    url = cfg.get("app.node_url").strip()
    if url:
        return str(url).rstrip("/")
    from ...client.nodeclient import local_url

    return local_url(cfg)


def remote_token() -> str | None:
    """The token the user gave for a remote node (OS keyring)."""
    try:
        from ...system.secrets import get_secret

        return get_secret(REMOTE_TOKEN)
    except Exception:
        return None


def host_of(url: str) -> str:
    return urlparse(url).hostname or ""


class ConnectionService(QObject):
    """Start, stop and watch the node; the client every other service asks it through."""

    state_changed = Signal(str)  # a LinkState

    def __init__(
        self,
        tasks: Tasks,
        parent: QObject | None = None,
        *,
        url: str | None = None,
        start_child: bool = True,
    ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.machine = LinkMachine()
        self.client: NodeClient | None = None
        self.process: NodeProcess | None = None  # the child node we started, if any
        self._url_override = url
        self._start_child = start_child
        self._theirs_here = False  # a node on this machine that proved the user's token
        # what the other services do at the connection's turns (the link sets them)
        self.busy: Callable[[], bool] = lambda: False
        """Whether a song is running: generating, else idle."""
        self.read_all: Callable[[], Coroutine[Any, Any, None]] | None = None
        """Read everything afresh: each time the node answers after it did not."""
        self.follow: Callable[[], None] | None = None
        """Start following what the node says by itself (its song events): once connected."""
        self.let_go: Callable[[], None] | None = None
        """Stop following the node (the song events, the pool): on Stop."""

    # -- state ----------------------------------------------------------------------------
    @property
    def state(self) -> LinkState:
        return self.machine.state

    @property
    def detail(self) -> str:
        return self.machine.detail

    @property
    def url(self) -> str:
        return self._url_override or node_url(config.current()[0])

    @property
    def owns_node(self) -> bool:
        return self.process is not None

    @property
    def remote(self) -> bool:
        """True when the app drives a node that is not this home's: on another machine, or
        one here the user pointed it to that proved the token the user gave (its node.toml
        and its token are not ours). A node here that proves neither is never driven."""
        return self._theirs_here or not config.is_loopback_host(host_of(self.url))

    async def settled(self, timeout: float = START_WAIT_S) -> None:
        """Return once the link is no longer starting (connected, stopped or failed), or
        after ``timeout`` seconds."""
        if self.state is not LinkState.STARTING:
            return
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def moved(_state: str) -> None:
            if self.state is not LinkState.STARTING and not settled.done():
                settled.set_result(None)

        self.state_changed.connect(moved)
        try:
            await asyncio.wait_for(settled, timeout)
        except TimeoutError:
            pass
        finally:
            self.state_changed.disconnect(moved)

    def set_state(self, state: LinkState, detail: str = "") -> None:
        if self.machine.move(state, detail):
            self.state_changed.emit(str(state))

    def songs_moved(self) -> None:
        """Connected: generating while a song runs, idle otherwise."""
        if self.state.connected:
            self._connected()

    def _connected(self) -> None:
        self.set_state(LinkState.GENERATING if self.busy() else LinkState.IDLE)

    # -- start / stop ---------------------------------------------------------------------
    def start(self) -> None:
        self.tasks.start("node", self.open())

    def stop(self) -> None:
        self.tasks.start("node", self.close())

    def restart(self) -> None:
        async def restart() -> None:
            await self.close()
            await self.open()

        self.tasks.start("node", restart())

    def _own_address(self) -> bool:
        """The app drives this machine's node at node.toml's address (not one it was given)."""
        return (
            self._start_child
            and self._url_override is None
            and not config.current()[0].get("app.node_url").strip()
        )

    async def _new_client(self) -> NodeClient:
        """A client of the node we drive: our own child's token is the one it reported;
        this home's other node is found with its own token; another node needs the token the
        user gave for it (kept in the keyring, read off the GUI thread)."""
        from ...client.nodeclient import NodeClient

        if self.remote:
            token = await asyncio.to_thread(remote_token)
        else:
            token = self.process.token if self.process is not None else None
        return NodeClient(self.url, token=token)

    async def _answers(self, client: NodeClient) -> bool:
        """Whether our node answers, having proved it holds the token; a stranger at its
        address is an error naming it (it is sent nothing, and no node starts on top of it)."""
        from ...client.nodeclient import OURS, STRANGER, NodeClient, StrangerNode

        found = await client.identify()
        if found == STRANGER and not self._own_address() and not self._theirs_here:
            # a node here the user pointed the app to: the token the user gave for it
            token = await asyncio.to_thread(remote_token)
            if token:
                theirs = NodeClient(self.url, token=token)
                if await theirs.identify() == OURS:
                    self.client, self._theirs_here = theirs, True
                    await client.aclose()
                    return True
                await theirs.aclose()
        if found == STRANGER:
            raise StrangerNode(self.url)
        return found == OURS

    async def open(self) -> None:
        """Reach the node (starting our own child when none answers at our address), read
        everything, then watch its health."""
        self.set_state(LinkState.STARTING)
        try:
            if self.client is None:
                self.client = await self._new_client()
            answered = await self._answers(self.client)
            if not answered:
                if not (self._start_child and config.is_loopback_host(host_of(self.url))):
                    self.set_state(LinkState.ERROR, f"no node answers at {self.url}")
                    return
                await self._start_process()
                await self._answers(self.client)
            self._connected()
            if self.read_all is not None:
                await self.read_all()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.set_state(LinkState.ERROR, describe_error(exc))
            return
        if self.follow is not None:
            self.follow()
        self.tasks.start("watch", self._watch())

    async def _start_process(self) -> None:
        """Start our own node child on the configured address, supervised with back-off."""
        from ...client.node_process import NodeProcess

        if self.process is None:
            parsed = urlparse(self.url)
            self.process = NodeProcess(
                parsed.hostname or "127.0.0.1", parsed.port or 7823, supervised=True
            )  # watched: restarts on upgrade
        process = self.process
        await process.start()
        if self.client is not None and process.token:
            self.client.use_token(process.token)  # the token our child reported
        self.tasks.start("supervise", process.watch(on_state=self._on_child))

    def _on_child(self, state: LinkState, detail: str) -> None:
        """The supervisor's news about our child, in the link's own states."""
        self.set_state(state, detail)
        if state.connected:
            self._connected()
            if self.read_all is not None:
                self.tasks.start("refresh:all", self.read_all())

    async def close(self) -> None:
        """Stop following the node, stop the child we started (only that), close the client."""
        for key in ("watch", "supervise"):
            self.tasks.cancel(key)
        if self.let_go is not None:
            self.let_go()
        process, self.process = self.process, None
        if process is not None:
            try:
                await process.stop()
            except Exception as exc:
                log.warning("stopping the node: %s", exc)
        client, self.client = self.client, None
        self._theirs_here = False
        if client is not None:
            try:
                await client.aclose()
            except Exception:
                pass
        self.set_state(LinkState.STOPPED)

    async def _watch(self) -> None:
        """Health every few seconds: a node that stopped answering is shown (and a child of
        ours is restarted by its supervisor meanwhile); one that came back is read again; a
        stranger in its place is named."""
        from ...client.nodeclient import StrangerNode

        while True:
            await asyncio.sleep(HEALTH_EVERY)
            client = self.client
            if client is None:
                return
            try:
                answered = await self._answers(client)
            except StrangerNode as exc:
                self.set_state(LinkState.ERROR, str(exc))
                continue
            if answered:
                if not self.state.connected:
                    self._connected()
                    if self.read_all is not None:
                        await self.read_all()
                continue
            if self.process is None:
                self.set_state(LinkState.ERROR, f"no node answers at {self.url}")
            elif self.state.connected:
                self.set_state(LinkState.STARTING, "the node does not answer; waiting for it")
