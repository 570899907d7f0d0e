"""The app's one connection to the node: start/stop the child node, follow songs, pull models.

A QObject shell over :class:`cantor_desktop.nodeclient.NodeClient` and
:class:`cantor_desktop.node.launcher.NodeProcess`. Every network or process step runs as an
asyncio task on the Qt loop (see :mod:`.tasks`); pages only call methods and listen to
signals. The node's state for the tray and the status bar is one of
``stopped, starting, idle, generating, error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from PySide6.QtCore import QObject, Signal

from .. import access, config
from .song_records import SongRecord
from .tasks import Tasks, describe_error

log = logging.getLogger(__name__)

STATES = ("stopped", "starting", "idle", "generating", "error")
HEALTH_EVERY = 1.0


def node_url(cfg: config.Config) -> str:
    """The address the app drives: ``app.node_url``, else the local node from node.toml."""
    url = cfg.get("app.node_url").strip()
    if url:
        return url.rstrip("/")
    host = cfg.get("node.host")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{cfg.get('node.port')}"


REMOTE_TOKEN = "remote-node-token"


def remote_token() -> str | None:
    """The token the user gave for a remote node (OS keyring)."""
    try:
        from ..secrets import get_secret
        return get_secret(REMOTE_TOKEN)
    except Exception:
        return None


class NodeLink(QObject):
    state_changed = Signal(str)
    status_changed = Signal(str)      # one line: backend, loaded model, current song
    error = Signal(str)               # something the user should read
    song_updated = Signal(object)     # SongRecord
    song_finished = Signal(object)    # SongRecord that just reached done
    songs_loaded = Signal(list)       # [SongRecord] newest first
    system_loaded = Signal(dict)
    models_loaded = Signal(list)
    pull_event = Signal(str, dict)    # model name, progress event (or {"state": ...})
    backend_event = Signal(str, dict) # action key, event
    config_loaded = Signal(dict)      # the settings of a node that is not this home's

    def __init__(self, parent: QObject | None = None, *, url: str | None = None,
                 start_child: bool = True):
        super().__init__(parent)
        self.tasks = Tasks(on_error=lambda key, text: self.error.emit(text))
        self.state = "stopped"
        self.detail = ""
        self.client = None
        self.process = None            # the NodeProcess we started, if any
        self.songs: dict[str, SongRecord] = {}
        self.system: dict[str, Any] = {}
        self.models: list[dict[str, Any]] = []
        self.node_config: dict[str, Any] = {}
        self._url_override = url
        self.home: str | None = None     # the home the node serves (its /v1/health)
        self._start_child = start_child
        self._following: set[str] = set()

    # -- state ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._url_override or node_url(config.load_or_defaults()[0])

    @property
    def owns_node(self) -> bool:
        return self.process is not None

    def _set_state(self, state: str, detail: str = "") -> None:
        changed = state != self.state or detail != self.detail
        self.state, self.detail = state, detail
        if changed:
            self.state_changed.emit(state)
            self.status_changed.emit(self.status_line())

    def status_line(self) -> str:
        if self.state == "stopped":
            return "Node stopped"
        if self.state == "starting":
            return "Node starting…"
        if self.state == "error":
            return f"Node error: {self.detail}" if self.detail else "Node error"
        bits = []
        fam = (self.system.get("families") or {}).get("acestep") or {}
        backend = fam.get("pinned") or fam.get("default")
        row = next((b for b in fam.get("backends") or []
                    if isinstance(b, dict) and b.get("name") == backend), None)
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
        running = [s for s in self.songs.values() if s.state == "running"]
        if running:
            song = running[0]
            bits.append(f"“{song.caption[:30]}” {int(song.progress * 100)}%")
        head = "Generating" if self.state == "generating" else "Node ready"
        return head + (" — " + ", ".join(bits) if bits else "")

    def _recount(self) -> None:
        if self.state in ("idle", "generating"):
            busy = any(s.state in ("running",) for s in self.songs.values())
            self._set_state("generating" if busy else "idle")
            self.status_changed.emit(self.status_line())

    @property
    def remote(self) -> bool:
        """True when the app drives a node that is not this home's (on another machine, or
        another home here): its node.toml and its token are not ours. Known for sure once
        the node said which home it serves; before that, judged by its address."""
        if self.home is not None:
            return self.home != access.home_key()
        return not config.is_loopback_host(_host_of(self.url))

    def set_settings(self, changes: dict[str, Any], on_error=None, on_done=None) -> None:
        """Change node.toml keys where the node reads them: our file for this home's node,
        the node's ``PATCH /v1/config`` for another (which refuses the keys that may be set
        only on its own machine, with the command to use there). The app's own keys
        (``app.*``) always stay in our file."""
        mine = {k: v for k, v in changes.items() if k.startswith("app.") or not self.remote}
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

    def refresh_config(self) -> None:
        """Read the settings of a node that is not this home's (``config_loaded``)."""
        async def read():
            answer = await self.client.config()
            self.node_config = dict(answer.get("values") or {})
            self.config_loaded.emit(self.node_config)
        if self.client is not None:
            self.tasks.start("config:read", read())

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

    def _new_client(self):
        """A client of the node we drive: this home's node is found with its own token;
        another node needs the token the user gave for it (kept in the keyring)."""
        from ..nodeclient import NodeClient
        return NodeClient(self.url, token=remote_token() if self.remote else None)

    async def _answers(self) -> bool:
        try:
            health = await self.client.health()
        except Exception:
            return False
        home = health.get("home") if isinstance(health, dict) else None
        if home != self.home:
            was_remote = self.remote
            self.home = home
            if self.remote != was_remote:         # the token it wants is another one
                old, self.client = self.client, self._new_client()
                await old.aclose()
        return True

    async def _connect(self) -> None:
        self._set_state("starting")
        try:
            if self.client is None:
                self.client = self._new_client()
            if not await self._answers():
                if not (self._start_child and config.is_loopback_host(_host_of(self.url))):
                    self._set_state("error", f"no node answers at {self.url}")
                    return
                await self._start_process()
            self._set_state("idle")
            await self.refresh()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._set_state("error", describe_error(exc))
            return
        self.tasks.start("watch", self._watch())

    async def _start_process(self) -> None:
        """Start our own node child on the configured address, supervised with back-off."""
        from urllib.parse import urlparse

        from ..node.launcher import NodeProcess
        if self.process is None:
            parsed = urlparse(self.url)
            self.process = NodeProcess(parsed.hostname or "127.0.0.1", parsed.port or 7823)
        await self.process.start()
        self.tasks.start("supervise", self.process.watch(on_state=self._on_child))

    def _on_child(self, state: str, detail: str) -> None:
        """The supervisor's news about our child: exited, restarting, running, failed."""
        if state == "exited":
            self._set_state("starting", f"the node stopped ({detail}); restarting it")
        elif state == "restarting":
            self._set_state("starting", f"restarting the node {detail}")
        elif state == "running":
            self._set_state("idle")
            self.refresh_later("all")
        elif state == "failed":
            self._set_state("error", detail)

    async def _stop(self) -> None:
        self.tasks.cancel("watch")
        self.tasks.cancel("supervise")
        for key in [k for k in self.tasks.keys() if k.startswith("song:")]:
            self.tasks.cancel(key)
        self._following.clear()
        process, self.process = self.process, None
        if process is not None:
            try:
                await process.stop()
            except Exception as exc:
                log.warning("stopping the node: %s", exc)
        client, self.client = self.client, None
        self.home = None
        if client is not None:
            close = getattr(client, "aclose", None) or getattr(client, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:
                    pass
        self._set_state("stopped")

    async def _watch(self) -> None:
        """Health every second; a child that died is restarted by its supervisor — show it."""
        misses = 0
        while True:
            await asyncio.sleep(HEALTH_EVERY)
            if await self._answers():
                if misses or self.state in ("starting", "error"):
                    misses = 0
                    self._set_state("idle")
                    await self.refresh()
                    for rec in list(self.songs.values()):
                        if not rec.finished:
                            self.follow(rec.id)
                else:
                    self._recount()
                continue
            misses += 1
            if self.process is None:
                self._set_state("error", f"no node answers at {self.url}")
            elif self.state not in ("starting", "error"):
                self._set_state("starting", "the node does not answer; waiting for it")

    # -- data -----------------------------------------------------------------------------
    async def refresh(self) -> None:
        results = await asyncio.gather(self.refresh_songs(), self.refresh_system(),
                                       self.refresh_models(), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                self.error.emit(describe_error(result))

    async def refresh_songs(self) -> None:
        raw = await self.client.songs()
        items = raw.get("songs", []) if isinstance(raw, dict) else raw
        records = []
        for data in items:
            try:
                records.append(SongRecord.from_node(data))
            except ValueError as exc:       # an id that is not the node's: never a path
                log.warning("skipping a song the node listed: %s", exc)
        self.songs = {r.id: r for r in records}
        self.songs_loaded.emit(sorted(records, key=lambda r: r.created, reverse=True))
        for rec in records:
            if not rec.finished:
                self.follow(rec.id)
        self._recount()

    async def refresh_system(self) -> None:
        self.system = dict(await self.client.system())
        self.system_loaded.emit(self.system)
        self.status_changed.emit(self.status_line())

    async def refresh_models(self) -> None:
        raw = await self.client.models(all=True)  # the catalogue too: what can be pulled
        self.models = list(raw.get("models", raw) if isinstance(raw, dict) else raw)
        self.models_loaded.emit(self.models)

    def refresh_later(self, what: str = "all") -> None:
        coro = {"songs": self.refresh_songs, "system": self.refresh_system,
                "models": self.refresh_models}.get(what, self.refresh)
        if self.client is not None:
            self.tasks.start(f"refresh:{what}", coro())

    # -- songs ----------------------------------------------------------------------------
    async def submit(self, body: dict[str, Any]) -> SongRecord:
        if self.client is None:
            raise RuntimeError("The node is not running; start it from the tray or the status bar")
        song_id = await self.client.submit_song(body)
        rec = SongRecord(id=song_id, caption=body.get("caption", ""), params=dict(body),
                         model=body.get("model") or "")
        import time
        rec.created = time.time()
        self.songs[song_id] = rec
        self.song_updated.emit(rec)
        self.follow(song_id)
        return rec

    def follow(self, song_id: str) -> None:
        if song_id in self._following:
            return
        self._following.add(song_id)
        self.tasks.start(f"song:{song_id}", self._follow(song_id))

    async def _follow(self, song_id: str) -> None:
        try:
            async with contextlib.aclosing(self.client.events(song_id)) as events:
                async for event, data in events:
                    if self._fold(song_id, event, data or {}):
                        break
            rec = self.songs.get(song_id)
            if rec is not None and rec.state == "done":
                try:
                    rec = SongRecord.from_node(await self.client.song(song_id))
                    self.songs[song_id] = rec
                    self.song_updated.emit(rec)
                except Exception:
                    pass
                self.song_finished.emit(rec)
        finally:
            self._following.discard(song_id)

    def _fold(self, song_id: str, event: str, data: dict) -> bool:
        """Apply one event; True when the song reached its end."""
        rec = self.songs.get(song_id) or SongRecord(id=song_id)
        self.songs[song_id] = rec
        rec.apply_event(event, data)
        self.song_updated.emit(rec)
        self._recount()
        return rec.finished

    def forget_song(self, song_id: str, on_error=None, delete_files: bool = False) -> None:
        """The song's file went to the trash: the node forgets it too, so it stays gone
        (``delete_files``: the node deletes its files too — a song made on another machine)."""
        self.songs.pop(song_id, None)
        self._following.discard(song_id)
        if self.client is None:
            return

        async def forget():
            await self.client.delete_song(song_id, delete_files=delete_files)
        self.tasks.start(f"forget:{song_id}", forget(), on_error=on_error)

    def cancel_song(self, song_id: str) -> None:
        async def cancel():
            await self.client.cancel(song_id)
        self.tasks.start(f"cancel:{song_id}", cancel())

    # -- models ---------------------------------------------------------------------------
    def pull(self, name: str) -> None:
        async def pull():
            try:
                async with contextlib.aclosing(self.client.pull(name)) as stream:
                    async for event, data in stream:
                        data = data if isinstance(data, dict) else {"message": data}
                        if event == "error":
                            self.pull_event.emit(name, {"state": "failed",
                                                        "error": data.get("message") or "failed"})
                            return
                        if event == "done":  # engine_ready / engine_error ride along
                            self.pull_event.emit(name, {**data, "state": "done"})
                            return
                        self.pull_event.emit(name, {"event": event, **data})
                self.pull_event.emit(name, {"state": "done"})
            except asyncio.CancelledError:
                self.pull_event.emit(name, {"state": "paused"})
                raise
            except Exception as exc:
                self.pull_event.emit(name, {"state": "failed", "error": describe_error(exc)})
                raise
            finally:
                self.refresh_later("models")
        self.tasks.start(f"pull:{name}", pull())

    def pause_pull(self, name: str) -> None:
        """Stop the transfer; the .part files stay and pulling again resumes them."""
        self.tasks.cancel(f"pull:{name}")

    def remove_model(self, name: str) -> None:
        async def remove():
            await self.client.delete_model(name)
            await self.refresh_models()
        self.tasks.start(f"remove:{name}", remove())

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
                    emit({"backend": who, "outcome": "rejected",
                          "message": data.get("message") or "failed"})
                    return False
                if event == "done":
                    return True
                emit({"backend": who, "event": event, **data})
            return True

        async def run():
            try:
                if action == "use":      # fetch if needed, trial-load, pin ("auto" unpins)
                    ok = await stream(self.client.use_backend(backend or "auto"), backend)
                elif action == "update":
                    ok = await stream(self.client.update_backends(), None)
                else:                    # "find": the node tries the candidates, best first
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
