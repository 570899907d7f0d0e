"""Trial-load an engine build: prove the device works, not just that the binary starts.

The procedure of ace-server.md "Trial-loading a build": a probe models folder with one
header-only ``acestep-lm`` GGUF; the build started with ace-server's command line and the
``GGML_BACKEND`` its backend means, on a free loopback port; wait for ``GET /health`` (failing
early when the process exits); ``POST /lm {"caption":"probe","lm_mode":"generate"}``; then read
stderr for ``[Load] LM backend: <device>``. Success is that line naming the device asked for.
The probe job is expected to kill the engine afterwards (no weights), which is fine.

The engine always runs as a separate process, in its own process group, and is always killed
at the end: a driver that crashes takes only the child down.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from . import gguf
from .engine.process_options import engine_environment, engine_process_kwargs
from .engine_store import InstalledBuild
from .manifest import DEVICE_ENV
from .paths import paths

DEVICE_LINE = re.compile(r"\[Load\]\s+LM backend:\s*(\S+)")
PROBE_MODEL = "acestep-probe-lm.gguf"
HEALTH_POLL = 0.1
KILL_GRACE = 3.0
MAX_LINES = 400


@dataclass
class TrialResult:
    ok: bool
    device: str = ""            # the device the engine said it initialised ("CUDA0", "CPU" …)
    reason: str = ""            # why it was rejected: the first error line, or what happened
    lines: list[str] = field(default_factory=list)   # the engine's stderr, as read
    exit_code: int | None = None
    seconds: float = 0.0


def probe_models_dir() -> Path:
    """A models folder holding only a header-only acestep-lm GGUF (made once, in the cache)."""
    folder = paths().probe_models_dir
    target = folder / PROBE_MODEL
    try:
        if gguf.read_architecture(target) == "acestep-lm":
            return folder
    except Exception:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    gguf.write_header_only(target, "acestep-lm")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_fatal_line(line: str) -> bool:
    """A line after which the engine will not initialise the device: FATAL or ERROR."""
    return bool(re.search(r"\b(FATAL|ERROR)\b", line))


def is_error_line(line: str) -> bool:
    """An engine line that explains a failure: ERROR/FATAL, or something "not found"."""
    return bool(re.search(r"\b(FATAL|ERROR)\b", line) or "not found" in line
                or line.startswith("ggml_cuda_init: failed") or "failed to initialize" in line)


def expected_device(build: InstalledBuild, backend: str) -> str:
    return build.env.get("GGML_BACKEND") or DEVICE_ENV.get(backend, "")


def _device_matches(device: str, wanted: str) -> bool:
    """"CUDA0" matches "CUDA0"; the device index aside, the kind must be the same."""
    if not wanted:
        return True
    return device.lower().rstrip("0123456789") == wanted.lower().rstrip("0123456789")


class _Child:
    """The engine process and its stderr, read line by line as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.lines: list[str] = []
        self.new_line = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while True:
            raw = await self.proc.stderr.readline()
            if not raw:
                break
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if len(self.lines) < MAX_LINES:
                self.lines.append(line)
            self.new_line.set()
        self.new_line.set()

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    def device(self) -> str | None:
        for line in self.lines:
            found = DEVICE_LINE.search(line)
            if found:
                return found.group(1)
        return None

    def first_error(self) -> str | None:
        return next((ln.strip() for ln in self.lines if is_error_line(ln)), None)

    def fatal_since(self, mark: int) -> bool:
        return any(is_fatal_line(ln) for ln in self.lines[mark:])

    async def kill(self) -> None:
        if self.proc.returncode is None:
            _signal_group(self.proc, signal.SIGTERM if os.name == "posix" else None)
            try:
                await asyncio.wait_for(self.proc.wait(), KILL_GRACE)
            except asyncio.TimeoutError:
                _signal_group(self.proc, signal.SIGKILL if os.name == "posix" else None)
                await self.proc.wait()
        elif os.name == "posix":
            # the engine may have left helpers behind in its group
            _signal_group(self.proc, signal.SIGKILL)
        try:
            await asyncio.wait_for(self.reader, 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self.reader.cancel()


def _signal_group(proc: asyncio.subprocess.Process, sig) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, sig)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass


def engine_argv(build: InstalledBuild, models_dir: Path, port: int,
                extra: list[str] | None = None) -> list[str]:
    """ace-server's command line for this build (the node starts engines the same way)."""
    return list(build.argv) + ["--models", str(models_dir), "--host", "127.0.0.1",
                               "--port", str(port)] + list(extra or [])


async def _start(build: InstalledBuild, backend: str, port: int) -> _Child:
    env = engine_environment(build.env)
    wanted = expected_device(build, backend)
    if wanted:
        env["GGML_BACKEND"] = wanted
    proc = await asyncio.create_subprocess_exec(
        *engine_argv(build, probe_models_dir(), port), env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, **engine_process_kwargs())
    return _Child(proc)


def _last_line(lines: list[str]) -> str:
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


async def _one_trial(build: InstalledBuild, backend: str, deadline: float) -> TrialResult:
    wanted = expected_device(build, backend)
    port = free_port()
    started = time.monotonic()
    try:
        child = await _start(build, backend, port)
    except OSError as exc:
        return TrialResult(False, reason=f"cannot start {build.argv[0]}: {exc.strerror or exc}")
    base = f"http://127.0.0.1:{port}"
    result = TrialResult(False)
    try:
        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
            result = await _drive(child, client, base, wanted, deadline)
    finally:
        await child.kill()
        result.lines = list(child.lines)
        result.exit_code = child.proc.returncode if result.exit_code is None else result.exit_code
        result.seconds = time.monotonic() - started
        if not result.ok and not result.reason:
            result.reason = child.first_error() or "the engine failed"
    return result


def _exit_result(child: _Child, wanted: str) -> TrialResult:
    code = child.proc.returncode
    device = child.device()
    if device and _device_matches(device, wanted):
        # it initialised the device asked for; the probe model has no weights, so the exit
        # that follows is the expected end of a probe
        return TrialResult(True, device=device, exit_code=code)
    error = child.first_error()
    if device:
        return TrialResult(False, device=device, exit_code=code,
                           reason=f"came up on {device}, not {wanted} (a silent fall-back)")
    if error:
        return TrialResult(False, exit_code=code, reason=error)
    last = _last_line(child.lines)
    return TrialResult(False, exit_code=code,
                       reason=f"exited with code {code} before initialising a device"
                       + (f" (last line: {last})" if last else " (no output)"))


async def _wait_line_or_exit(child: _Child, timeout: float) -> None:
    child.new_line.clear()
    waiter = asyncio.ensure_future(child.new_line.wait())
    exiter = asyncio.ensure_future(child.proc.wait())
    try:
        await asyncio.wait({waiter, exiter}, timeout=max(0.0, timeout),
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        exiter.cancel()


async def _drive(child: _Child, client: httpx.AsyncClient, base: str, wanted: str,
                 deadline: float) -> TrialResult:
    # 1. wait for /health (fail early on exit or an error line)
    while True:
        if child.exited:
            await _drain(child)
            return _exit_result(child, wanted)
        if any(re.search(r"\bFATAL\b", ln) for ln in child.lines):
            return TrialResult(False, reason=child.first_error() or "")
        if time.monotonic() > deadline:
            return TrialResult(False, reason=_timeout_reason(child, "answering /health"))
        try:
            resp = await client.get(f"{base}/health", timeout=1.0)
            if resp.status_code == 200:
                break
        except httpx.HTTPError:
            pass
        await _wait_line_or_exit(child, HEALTH_POLL)
    # 2. one probe job. Warnings printed at start-up (a bundle probing every GPU library it
    # carries) do not reject the build; only a FATAL/ERROR line after the job was sent does.
    mark = len(child.lines)
    try:
        resp = await client.post(f"{base}/lm", json={"caption": "probe", "lm_mode": "generate"},
                                 timeout=max(1.0, deadline - time.monotonic()))
        if resp.status_code != 200 and not child.exited:
            return TrialResult(False, reason=f"the probe job was refused: HTTP "
                                             f"{resp.status_code} {resp.text.strip()[:200]}")
    except httpx.HTTPError:
        pass    # the engine may die while answering; its stderr says why
    # 3. read stderr until the device line, an error line, an exit, or the deadline
    while True:
        device = child.device()
        if device:
            if _device_matches(device, wanted):
                return TrialResult(True, device=device)
            return TrialResult(False, device=device,
                               reason=f"came up on {device}, not {wanted} (a silent fall-back)")
        if child.fatal_since(mark):
            return TrialResult(False, reason=child.first_error() or "")
        if child.exited:
            await _drain(child)
            return _exit_result(child, wanted)
        if time.monotonic() > deadline:
            return TrialResult(False, reason=_timeout_reason(child, "initialising a device"))
        await _wait_line_or_exit(child, min(0.5, deadline - time.monotonic()))


async def _drain(child: _Child) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(child.reader), 2.0)
    except asyncio.TimeoutError:
        pass


def _timeout_reason(child: _Child, doing: str) -> str:
    last = _last_line(child.lines)
    return f"timed out {doing}" + (f" (last line: {last})" if last else " (no output)")


async def trial_load(build: InstalledBuild, backend: str, *, timeout: float = 60) -> TrialResult:
    """Start ``build`` for ``backend`` against the probe folder and report what device it got.

    ``ok`` only when the engine said it initialised the device the backend means (a GPU
    build that silently falls back to the CPU is rejected). ``reason`` is the first error line
    the engine printed, or what happened (exit code and last line, timeout). The engine is
    always stopped before this returns. An exit with no device line and no error (the
    reference saw stderr lines lost at exit) or a port taken in between is tried once more.
    """
    deadline = time.monotonic() + timeout
    result = await _one_trial(build, backend, deadline)
    retry = (not result.ok and time.monotonic() < deadline - 1
             and ("before initialising a device" in result.reason
                  or "cannot bind" in result.reason))
    if retry:
        second = await _one_trial(build, backend, deadline)
        second.seconds += result.seconds
        return second
    return result
