"""Starting, stopping and watching a node child process (Qt-free; the app and `cantor sing`
use it).

:func:`ensure_node` returns the URL of a node that answers, starting a private one only when
none does. A :class:`NodeProcess` starts its child windowless and tied to this process
(:mod:`cantor_desktop.system.procs`: it ends when we end, however we end), and stops only the
process it started: ``POST /v1/node/shutdown`` with its token (the node stops its engines and
clears its records), then a signal where there is one, then a kill — and any engine of it
still running after that. :meth:`NodeProcess.watch` restarts it with back-off if it dies,
and at once, as no crash, when it exits asking to be restarted (``cantor upgrade``).

The child's stderr goes to its own file (``node-stderr.log``), never into ``node.log``,
which the node rotates itself: Windows cannot rename a file another process holds open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable


from ..auth import access
from .. import config
from ..system import procs
from ..errors import CantorError
from .link_state import LinkState
from ..system.net import connect_host, http_url
from ..system.paths import paths
from ..system.selfexec import self_argv

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
"""How long a node child may take to say its token and answer. A warm start takes a second
or two, but the first start after an install can take tens of seconds where every module
is read cold and scanned (Windows Defender reads a fresh bundle's files on first use; the
Windows lane's CPU-starved Wine is another such machine); a child that exits is noticed at
once all the same."""
STOP_TIMEOUT = 8.0  # for the node to stop after it was asked
SIGNAL_GRACE = 5.0  # then after SIGTERM, before a kill
STDERR_FILE = "node-stderr.log"
STDERR_KEEP = 1024 * 1024  # a longer stderr file is set aside (.1) at the next start
BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_RESET_AFTER = 0.5, 30.0, 60.0


class NodeStartError(CantorError, RuntimeError):
    """The node child did not come up; the message carries its own last words."""


async def answers(url: str, timeout: float = 1.0) -> bool:
    """True when something answers at ``url`` (this home's node, or a stranger)."""
    from .nodeclient import NO_NODE, which_node

    return await which_node(url, timeout) != NO_NODE


class NodeProcess:
    """One node child: ``self_argv("node") + ["--host", h, "--port", p]``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        token: str | None = None,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        supervised: bool = False,
    ):
        if port is None:
            port = config.load_or_defaults()[0].get("node.port")
        self.host = host
        self.port = int(port)
        self.token = token
        """The child's token: given, else its home's (made now when it has none), handed to
        the child in its environment so that both are sure to hold the same one."""
        self.env = env
        self.log_path = log_path or paths(self._child_env()).logs_dir / STDERR_FILE
        """Where the child's stderr goes (its last words when it fails to start)."""
        self.supervised = supervised
        """True when :meth:`watch` will run: the child then exits with
        :data:`procs.RESTART_EXIT_CODE` to be restarted, instead of replacing itself."""
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._stopping = False
        self._log_offset = 0
        self._started_at = 0.0

    @property
    def url(self) -> str:
        return http_url(self.host, self.port)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _child_env(self) -> dict[str, str]:
        return {**os.environ, **(self.env or {})}

    def argv(self) -> list[str]:
        # below normal priority, its engines with it (system/procs/priority.py)
        return self_argv("node") + ["--host", self.host, "--port", str(self.port), "--background"]

    async def start(self, timeout: float = READY_TIMEOUT) -> str:
        """Start the child and wait until it answers; returns its URL."""
        if self.running:
            return self.url
        self._stopping = False
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        _set_aside(self.log_path)
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0
        env = self._child_env()
        report = self.token is None  # the child makes or finds its home's token, and
        if report:  # tells us on stdout (no keyring in this process)
            env[access.REPORT_ENV] = "1"
            env.pop(access.TOKEN_ENV, None)
        elif self.token is not None:
            env[access.TOKEN_ENV] = self.token
        env.pop(procs.SUPERVISED_ENV, None)
        if self.supervised:
            env[procs.SUPERVISED_ENV] = "1"
        procs.child_environment(env)
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if report else subprocess.DEVNULL,
                stderr=err,
                env=env,
                **procs.node_kwargs(),
            )
        procs.tie_child(self.proc.pid)
        self._started_at = time.monotonic()
        log.info("started node pid %d on %s", self.proc.pid, self.url)
        if report:
            await self._read_token(timeout)
        await self.wait_ready(timeout)
        return self.url

    async def _read_token(self, timeout: float) -> None:
        """The one line the child writes on stdout: its token (see access.report_token)."""
        assert self.proc is not None and self.proc.stdout is not None  # started with a pipe
        stdout = self.proc.stdout
        try:
            line = await asyncio.wait_for(asyncio.to_thread(stdout.readline), timeout)
        except TimeoutError:
            line = b""
        finally:
            stdout.close()
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith(access.REPORT_PREFIX.strip()):
            await self.stop()
            raise NodeStartError(
                f"the node did not say its token ({self._last_words() or 'no output'})"
            )
        self.token = text[len(access.REPORT_PREFIX.strip()) :].strip()

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until the child answers — and proves it holds its token: whatever else may answer
        on its port meanwhile is not taken for it."""
        from .nodeclient import OURS, STRANGER, stranger_words, which_node

        deadline = time.monotonic() + timeout
        found = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                stranger = f"{stranger_words(self.url)}; " if found == STRANGER else ""
                raise NodeStartError(
                    f"the node exited (code {code}) before it answered: {stranger}"
                    f"{self._last_words() or 'no output'}"
                )
            found = await which_node(self.url, timeout=1.0, token=self.token)
            if found == OURS:
                return
            if time.monotonic() >= deadline:
                await self.stop()
                why = stranger_words(self.url) if found == STRANGER else "it did not answer"
                raise NodeStartError(
                    f"the node is not ready after {timeout:g} s: {why} (see {self.log_path})"
                )
            await asyncio.sleep(0.05)

    def _last_words(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._log_offset)
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-3:])

    async def stop(self, timeout: float = STOP_TIMEOUT, grace: float = SIGNAL_GRACE) -> int | None:
        """Stop the child this object started and everything it started: ask it
        (``POST /v1/node/shutdown``), wait ``timeout`` s, then SIGTERM (POSIX) and wait
        ``grace`` s, then kill; engines of it still running after that are ended too.
        Returns its exit code."""
        self._stopping = True
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            tree = procs.descendants(proc.pid)
            if await self._ask_to_shut_down():
                await self._wait_exit(proc, timeout)
            if proc.poll() is None and sys.platform != "win32":
                log.warning("node pid %d did not stop when asked; sending SIGTERM", proc.pid)
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
                await self._wait_exit(proc, grace)
            if proc.poll() is None:
                log.warning("node pid %d did not stop; killing it", proc.pid)
                proc.kill()
                await self._wait_exit(proc, None)
            left = [pid for pid in tree if procs.alive(pid)]
            if left:
                log.warning("the node left %d process(es) running; ending them", len(left))
                await asyncio.to_thread(procs.end, left, grace=2.0)
        return proc.returncode

    async def _ask_to_shut_down(self) -> bool:
        """``POST /v1/node/shutdown`` with the child's token; False when it did not take."""
        from .nodeclient import NodeClient

        try:
            async with NodeClient(self.url, token=self.token, timeout=3.0) as client:
                await client.shutdown()
            return True
        except Exception as exc:  # noqa: BLE001 - any failure: the signals come next
            log.info("node pid %s did not take the shutdown request: %s", self.pid, exc)
            return False

    @staticmethod
    async def _wait_exit(proc: subprocess.Popen, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while proc.poll() is None and (deadline is None or time.monotonic() < deadline):
            await asyncio.sleep(0.05)

    async def watch(self, on_state: Callable[[LinkState, str], None] | None = None) -> None:
        """Keep the node running until :meth:`stop`: restart it with back-off when it dies.

        ``on_state(state, detail)`` hears the link's own states: STARTING when the child
        died (the detail says how) and while it is restarted, IDLE once it answers again,
        ERROR when a restart failed (the next one follows after the back-off).
        """
        delay = BACKOFF_FIRST
        while not self._stopping:
            proc = self.proc
            if proc is not None:
                while proc.poll() is None and not self._stopping:
                    await asyncio.sleep(0.2)
                if self._stopping:
                    return
                if proc.returncode == procs.RESTART_EXIT_CODE and self.supervised:
                    if await self._restart_now(on_state):
                        delay = BACKOFF_FIRST
                        continue
                detail = procs.describe_exit(proc.returncode)
                log.warning("node pid %d died (%s)", proc.pid, detail)
                if on_state:
                    on_state(LinkState.STARTING, f"the node stopped ({detail}); restarting it")
                if time.monotonic() - self._started_at > BACKOFF_RESET_AFTER:
                    delay = BACKOFF_FIRST
            if on_state:
                on_state(LinkState.STARTING, f"restarting the node in {delay:g} s")
            await asyncio.sleep(delay)
            if self._stopping:
                return
            try:
                await self.start()
                self.restarts += 1
                if on_state:
                    on_state(LinkState.IDLE, "")
            except NodeStartError as exc:
                log.warning("node restart failed: %s", exc)
                if on_state:
                    on_state(LinkState.ERROR, str(exc))
            delay = min(delay * 2, BACKOFF_MAX)

    async def _restart_now(self, on_state: Callable[[LinkState, str], None] | None) -> bool:
        """The child exited asking to be started again (an upgrade): start it now. Only this
        supervisor starts it, so no second node competes for the port meanwhile."""
        log.info("node pid %d exited to be restarted (upgrade); starting it again", self.pid)
        if on_state:
            on_state(LinkState.STARTING, "restarting the node after an upgrade")
        try:
            await self.start()
        except NodeStartError as exc:
            log.warning("node restart after an upgrade failed: %s", exc)
            if on_state:
                on_state(LinkState.ERROR, str(exc))
            return False
        self.restarts += 1
        if on_state:
            on_state(LinkState.IDLE, "")
        return True


def _set_aside(path: Path) -> None:
    """Keep the stderr file short: past :data:`STDERR_KEEP` it becomes ``….1`` (best effort:
    on Windows a leftover process may still hold it, and then it simply grows on)."""
    try:
        if path.stat().st_size > STDERR_KEEP:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass


async def ensure_node(
    host: str | None = None, port: int | None = None
) -> tuple[str, NodeProcess | None]:
    """A node to talk to: the configured one if it answers, else a private one started now.

    Returns ``(url, process)``; ``process`` is None when the node was already running (not
    ours to stop). Either way this home's token is the one it wants, and the node proved it
    holds it. Anything else on the node's port — a program of another account, another
    Cantor home's node — is a stranger: it is sent nothing, no node is started on top of
    it, and NodeStartError names it.
    """
    from .nodeclient import OURS, STRANGER, local_url, stranger_words, which_node

    cfg, _err = config.load_or_defaults()
    url = local_url(cfg)
    if host is None and port is None and await which_node(url) == OURS:
        return url, None
    host = host or cfg.get("node.host")
    port = port if port is not None else cfg.get("node.port")
    url = http_url(host, port)
    found = await which_node(url)
    if found == OURS:
        return url, None
    if found == STRANGER or _port_taken(connect_host(host).strip("[]"), port):
        raise NodeStartError(stranger_words(url))
    try:
        proc = NodeProcess(host, port)
        return await proc.start(), proc
    except access.TokenError as exc:
        raise NodeStartError(f"the node needs a token: {exc}") from None


def _port_taken(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=0.3):
            return True
    except OSError:
        return False


STOP_WAIT = 15.0


async def stop_node(host: str | None = None, port: int | None = None) -> tuple[int, str]:
    """Ask this home's node (or the one at ``host``/``port``) to stop (``POST
    /v1/node/shutdown``) and wait until it is gone: (0 when it stopped or none ran, 1 when
    it would not; what happened, in words)."""

    from ..system.net import http_url
    from .nodeclient import NodeClient, NodeError, local_url

    cfg, _err = config.load_or_defaults()
    url = (
        local_url(cfg)
        if host is None and port is None
        else http_url(
            host or cfg.get("node.host"), port if port is not None else cfg.get("node.port")
        )
    )
    if not await answers(url):
        return 0, f"no node answers at {url}"
    try:
        async with NodeClient(url) as node:
            await node.shutdown()
    except NodeError as exc:
        return 1, exc.message
    deadline = time.monotonic() + STOP_WAIT
    while await answers(url, timeout=0.5):
        if time.monotonic() > deadline:
            return 1, f"the node at {url} is still running after {STOP_WAIT:g} s"
        await asyncio.sleep(0.1)
    return 0, f"the node at {url} has stopped"
