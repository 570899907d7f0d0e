"""The app's one connection to the node: start/stop the child node, follow every song, pull
models, drive backends and settings.

A QObject shell over :class:`cantor_desktop.client.nodeclient.NodeClient` and
:class:`cantor_desktop.client.node_process.NodeProcess`. Every network or process step runs as an
asyncio task on the Qt loop (see :mod:`.tasks`); pages only call methods and listen to
signals. The connection's state is one :class:`~cantor_desktop.client.link_state.LinkState`, moved
by one machine (:class:`~cantor_desktop.client.link_state.LinkMachine`) that the child supervisor,
the health check and the song stream all report to.

The pool: when the node is a member of one, its state (``GET /v1/pool?brief=true``, which
the node answers without asking Redis) is read every few seconds for the status line and
the tray, which say when the pool is unreachable; while a page that shows the members is
open, its members and lanes (``GET /v1/pool?songs=false``) every two seconds and soon
after a song moves. One
:class:`~cantor_desktop.client.pool_view.PoolView` goes out on ``pool_changed``.

Songs: one node-wide event stream (``GET /v1/events``) keeps :attr:`songs` current — songs
made by this app, the CLI, another app or the API alike, their progress, their ends, renames
and deletions — without polling; it is read again from the start after a drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from .. import config
from ..system import gc_settle
from ..client.link_state import LinkMachine, LinkState
from ..client.pool_view import PoolView
from ..song.record import Song, SongEvent, SongState
from .tasks import Tasks, describe_error

log = logging.getLogger(__name__)

HEALTH_EVERY = 2.0
POOL_EVERY = 3.0  # the pool's state for the status line and the tray (no Redis asked)
POOL_SETTLE_S = 0.3  # after a song moved: its members' queues, read once it settled
STREAM_RETRY_S = 1.0
SETTLE_AT = 1000  # songs in one list read: then the collector is settled again
POOL_MOVES = ("queued", "stage", "done", "failed", "cancelled", "removed")


def node_url(cfg: config.Config) -> str:
    """The address the app drives: ``app.node_url``, else the local node from node.toml."""
    url = cfg.get("app.node_url").strip()
    if url:
        return url.rstrip("/")
    from ..client.nodeclient import local_url

    return local_url(cfg)


REMOTE_TOKEN = "remote-node-token"


def remote_token() -> str | None:
    """The token the user gave for a remote node (OS keyring)."""
    try:
        from ..system.secrets import get_secret

        return get_secret(REMOTE_TOKEN)
    except Exception:
        return None


class NodeLink(QObject):
    state_changed = Signal(str)  # a LinkState
    status_changed = Signal(str)  # one line: backend, loaded model, current song
    error = Signal(str)  # something the user should read
    song_updated = Signal(object)  # Song: new, or changed
    song_finished = Signal(object)  # Song that just reached done
    song_removed = Signal(str)  # song id: forgotten by the node (whoever asked)
    songs_loaded = Signal(list)  # [Song] newest first
    system_loaded = Signal(dict)
    models_loaded = Signal(list)
    pull_event = Signal(str, object)  # model name, PullEvent (the node's, or paused/failed)
    backend_event = Signal(str, dict)  # action key, event
    config_loaded = Signal(dict)  # the settings of a node that is not this home's
    pool_changed = Signal(object)  # PoolView, or None: the node is in no pool

    def __init__(
        self, parent: QObject | None = None, *, url: str | None = None, start_child: bool = True
    ):
        super().__init__(parent)
        self.tasks = Tasks(on_error=lambda key, text: self.error.emit(text))
        self.machine = LinkMachine()
        self.client = None
        self.process = None  # the NodeProcess we started, if any
        self.songs: dict[str, Song] = {}
        self.system: dict[str, Any] = {}
        self.models: list[dict[str, Any]] = []
        self.node_config: dict[str, Any] = {}
        self._url_override = url
        self._start_child = start_child
        self._theirs_here = False  # a node on this machine that proved the user's token
        self.settle_gc = False  # the app's own link: settle the collector after list reads
        self._settled = False  # the collector settled after a song list was read
        self._streaming = asyncio.Event()
        self.pool: PoolView | None = None
        self._pool_viewers: dict[str, float] = {}  # page → how often it wants the members
        self._pool_nudge = asyncio.Event()

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

    def _set_state(self, state: LinkState, detail: str = "") -> None:
        if self.machine.move(state, detail):
            self.state_changed.emit(str(state))
            self.status_changed.emit(self.status_line())

    def status_line(self) -> str:
        if self.state == LinkState.STOPPED:
            return "Node stopped"
        if self.state == LinkState.STARTING:
            return "Node starting…"
        if self.state == LinkState.ERROR:
            return f"Node error: {self.detail}" if self.detail else "Node error"
        bits = []
        fam = (self.system.get("families") or {}).get("acestep") or {}
        backend = fam.get("pinned") or fam.get("default")
        row = next(
            (
                b
                for b in fam.get("backends") or []
                if isinstance(b, dict) and b.get("name") == backend
            ),
            None,
        )
        if backend and row is not None and not row.get("installed"):
            # the auto choice is only a candidate until an engine build is installed
            bits.append(f"no ACE-Step engine yet ({backend} can be installed)")
        elif backend:
            bits.append(f"backend {backend}" + (" (pinned)" if fam.get("pinned") else ""))
        loaded = self.system.get("loaded")
        if isinstance(loaded, list):
            loaded = ", ".join(str(x.get("model", x) if isinstance(x, dict) else x) for x in loaded)
        if loaded:
            bits.append(f"loaded {loaded}")
        running = [s for s in self.songs.values() if s.state == SongState.RUNNING]
        if running:
            song = running[0]
            bits.append(f"“{song.name[:30]}” {int(song.progress * 100)}%")
        head = "Generating" if self.state == LinkState.GENERATING else "Node ready"
        trouble = self.pool.short_problem() if self.pool is not None else None
        if trouble:  # first: it is what the user must know
            bits.insert(0, f"{trouble} ({self.pool.url})" if self.pool.url else trouble)
        return head + (" — " + ", ".join(bits) if bits else "")

    def _recount(self) -> None:
        """Connected: generating while a song runs, idle otherwise."""
        if self.state.connected:
            busy = any(s.state == SongState.RUNNING for s in self.songs.values())
            self._set_state(LinkState.GENERATING if busy else LinkState.IDLE)
            self.status_changed.emit(self.status_line())

    def _connected(self) -> None:
        """The node answers: idle or generating, whichever the songs say."""
        busy = any(s.state == SongState.RUNNING for s in self.songs.values())
        self._set_state(LinkState.GENERATING if busy else LinkState.IDLE)

    @property
    def remote(self) -> bool:
        """True when the app drives a node that is not this home's: on another machine, or
        one here the user pointed it to that proved the token the user gave (its node.toml
        and its token are not ours). A node here that proves neither is never driven."""
        return self._theirs_here or not config.is_loopback_host(_host_of(self.url))

    def set_settings(self, changes: dict[str, Any], on_error=None, on_done=None) -> None:
        """Change node.toml keys where the node reads them: our file for this home's node,
        the node's ``PATCH /v1/config`` for another (which refuses the keys that may be set
        only on its own machine, with the command to use there). The app's own keys
        (``app.*``) always stay in our file."""
        mine = {k: v for k, v in changes.items() if config.is_app_key(k) or not self.remote}
        theirs = {k: v for k, v in changes.items() if k not in mine}
        if mine:
            try:
                config.update(mine)
            except config.ConfigError as exc:
                (on_error or self.error.emit)(str(exc))
                return
        if not theirs:
            if on_done is not None:
                on_done()
            return

        async def patch():
            answer = await self.client.patch_config(theirs)
            self.node_config = dict(answer.get("values") or {})
            self.config_loaded.emit(self.node_config)
            await self.refresh_system()
            if on_done is not None:
                on_done()

        self.tasks.start("config:" + ",".join(sorted(theirs)), patch(), on_error=on_error)

    async def read_config(self) -> None:
        """The node's settings as the node reads them (``config_loaded``)."""
        answer = await self.client.config()
        self.node_config = dict(answer.get("values") or {})
        self.config_loaded.emit(self.node_config)

    def refresh_config(self) -> None:
        if self.client is not None:
            self.tasks.start("config:read", self.read_config())

    # -- start / stop ---------------------------------------------------------------------
    def start(self) -> None:
        self.tasks.start("node", self._connect())

    def stop(self) -> None:
        self.tasks.start("node", self._stop())

    def restart(self) -> None:
        async def restart():
            await self._stop()
            await self._connect()

        self.tasks.start("node", restart())

    async def shutdown(self) -> None:
        """Quit: stop the node we started (and only that), close the client."""
        await self.tasks.cancel_and_wait()
        await self._stop()

    def _own_address(self) -> bool:
        """The app drives this machine's node at node.toml's address (not one it was given)."""
        return (
            self._start_child
            and self._url_override is None
            and not config.current()[0].get("app.node_url").strip()
        )

    async def _new_client(self):
        """A client of the node we drive: our own child's token is the one it reported;
        this home's other node is found with its own token; another node needs the token the
        user gave for it (kept in the keyring, read off the GUI thread)."""
        from ..client.nodeclient import NodeClient

        if self.remote:
            token = await asyncio.to_thread(remote_token)
        else:
            token = self.process.token if self.process is not None else None
        return NodeClient(self.url, token=token)

    async def _answers(self) -> bool:
        """Whether our node answers, having proved it holds the token; a stranger at its
        address is an error naming it (it is sent nothing, and no node starts on top of it)."""
        from ..client.nodeclient import OURS, STRANGER, NodeClient, StrangerNode

        found = await self.client.identify()
        if found == STRANGER and not self._own_address() and not self._theirs_here:
            # a node here the user pointed the app to: the token the user gave for it
            token = await asyncio.to_thread(remote_token)
            if token:
                theirs = NodeClient(self.url, token=token)
                if await theirs.identify() == OURS:
                    old, self.client, self._theirs_here = self.client, theirs, True
                    await old.aclose()
                    return True
                await theirs.aclose()
        if found == STRANGER:
            raise StrangerNode(self.url)
        return found == OURS

    async def _connect(self) -> None:
        self._set_state(LinkState.STARTING)
        try:
            if self.client is None:
                self.client = await self._new_client()
            answered = await self._answers()
            if not answered:
                if not (self._start_child and config.is_loopback_host(_host_of(self.url))):
                    self._set_state(LinkState.ERROR, f"no node answers at {self.url}")
                    return
                await self._start_process()
                await self._answers()
            self._connected()
            await self.refresh()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._set_state(LinkState.ERROR, describe_error(exc))
            return
        self.tasks.start("events", self._stream_songs())
        self.tasks.start("watch", self._watch())

    async def _start_process(self) -> None:
        """Start our own node child on the configured address, supervised with back-off."""
        from urllib.parse import urlparse

        from ..client.node_process import NodeProcess

        if self.process is None:
            parsed = urlparse(self.url)
            self.process = NodeProcess(
                parsed.hostname or "127.0.0.1", parsed.port or 7823, supervised=True
            )  # watched: restarts on upgrade
        await self.process.start()
        if self.client is not None and self.process.token:
            self.client.use_token(self.process.token)  # the token our child reported
        self.tasks.start("supervise", self.process.watch(on_state=self._on_child))

    def _on_child(self, state: LinkState, detail: str) -> None:
        """The supervisor's news about our child, in the link's own states."""
        self._set_state(state, detail)
        if state.connected:
            self._connected()
            self.refresh_later("all")

    async def _stop(self) -> None:
        for key in ("watch", "events", "supervise", "pool"):
            self.tasks.cancel(key)
        self._set_pool(None)
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
        self._set_state(LinkState.STOPPED)

    async def _watch(self) -> None:
        """Health every few seconds: a node that stopped answering is shown (and a child of
        ours is restarted by its supervisor meanwhile); one that came back is read again; a
        stranger in its place is named."""
        from ..client.nodeclient import StrangerNode

        while True:
            await asyncio.sleep(HEALTH_EVERY)
            try:
                answered = await self._answers()
            except StrangerNode as exc:
                self._set_state(LinkState.ERROR, str(exc))
                continue
            if answered:
                if not self.state.connected:
                    self._connected()
                    await self.refresh()
                continue
            if self.process is None:
                self._set_state(LinkState.ERROR, f"no node answers at {self.url}")
            elif self.state.connected:
                self._set_state(LinkState.STARTING, "the node does not answer; waiting for it")

    # -- data -----------------------------------------------------------------------------
    async def refresh(self) -> None:
        results = await asyncio.gather(
            self.refresh_songs(),
            self.refresh_system(),
            self.refresh_models(),
            self.read_config(),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, Exception):
                self.error.emit(describe_error(result))

    async def refresh_songs(self) -> None:
        self.take_songs(await self.client.songs())

    def take_songs(self, items: list[dict]) -> None:
        """The node's whole song list (its JSON), read and handed to the pages. The first
        list read, and any of :data:`SETTLE_AT` songs or more, is followed (once the pages
        have it) by a settle of the garbage collector when :attr:`settle_gc` is set (the
        app sets it; tests and embedders that make many links do not): what start-up and
        the songs made is then out of its sight, and a keystroke never pays for a walk
        over all of it (:mod:`cantor_desktop.system.gc_settle`)."""
        records = []
        for data in items:
            try:
                records.append(Song.from_json(data))
            except ValueError as exc:  # not one of the node's songs: never a path
                log.warning("skipping a song the node listed: %s", exc)
        self.songs = {r.id: r for r in records}
        self.songs_loaded.emit(sorted(records, key=lambda r: r.created, reverse=True))
        self._recount()
        if self.settle_gc and (not self._settled or len(records) >= SETTLE_AT):
            self._settled = True
            QTimer.singleShot(0, gc_settle.settle)

    async def refresh_system(self) -> None:
        self.system = dict(await self.client.system())
        self.system_loaded.emit(self.system)
        self._pool_from_system(self.system.get("pool"))
        self.status_changed.emit(self.status_line())

    # -- the pool -------------------------------------------------------------------------
    def _pool_from_system(self, block: Any) -> None:
        """``/v1/system``'s pool block: whether the node is in a pool (then the pool is
        followed) and its reachability now; the members stay as last read."""
        found = PoolView.from_json(block)
        if found is None:
            self.tasks.cancel("pool")
            self._set_pool(None)
            return
        self._set_pool(self._merged(found))
        if not self.tasks.running("pool"):
            self.tasks.start("pool", self._follow_pool())

    def _merged(self, brief: PoolView) -> PoolView:
        """The pool's state from a brief answer, its members as last read."""
        if self.pool is not None and self.pool.members and not brief.members:
            return dataclasses.replace(self.pool, state=brief.state, error=brief.error)
        return brief

    def _set_pool(self, view: PoolView | None) -> None:
        if view == self.pool:
            return
        trouble_before = self.pool.short_problem() if self.pool is not None else None
        self.pool = view
        self.pool_changed.emit(view)
        if (view.short_problem() if view is not None else None) != trouble_before:
            self.status_changed.emit(self.status_line())

    async def read_pool(self, brief: bool = False) -> PoolView | None:
        """``GET /v1/pool`` now (``brief``: its state only, the members kept as last read);
        None (and no longer followed) when the node is in none."""
        from ..client.nodeclient import NodeError

        try:
            data = await self.client.pool(brief=brief, songs=False)  # members and lanes
        except NodeError as exc:
            if exc.status != 404:
                raise
            self._set_pool(None)
            return None
        view = PoolView.from_json(data)
        if view is not None:
            view = self._merged(view)
        self._set_pool(view)
        return view

    async def _follow_pool(self) -> None:
        """The pool for as long as the node is in one: its state every few seconds, its
        members first and then as often as the open pages that show them ask, and soon
        after a nudge (a page opened, a song moved). A failed read is the node's absence,
        which the health check shows: tried again next time."""
        last_full: float | None = None
        nudged = False
        while True:
            self._pool_nudge.clear()
            full_every = min(self._pool_viewers.values(), default=None)
            now = time.monotonic()
            full = last_full is None or (
                full_every is not None and (nudged or now - last_full >= full_every)
            )
            try:  # the members only when wanted: reading them costs the node's Redis
                if await self.read_pool(brief=not full) is None:
                    return
                if full:
                    last_full = now
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("the pool was not read: %s", exc)
            try:
                await asyncio.wait_for(self._pool_nudge.wait(), min(POOL_EVERY, full_every or 1e9))
                await asyncio.sleep(POOL_SETTLE_S)  # a burst of events: one read
                nudged = True
            except TimeoutError:
                nudged = False

    def show_pool(self, viewer: str, every: float | None) -> None:
        """A page that shows the pool's members opened (``every``: how often it wants
        them, in seconds; read now) or closed (None)."""
        if every is not None:
            self._pool_viewers[viewer] = every
            self._pool_nudge.set()
        else:
            self._pool_viewers.pop(viewer, None)

    async def refresh_models(self) -> None:
        raw = await self.client.models(all=True)  # the catalogue too: what can be pulled
        self.models = list(raw.get("models", raw) if isinstance(raw, dict) else raw)
        self.models_loaded.emit(self.models)

    def refresh_later(self, what: str = "all") -> None:
        coro = {
            "songs": self.refresh_songs,
            "system": self.refresh_system,
            "models": self.refresh_models,
        }.get(what, self.refresh)
        if self.client is not None:
            self.tasks.start(f"refresh:{what}", coro())

    # -- songs ----------------------------------------------------------------------------
    async def _stream_songs(self) -> None:
        """Follow every song the node has for as long as we are connected. After a drop the
        list is read afresh (what happened meanwhile), then the stream again."""
        first = True
        while True:
            try:
                if not first:
                    await self.refresh_songs()
                first = False
                async with contextlib.aclosing(self.client.all_events()) as events:
                    async for kind, data in events:
                        if kind == "hello":
                            self._streaming.set()
                            continue
                        try:
                            event = SongEvent.from_sse(kind, data)
                        except ValueError as exc:
                            log.warning("an event the app does not know: %s", exc)
                            continue
                        self._fold(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("the song stream dropped: %s", exc)
            self._streaming.clear()
            await asyncio.sleep(STREAM_RETRY_S)

    def _fold(self, event: SongEvent) -> None:
        """One event of any song into :attr:`songs`, and out as signals."""
        if event.kind == "removed":
            if self.songs.pop(event.song_id, None) is not None:
                self.song_removed.emit(event.song_id)
            self._recount()
            return
        song = self.songs.get(event.song_id)
        if song is None:
            if event.song is None:
                return  # progress of a song we have not seen added: the list has it
            song = self.songs[event.song_id] = event.song
        else:
            song.apply(event)
        self.song_updated.emit(song)
        if event.kind == "done":
            self.song_finished.emit(song)
        if self.pool is not None and self._pool_viewers and event.kind in POOL_MOVES:
            self._pool_nudge.set()  # a member's queue changed: shown soon
        self._recount()

    async def submit(self, body: dict[str, Any], node: str | None = None) -> Song:
        """Queue a song; in a pool ``node`` sends it to that member (None: any)."""
        if self.client is None:
            raise RuntimeError("The node is not running; start it from the tray or the status bar")
        song_id = await self.client.submit_song(body, node)
        song = self.songs.get(song_id)  # the stream may have told us already
        if song is None:
            song = self.songs[song_id] = Song(id=song_id, request=dict(body), created=time.time())
            self.song_updated.emit(song)
        return song

    def change_song(
        self,
        song_id: str,
        *,
        title: str | None = None,
        favourite: bool | None = None,
        on_error=None,
    ) -> None:
        """Rename a song or mark it a favourite, on the node (the stream brings it back)."""

        async def change():
            data = await self.client.change_song(song_id, title=title, favourite=favourite)
            self._fold(SongEvent("changed", song_id, song=Song.from_json(data)))

        self.tasks.start(f"change:{song_id}", change(), on_error=on_error)

    def forget_song(self, song_id: str, on_error=None, delete_files: bool = False) -> None:
        """The song's file went to the trash: the node forgets it too, so it stays gone
        (``delete_files``: the node deletes its files too — a song made on another machine)."""
        self.songs.pop(song_id, None)
        if self.client is None:
            return

        async def forget():
            await self.client.delete_song(song_id, delete_files=delete_files)

        self.tasks.start(f"forget:{song_id}", forget(), on_error=on_error)

    def retry_song(self, song_id: str) -> None:
        async def retry():
            await self.client.retry(song_id)

        self.tasks.start(f"retry:{song_id}", retry())

    def cancel_song(self, song_id: str) -> None:
        async def cancel():
            await self.client.cancel(song_id)

        self.tasks.start(f"cancel:{song_id}", cancel())

    # -- models ---------------------------------------------------------------------------
    def pull(self, name: str) -> None:
        """Download a model on the node; every step goes out on ``pull_event`` as a
        PullEvent, ending with ``done``, ``failed`` or ``paused``."""
        from ..models.events import PullEvent

        async def pull():
            ended = False
            try:
                async with contextlib.aclosing(self.client.pull(name)) as stream:
                    async for event in stream:
                        ended = event.is_terminal
                        self.pull_event.emit(name, event)
                        if ended:
                            return
                self.pull_event.emit(
                    name, PullEvent.failed(name, "the node ended the download without finishing it")
                )
            except asyncio.CancelledError:
                if not ended:
                    self.pull_event.emit(name, PullEvent.paused(name))
                raise
            except Exception as exc:
                self.pull_event.emit(
                    name, PullEvent.failed(name, describe_error(exc), type(exc).__name__)
                )
            finally:
                self.refresh_later("models")

        if self.client is None:
            self.pull_event.emit(name, PullEvent.failed(name, "the node is not running"))
            return
        self.tasks.start(f"pull:{name}", pull())

    def pause_pull(self, name: str) -> None:
        """Stop the transfer; the .part files stay and pulling again resumes them."""
        self.tasks.cancel(f"pull:{name}")

    def discard_pull(self, name: str, on_done=None, on_error=None) -> None:
        """Stop a pull and delete what it left on the node (its .part files);
        ``on_done(answer)`` with what was deleted, ``on_error(text)`` with why not."""
        self.pause_pull(name)

        async def discard():
            try:
                return await self.client.discard_parts(name)
            finally:
                await self.refresh_models()

        self._model_task(f"discard:{name}", discard(), on_done, on_error)

    def remove_model(self, name: str, on_done=None, on_error=None) -> None:
        async def remove():
            try:
                return await self.client.delete_model(name)
            finally:
                await self.refresh_models()

        self._model_task(f"remove:{name}", remove(), on_done, on_error)

    def import_models(
        self, files: list[str], on_done=None, on_error=None, on_progress=None
    ) -> None:
        """Bring .gguf files to the node's library: this home's node adopts them where they
        are; a remote node gets each file uploaded (checked here first, so a file that is
        not a model is never sent). ``on_done([(path, answer or None, error or "")])``;
        ``on_progress(path, sent, total)`` while uploading."""
        remote = self.remote

        async def one(path: str) -> dict:
            if not remote:
                return await self.client.import_model(path)
            from ..models.importer import check_file

            await asyncio.to_thread(check_file, path)
            report = (lambda sent, total: on_progress(path, sent, total)) if on_progress else None
            return await self.client.upload_model(path, on_progress=report)

        async def run() -> list:
            outcomes = []
            try:
                for path in files:
                    try:
                        outcomes.append((path, await one(path), ""))
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        from ..models.library import LibraryError

                        why = str(exc) if isinstance(exc, LibraryError) else describe_error(exc)
                        outcomes.append((path, None, why))
            finally:
                await self.refresh_models()
            return outcomes

        self._model_task("import", run(), on_done, on_error)

    def _model_task(self, key: str, coro, on_done, on_error) -> None:
        if self.client is None:
            coro.close()
            (on_error or self.error.emit)("the node is not running")
            return
        self.tasks.start(key, coro, on_done=on_done, on_error=on_error)

    # -- backends and settings ------------------------------------------------------------
    def backend_action(self, action: str, backend: str | None = None) -> str:
        """use / update / find; events go out on ``backend_event`` under the key."""
        key = f"backend:{action}:{backend or ''}"

        def emit(event: dict) -> None:
            self.backend_event.emit(key, event)

        async def stream(iterator, who: str | None) -> bool:
            async with contextlib.aclosing(iterator) as events:
                return await consume(events, who)

        async def consume(iterator, who: str | None) -> bool:
            async for event, data in iterator:
                data = data if isinstance(data, dict) else {"message": data}
                if event == "error":
                    emit(
                        {
                            "backend": who,
                            "outcome": "rejected",
                            "message": data.get("message") or "failed",
                        }
                    )
                    return False
                if event == "done":
                    return True
                emit({"backend": who, "event": event, **data})
            return True

        async def run():
            try:
                if action == "use":  # fetch if needed, trial-load, pin ("auto" unpins)
                    ok = await stream(self.client.use_backend(backend or "auto"), backend)
                elif action == "update":
                    ok = await stream(self.client.update_backends(), None)
                else:  # "find": the node tries the candidates, best first
                    ok = await stream(self.client.install_backend(), None)
                # a refusal's reason went out as its own event just before: not again here
                emit({"state": "done" if ok else "failed", "error": ""})
            except asyncio.CancelledError:
                emit({"state": "cancelled"})
                raise
            except Exception as exc:
                emit({"state": "failed", "error": describe_error(exc)})
                raise
            finally:
                self.refresh_later("system")

        self.tasks.start(key, run())
        return key


def _host_of(url: str) -> str:
    from urllib.parse import urlparse

    return urlparse(url).hostname or ""
