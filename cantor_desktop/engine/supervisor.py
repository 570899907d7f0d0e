"""One engine process per model family: start it on a free loopback port, know when it is
ready, read its stderr (log file, ring buffer, progress), restart it when it died or when
keep-loaded changed, stop it gracefully. Its life is one state machine
(:mod:`.engine_state`): stopped → starting → ready → stopping → exited, or failed (it did not
come up) and crashed (it ended on its own).

ace-server prints ``Listening on`` before it binds and exits 0 when the bind fails, so only
``GET /health`` → 200 proves it is up; an exit before that is reported at once with the
engine's first error line.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import re
from pathlib import Path
from typing import Callable

import httpx

from ..system import logs
from ..errors import CantorError
from ..system.net import free_port
from ..system.paths import paths
from .client import EngineClient, join_reasons
from .engine_state import ON_EXIT, EngineLife, EngineState
from .process_options import engine_environment, engine_process_kwargs
from .progress import LineClassifier, ProgressEvent, ProgressParser, is_error_line

log = logging.getLogger(__name__)

RING_LINES = 200
ERROR_LINES = 200  # error lines kept per process (with their position)
JOB_MARKS = 64  # "Job ID created" positions kept
_LINE_LIMIT = 1024 * 1024  # longest stderr line read whole
_JOB_CREATED = re.compile(r"^\[Server\] Job (\S+) created ")
_GENERATIONS = itertools.count(1)


class EngineStartError(CantorError, RuntimeError):
    """The engine did not come up. ``reason`` is the engine's own line when it gave one."""

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        code: int | None = None,
        lines: list[str] | None = None,
    ):
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.lines = lines or []


from ..system.procs import codesign, describe_exit, follow_priority  # noqa: E402 - "exit code 1", signals, NTSTATUS names


class EngineSupervisor:
    """Owns one engine process. All methods run on one asyncio loop."""

    def __init__(
        self,
        family: str,
        argv: list[str],
        env: dict[str, str],
        models_dir: Path,
        *,
        keep_loaded: bool = False,
        log_path: Path | None = None,
        ready_timeout: float = 60.0,
        adapters_dir: Path | None = None,
    ):
        if not argv:
            raise ValueError("argv: the engine's command is empty")
        self.family = family
        self.argv = list(argv)
        self.env = dict(env)
        self.models_dir = Path(models_dir)
        self.keep_loaded = keep_loaded
        self.adapters_dir = adapters_dir  # ace-server --adapters: scanned at each start
        self.log_path = log_path if log_path is not None else paths().engine_log(family)
        self.ready_timeout = ready_timeout
        self.port: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None
        self._watcher: asyncio.Task | None = None
        self._life = EngineLife()
        self._exit_code: int | None = None  # the process's, once its last lines are read
        self._lines: collections.deque[str] = collections.deque(maxlen=RING_LINES)
        self._launch_lines: list[str] = []  # first lines of the current process
        # this process's lines by position: errors, the last ones, where each job began
        self._generation = 0
        self._count = 0
        self._errors: collections.deque[tuple[int, str, str | None]] = collections.deque(
            maxlen=ERROR_LINES
        )  # (position, line, owning job)
        self._recent: collections.deque[tuple[int, str, str | None]] = collections.deque(
            maxlen=RING_LINES
        )
        self._job_starts: dict[str, int] = {}
        self._latest_job: str | None = None
        self._classifier = LineClassifier()
        self._last_error: str | None = None
        self._parser = ProgressParser()
        self._subscribers: list[Callable[[ProgressEvent], None]] = []
        self._lock = asyncio.Lock()
        self._engine_log = logging.Logger(f"cantor.engine.{family}")  # unregistered: ours only
        self._log_handler: logging.Handler | None = None

    # -- state ----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError(f"the {self.family} engine has not been started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> EngineState:
        """Where the engine is in its life; a process that has just died stays ``ready``
        until its last lines are read (:attr:`running` is False from its exit on)."""
        return self._life.state

    @property
    def running(self) -> bool:
        """Ready, and its process has not exited."""
        return (
            self._life.state is EngineState.READY
            and self._proc is not None
            and self._proc.returncode is None
        )

    @property
    def running_pid(self) -> int | None:
        """The process's pid while it is :attr:`running`, else None."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def ended(self) -> bool:
        """The process has exited and its exit code is known (its last lines read first)."""
        return self._proc is not None and self._exit_code is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    def last_error_line(self) -> str | None:
        """The engine's most recent ERROR/FATAL/"not found" line."""
        return self._last_error

    def mark(self) -> tuple[int, int]:
        """Where the log is now; a client takes it just before it sends a job, so nothing
        read before (an earlier job's lines) is ever taken for that job's."""
        return (self._generation, self._count)

    def _belongs(self, job_id: str | None, since):
        """A test ``(position, owner) -> bool`` for the lines of one job, or None when it went
        to an earlier process. A line's owner is the job whose "Job ID created" line came
        last before it. Lines arrive in order and only a tail is ever lost, so a job whose
        "created" line has not arrived has no line here yet: earlier jobs' late lines are
        never taken for its own."""
        if since is not None and since[0] != self._generation:
            return None
        if job_id:
            return lambda _pos, owner: owner == job_id
        if since is None:  # the latest job
            latest = self._latest_job
            return lambda _pos, owner: owner == latest
        mark = since[1]  # a job whose id never came back: one created after the mark
        return lambda _pos, owner: owner is not None and self._job_starts.get(owner, -1) >= mark

    def failure_reason(self, job_id: str | None = None, since=None) -> str | None:
        """Why the job failed: its own error lines (the first whole, and the last), and how
        the process ended if it died. Without ``job_id`` and ``since``: the latest job's."""
        ended = None
        if self.ended and self._life.state.ended_on_its_own:
            ended = describe_exit(self._exit_code)
        belongs = self._belongs(job_id, since)
        if belongs is None:
            return ended
        reason = join_reasons([line for pos, line, owner in self._errors if belongs(pos, owner)])
        if ended:
            return f"{reason} ({ended})" if reason else ended
        return reason

    def last_words(self, job_id: str | None = None, since=None) -> str | None:
        """The last line the engine printed for the job (the request it echoes aside)."""
        belongs = self._belongs(job_id, since)
        if belongs is None:
            return None
        return next(
            (
                line.strip()
                for pos, line, owner in reversed(self._recent)
                if belongs(pos, owner) and line.strip()
            ),
            None,
        )

    def client(self, **kwargs) -> EngineClient:
        """A client for this engine whose failures carry the engine's own reason, and whose
        cancelled jobs that outlast their grace are ended by stopping this engine."""
        kwargs.setdefault("on_stuck_cancel", self.end_stuck_job)
        return EngineClient(self.base_url, log=self, **kwargs)

    async def end_stuck_job(self, job_id: str) -> None:
        """A cancelled job the engine keeps working on (a DiT step or VAE tile longer than
        the grace): kill the engine now (SIGTERM would let the job finish). The next song
        starts it again."""
        async with self._lock:
            proc = self._proc
            if proc is None or proc.returncode is not None:
                return
            self._engine_log.info("---- stopping: cancelled job %s did not end", job_id)
            self._life.move(EngineState.STOPPING)
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            await self._stopped(proc)

    def subscribe(self, callback: Callable[[ProgressEvent], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def expect_duration(self, seconds: float | None) -> None:
        """Tell the progress parser the next song's duration (LM progress counts codes)."""
        self._parser.expect_duration(seconds)

    # -- life cycle -----------------------------------------------------------------------------

    async def ensure_running(self, keep_loaded: bool | None = None) -> int | None:
        """Start the engine if it is not running (never started, crashed); restart it when
        ``keep_loaded`` differs from the running process's. Call it between songs. Returns
        the running process's pid."""
        async with self._lock:
            if keep_loaded is not None and keep_loaded != self.keep_loaded:
                self.keep_loaded = keep_loaded
                if self._proc is not None and self._proc.returncode is None:
                    await self._stop()
            if not self.running:
                if self._proc is not None and self._proc.returncode is None:
                    await self._stop()  # alive but not ready: a half-started leftover
                await self._start()
            return self.pid

    async def start(self) -> None:
        """Start the engine if it is not running (as :meth:`ensure_running`, keep-loaded as
        it is)."""
        await self.ensure_running()

    async def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM (ace-server finishes its running job), then kill after ``timeout``."""
        async with self._lock:
            await self._stop(timeout)

    async def _start(self) -> None:
        if (
            self._watcher is not None
            and self._proc is not None
            and self._proc.returncode is not None
        ):
            # a process that died a moment ago: its last lines and its exit are read first
            await asyncio.shield(self._watcher)
        for _attempt in range(3):
            port = free_port()
            try:
                await self._launch(port)
                return
            except _PortTaken:
                log.info("%s engine: port %d was taken, trying another", self.family, port)
        raise EngineStartError(f"the {self.family} engine could not bind a port (3 tries)")

    async def _launch(self, port: int) -> None:
        argv = self.argv + [
            "--models",
            str(self.models_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        if self.keep_loaded:
            argv.append("--keep-loaded")
        if self.adapters_dir is not None:
            argv += ["--adapters", str(self.adapters_dir)]
        env = engine_environment(self.env)
        self._open_log()
        self._engine_log.info("---- starting: %s", " ".join(argv))
        self.port = port
        self._life.move(EngineState.STARTING)
        self._exit_code = None
        self._launch_lines = []
        self._generation = next(_GENERATIONS)
        self._count = 0
        self._errors.clear()
        self._recent.clear()
        self._job_starts = {}
        self._latest_job = None
        self._classifier = LineClassifier()
        self._parser = ProgressParser()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                limit=_LINE_LIMIT,
                **engine_process_kwargs(),
            )
            follow_priority(proc.pid)
        except BaseException as exc:  # no process (or cancelled before there was one)
            self._life.move(EngineState.FAILED)
            if isinstance(exc, OSError):
                raise EngineStartError(
                    f"cannot start the {self.family} engine {argv[0]}: {exc}", reason=str(exc)
                ) from exc
            raise
        self._proc = proc
        self._reader = asyncio.create_task(self._read(proc), name=f"{self.family}-stderr")
        self._watcher = asyncio.create_task(self._watch(proc), name=f"{self.family}-watch")
        await self._wait_ready(proc)

    async def _wait_ready(self, proc: asyncio.subprocess.Process) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        url = f"http://127.0.0.1:{self.port}/health"
        watcher = self._watcher
        if watcher is None:
            raise RuntimeError("the engine's process is not watched: _launch starts that first")
        async with httpx.AsyncClient(timeout=1.0) as http:
            while True:
                if watcher.done():
                    raise self._early_exit_error()
                try:
                    response = await http.get(url)
                    if (
                        response.status_code == 200
                        and proc.returncode is None
                        and not any("cannot bind" in line for line in self._launch_lines)
                    ):
                        self._life.move(EngineState.READY)
                        log.info(
                            "%s engine ready on port %d (pid %d)", self.family, self.port, proc.pid
                        )
                        return
                except httpx.HTTPError:
                    pass
                if loop.time() >= deadline:
                    last = self._lines[-1] if self._lines else "nothing"
                    await self._stop()
                    raise EngineStartError(
                        f"the {self.family} engine did not become ready within "
                        f"{self.ready_timeout:g} s; its last line: {last}",
                        reason=last,
                        lines=list(self._launch_lines),
                    )
                # wake at once if the process exits
                await asyncio.wait([watcher], timeout=0.1)

    def _early_exit_error(self) -> Exception:
        code = self._exit_code
        lines = list(self._launch_lines)
        if any("cannot bind" in line for line in lines):
            return _PortTaken()
        first_error = join_reasons([line for line in lines if is_error_line(line)])
        if first_error:
            message = (
                f"the {self.family} engine stopped at start ({describe_exit(code)}): {first_error}"
            )
        elif lines:
            message = (
                f"the {self.family} engine stopped at start ({describe_exit(code)}); "
                f"its last line: {lines[-1]}"
            )
        else:
            message = (
                f"the {self.family} engine stopped at start ({describe_exit(code)}) without a word"
            )
            killed = codesign.killed_reason(self.argv[0], code)
            if killed is not None:
                message += f". {killed.reason}"

        return EngineStartError(
            message, reason=first_error or (lines[-1] if lines else None), code=code, lines=lines
        )

    async def _stop(self, timeout: float = 5.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if self._life.state in (EngineState.STARTING, EngineState.READY):
            self._life.move(EngineState.STOPPING)
        if proc.returncode is None:
            try:
                proc.terminate()
            except ProcessLookupError:
                pass
            watcher = self._watcher
            try:
                await asyncio.wait_for(
                    asyncio.shield(watcher) if watcher is not None else proc.wait(), timeout
                )
            except asyncio.TimeoutError:
                log.warning("%s engine did not stop within %g s; killing it", self.family, timeout)
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
        await self._stopped(proc)

    async def _stopped(self, proc: asyncio.subprocess.Process) -> None:
        """A stop's end: the process's exit seen (and its last lines read), the engine
        ``exited`` whatever it was before."""
        if self._watcher is not None:
            await asyncio.shield(self._watcher)
        self._life.move(EngineState.EXITED)
        self._engine_log.info("---- stopped (%s)", describe_exit(proc.returncode))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        stream = proc.stdout
        assert stream is not None
        while True:
            try:
                raw = await stream.readline()
            except (ValueError, asyncio.LimitOverrunError):
                await stream.read(_LINE_LIMIT)  # an absurdly long line: drop it
                continue
            if not raw:
                return
            self._on_line(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def _on_line(self, line: str) -> None:
        self._engine_log.info("%s", line)
        self._lines.append(line)
        if len(self._launch_lines) < RING_LINES:
            self._launch_lines.append(line)
        position = self._count
        self._count += 1
        kind = self._classifier.classify(line)
        if kind != "echo":
            found = _JOB_CREATED.match(line)
            if found:
                self._job_starts[found.group(1)] = position
                self._latest_job = found.group(1)
                while len(self._job_starts) > JOB_MARKS:
                    del self._job_starts[next(iter(self._job_starts))]
            self._recent.append((position, line, self._latest_job))
        if kind == "error":
            self._last_error = line
            self._errors.append((position, line, self._latest_job))
        event = self._parser.feed(line)
        if event is not None:
            for callback in list(self._subscribers):
                try:
                    callback(event)
                except Exception:  # noqa: BLE001 - one bad subscriber must not stop the reader
                    log.exception("progress subscriber failed")

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if self._reader is not None:
            try:  # the last lines explain the exit: read them before anyone asks
                await asyncio.wait_for(asyncio.shield(self._reader), 2.0)
            except asyncio.TimeoutError:
                pass
        self._exit_code = code
        was = self._life.state
        self._life.move(ON_EXIT[was])
        if was is EngineState.STOPPING:
            return
        self._engine_log.info("---- exited (%s)", describe_exit(code))
        if was is EngineState.READY:
            log.warning(
                "%s engine exited unexpectedly (%s); last error: %s",
                self.family,
                describe_exit(code),
                self._last_error,
            )

    def _open_log(self) -> None:
        if self._log_handler is None:
            self._log_handler = logs.rotating_handler(self.log_path)
            self._engine_log.addHandler(self._log_handler)
            self._engine_log.setLevel(logging.INFO)

    async def aclose(self, timeout: float = 5.0) -> None:
        """Stop the engine and close its log file."""
        await self.stop(timeout)
        if self._log_handler is not None:
            self._engine_log.removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None


class _PortTaken(Exception):
    """The engine printed ``cannot bind``: another process took the port; try a new one."""
