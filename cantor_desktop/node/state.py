"""What the node's API handlers share: the song queue, the runner, the hardware probe, the
one backend action at a time, and the shutdown hooks (:class:`NodeState`, one per app)."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import StreamingResponse

from .. import config
from .http_common import ApiError, progress_stream, sse_message, sse_response
from .queue import SongQueue
from .runner import Runner

log = logging.getLogger(__name__)

HARDWARE_TTL_S = 60.0


class NodeState:
    """What the API handlers share: the queue, the runner, shutdown hooks."""

    def __init__(self, queue: SongQueue, runner: Runner, pool: Any = None):
        self.queue = queue
        self.runner = runner
        self.pool = pool  # a .pool.Pool when this node is a member of one, else None
        self.backend_action: str | None = None  # the one backend install/use/update running
        self._hardware: tuple[float, Any] | None = None
        self.started = time.time()
        self.shutting_down = asyncio.Event()
        self.restart_requested = False
        self.token: str | None = None  # what every request carries (health proves it)
        self.request_exit: Callable[[], None] = lambda: None
        self.exiting: Callable[[], bool] = lambda: False  # the server is stopping
        self._hardware_lock = asyncio.Lock()

    async def hardware(self) -> Any:
        """The hardware probe (it starts nvidia-smi and vulkaninfo): at most once every
        :data:`HARDWARE_TTL_S`, and afresh after a backend action."""
        async with self._hardware_lock:
            if self._hardware is None or time.monotonic() - self._hardware[0] > HARDWARE_TTL_S:
                from ..system import hardware

                found = await asyncio.to_thread(hardware.probe_from_env)
                self._hardware = (time.monotonic(), found)
            return self._hardware[1]

    def backend_stream(self, what: str, work) -> StreamingResponse:
        """Run one backend action (install, use, update) as an SSE stream; a second one while
        it runs is a 409 naming the first. The action ends with its stream, however that
        ends (an abandoned stream is released when it is collected)."""
        if self.backend_action is not None:
            raise ApiError(
                409,
                f"{self.backend_action} is running; one backend action at a "
                f"time (try again when it ends)",
                "busy",
                running=self.backend_action,
            )
        self.backend_action = what
        released = False
        log.info("backend %s started", what)

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.backend_action = None
                self._hardware = None  # an install can change what the probe sees

        async def stream():
            ended = "ended before it finished (the client went away)"
            try:
                async for chunk in progress_stream(work):
                    if chunk.startswith(b"event: done"):
                        ended = "done"
                    elif chunk.startswith(b"event: error"):
                        ended = "failed: " + sse_message(chunk)
                    yield chunk
            finally:
                log.info("backend %s %s", what, ended)
                release()

        body = stream()
        weakref.finalize(body, release)
        return sse_response(body)

    def check_room(self, cap: int) -> None:
        """429 when ``cap`` songs are already waiting or running."""
        waiting = self.queue.waiting_count()
        if waiting >= cap:
            raise ApiError(
                429,
                f"the queue is full: {waiting} songs are waiting or running "
                f"(node.max_queue = {cap}); try again when some have finished",
                "queue_full",
                cap=cap,
            )


async def default_state(listen: tuple[str, int] | None = None) -> NodeState:
    """The queue and the runner: the embedded queue, or a pool's when a pool URL is given
    (``cantor node --pool``, ``[pool] url``); ``listen`` is the node's address."""
    from ..system.paths import paths

    from . import leftovers

    p = paths().ensure()
    await asyncio.to_thread(leftovers.end_leftovers)
    cfg, _err = config.current()
    from .pool.membership import pool_url

    url = pool_url(cfg)
    if url:
        from .pool.membership import Pool

        pool = Pool(url, cfg, listen or (cfg.get("node.host"), cfg.get("node.port")))
        await pool.open()
        runner = Runner(pool.queue)
        pool.bind(runner)
        return NodeState(pool.queue, runner, pool)
    queue = SongQueue(p.queue_file)
    stopped = queue.load()
    if stopped:
        log.warning("%d song(s) were running when the node stopped; marked failed", len(stopped))
    return NodeState(queue, Runner(queue))


def node(request: Request) -> NodeState:
    return request.app.state.node


def node_token(request: Request) -> str | None:
    """The token the node's requests carry (None before start-up is over, and in tests of
    the handlers alone)."""
    state = getattr(request.app.state, "node", None)
    return getattr(state, "token", None)


def node_config() -> config.Config:
    """node.toml as the runner reads it; a 500 naming the problem when it cannot be read."""
    from .runner import current_config

    cfg, err = current_config()
    if err is not None:
        raise ApiError(500, f"node.toml cannot be read: {err}", "config_error")
    return cfg
