"""Trial-load an engine build: prove the device works, not just that the binary starts.

The procedure: a probe models folder with one
header-only ``acestep-lm`` GGUF; the build started with ace-server's command line and the
``GGML_BACKEND`` its backend means, on a free loopback port; wait for ``GET /health`` (failing
early when the process exits); ``POST /lm {"caption":"probe","lm_mode":"generate"}``; then read
stderr for ``[Load] LM backend: <device>``. Success is that line naming the device asked for.
The probe job is expected to kill the engine afterwards (no weights), which is fine.

The real ace-server loses its last stderr lines before an exit in 10–35 % of runs (it pipes
its own stderr through a thread that dies with the process), the device line and the FATAL
line included, and sometimes cuts the last line in the middle. So one probe decides only
when it saw a *whole* line that settles the question: the device line (works, or came up on
the wrong device), or an error line (the reason). A probe that ends without one — an exit
whose last words were lost, a cut line, a port taken in between — is repeated; each takes
60–100 ms, so the trial repeats it until the deadline or :data:`MAX_PROBES`. A working build
is rejected only if every one of them lost the device line (at 35 % loss, 0.35**25 ≈ 4e-12).
Every probe process is ended before the next starts, whether it exited or not.

The engine always runs as a separate process, in its own process group: a driver that
crashes takes only the child down.
"""

from __future__ import annotations

import asyncio
import os
import sys
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..models import gguf
from ..system.net import free_port
from ..system.procs.exits import KILLED
from ..engine.client import join_reasons
from ..engine.process_options import engine_environment, engine_process_kwargs
from ..engine.progress import is_error_line, is_fatal_line
from ..engine.supervisor import describe_exit
from .engine_store import InstalledBuild
from .manifest import DEVICE_ENV
from ..system.paths import paths
from ..system.procs import codesign, follow_priority

DEVICE_LINE = re.compile(r"^\[Load\]\s+LM backend:\s*(\S+)")
DEVICE_NAME_LINES = (
    re.compile(r"^ggml_vulkan:\s*\d+\s*=\s*([^|]+?)\s*(?:\||$)"),  # "0 = llvmpipe (…) | uma: 1"
    re.compile(r"^\s*Device\s+\d+:\s*([^,]+)"),  # ggml_cuda_init's "Device 0: NVIDIA …, …"
    re.compile(r"^ggml_metal_init:\s*found device:\s*(.+)$"),
)
SOFTWARE_LINE = re.compile(r"Device type is CPU", re.I)
"""ggml_vulkan's warning when the Vulkan device computes on the CPU (llvmpipe …)."""
PROBE_MODEL = "acestep-probe-lm.gguf"
HEALTH_POLL = 0.1
KILL_GRACE = 3.0
AFTER_FATAL = 1.0  # seconds to let the rest of an error chain arrive (then the exit)
MAX_LINES = 400
MAX_PROBES = 25
MIN_PROBE_TIME = 0.5  # no new probe is started with less time than this left
_LINE_LIMIT = 1024 * 1024


@dataclass
class TrialResult:
    ok: bool
    device: str = ""  # the device the engine said it initialised ("CUDA0", "CPU" …)
    reason: str = ""  # why it was rejected: the engine's first and last error line,
    # or what happened (exit code and last line, timeout)
    lines: list[str] = field(default_factory=list)  # the deciding probe's stderr, as read
    exit_code: int | None = None
    seconds: float = 0.0
    probes: int = 1  # engine processes started
    conclusive: bool = True  # False: no probe saw a whole line that settles it
    device_name: str = ""  # the device's own name as the engine printed it ("llvmpipe …")
    software: bool = False  # the engine said the device computes on the CPU

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "device": self.device,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "probes": self.probes,
            "device_name": self.device_name,
            "software": self.software,
        }


def device_facts(lines: list[str]) -> tuple[str, bool]:
    """The device's name as the engine's log gives it, and whether the engine said it is a
    software device (a CPU-type Vulkan device)."""
    name = ""
    for line in lines:
        for pattern in DEVICE_NAME_LINES:
            found = pattern.search(line)
            if found and not name:
                name = found.group(1).strip()
    return name, any(SOFTWARE_LINE.search(line) for line in lines)


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


def expected_device(build: InstalledBuild, backend: str) -> str:
    return build.env.get("GGML_BACKEND") or DEVICE_ENV.get(backend, "")


def _device_matches(device: str, wanted: str) -> bool:
    """ "CUDA0" matches "CUDA0"; the device index aside, the kind must be the same."""
    if not wanted:
        return True
    return device.lower().rstrip("0123456789") == wanted.lower().rstrip("0123456789")


class _Child:
    """One probe process and its stderr, read line by line as it comes. A line is *whole*
    when its newline arrived; the last one before an exit may be cut."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.lines: list[str] = []
        self.whole: list[bool] = []
        self.new_line = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while True:
            try:
                raw = await self.proc.stderr.readline()
            except (ValueError, asyncio.LimitOverrunError):
                await self.proc.stderr.read(_LINE_LIMIT)
                continue
            if not raw:
                break
            if len(self.lines) < MAX_LINES:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                self.whole.append(raw.endswith(b"\n"))
            self.new_line.set()
        self.new_line.set()

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    def whole_lines(self, since: int = 0) -> list[str]:
        return [ln for ln, ok in zip(self.lines[since:], self.whole[since:]) if ok]

    def device(self) -> str | None:
        for line in self.whole_lines():
            found = DEVICE_LINE.search(line)
            if found:
                return found.group(1)
        return None

    def errors(self, since: int = 0) -> list[str]:
        return [ln for ln in self.whole_lines(since) if is_error_line(ln)]

    def fatal_since(self, mark: int) -> bool:
        return any(is_fatal_line(ln) and "cannot bind" not in ln for ln in self.whole_lines(mark))

    def cut_line(self) -> str | None:
        """The last line when it was cut off (no newline before the exit)."""
        if self.lines and not self.whole[-1]:
            return self.lines[-1]
        return None

    async def end(self) -> None:
        """End the process (and anything it left in its group); read what is left."""
        if self.proc.returncode is None:
            _end_group(self.proc, hard=False)
            try:
                await asyncio.wait_for(self.proc.wait(), KILL_GRACE)
            except asyncio.TimeoutError:
                _end_group(self.proc, hard=True)
                await self.proc.wait()
        elif sys.platform != "win32":
            _end_group(self.proc, hard=True)  # what it left in its group
        try:
            await asyncio.wait_for(asyncio.shield(self.reader), 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self.reader.cancel()


def _end_group(proc: asyncio.subprocess.Process, *, hard: bool) -> None:
    """SIGTERM (``hard``: SIGKILL) to the probe's process group; on Windows, the process
    (TerminateProcess: there is no gentler way to a console-less child)."""
    try:
        if sys.platform == "win32":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def engine_argv(
    build: InstalledBuild, models_dir: Path, port: int, extra: list[str] | None = None
) -> list[str]:
    """ace-server's command line for this build (the node starts engines the same way)."""
    return (
        list(build.argv)
        + ["--models", str(models_dir), "--host", "127.0.0.1", "--port", str(port)]
        + list(extra or [])
    )


def engine_env(build: InstalledBuild, backend: str) -> dict[str, str]:
    """The environment a build runs in for ``backend``: ours without secrets, the build's
    own (its loader path), and the device it means."""
    env = engine_environment(build.env)
    wanted = expected_device(build, backend)
    if wanted:
        env["GGML_BACKEND"] = wanted
    return env


async def _start(build: InstalledBuild, backend: str, port: int) -> _Child:
    proc = await asyncio.create_subprocess_exec(
        *engine_argv(build, probe_models_dir(), port),
        env=engine_env(build, backend),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
        **engine_process_kwargs(),
    )
    follow_priority(proc.pid)
    return _Child(proc)


def _last_line(lines: list[str]) -> str:
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


def _undecided(reason: str, code: int | None = None) -> TrialResult:
    return TrialResult(False, reason=reason, exit_code=code, conclusive=False)


async def _one_probe(build: InstalledBuild, backend: str, deadline: float) -> TrialResult:
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
        await child.end()
        result.lines = list(child.lines)
        result.exit_code = child.proc.returncode if result.exit_code is None else result.exit_code
        result.seconds = time.monotonic() - started
    return result


def _error_reason(child: _Child, since: int = 0) -> str:
    return join_reasons(child.errors(since)) or ""


def _exit_result(child: _Child, wanted: str) -> TrialResult:
    """The process exited: decide from the whole lines that arrived, or say it is open."""
    code = child.proc.returncode
    device = child.device()
    if device and _device_matches(device, wanted):
        # it initialised the device asked for; the probe model has no weights, so the exit
        # that follows is the expected end of a probe
        return TrialResult(True, device=device, exit_code=code)
    if device:
        return TrialResult(
            False,
            device=device,
            exit_code=code,
            reason=f"came up on {device}, not {wanted} (a silent fall-back)",
        )
    if any("cannot bind" in ln for ln in child.lines):
        return _undecided("another process took the probe's port", code)
    errors = child.errors()
    if errors:
        return TrialResult(False, exit_code=code, reason=join_reasons(errors) or "")
    cut = child.cut_line()
    last = _last_line(child.whole_lines())
    text = f"exited ({describe_exit(code)}) before initialising a device"
    if cut:
        text += f" (its last line was cut: {cut.strip()})"
    elif last:
        text += f" (last line: {last})"
    else:
        text += " (no output)"
    return _undecided(text, code)


async def _wait_line_or_exit(child: _Child, timeout: float) -> None:
    child.new_line.clear()
    waiter = asyncio.ensure_future(child.new_line.wait())
    exiter = asyncio.ensure_future(child.proc.wait())
    try:
        await asyncio.wait(
            {waiter, exiter}, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        waiter.cancel()
        exiter.cancel()


async def _rest_of_chain(child: _Child) -> None:
    """After a FATAL line the engine prints the rest of its chain and exits: wait briefly
    for that, so the reason can name the last link too."""
    end = time.monotonic() + AFTER_FATAL
    while not child.exited and time.monotonic() < end:
        await _wait_line_or_exit(child, end - time.monotonic())
    if child.exited:
        await _drain(child)


async def _drive(
    child: _Child, client: httpx.AsyncClient, base: str, wanted: str, deadline: float
) -> TrialResult:
    # 1. wait for /health (an exit or a FATAL line decides earlier)
    while True:
        if child.exited:
            await _drain(child)
            return _exit_result(child, wanted)
        if child.fatal_since(0):
            await _rest_of_chain(child)
            return TrialResult(False, reason=_error_reason(child))
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
    # carries) do not reject the build; only a FATAL line after the job was sent does.
    mark = len(child.lines)
    try:
        resp = await client.post(
            f"{base}/lm",
            json={"caption": "probe", "lm_mode": "generate"},
            timeout=max(1.0, deadline - time.monotonic()),
        )
        if resp.status_code != 200 and not child.exited:
            return TrialResult(
                False,
                reason=f"the probe job was refused: HTTP "
                f"{resp.status_code} {resp.text.strip()[:200]}",
            )
    except httpx.HTTPError:
        pass  # the engine may die while answering; its stderr says why
    # 3. read stderr until a whole device line, a FATAL line, an exit, or the deadline
    while True:
        device = child.device()
        if device:
            if _device_matches(device, wanted):
                return TrialResult(True, device=device)
            return TrialResult(
                False,
                device=device,
                reason=f"came up on {device}, not {wanted} (a silent fall-back)",
            )
        if child.fatal_since(mark):
            await _rest_of_chain(child)
            return TrialResult(False, reason=_error_reason(child))
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

    ``ok`` only when the engine said, in a whole line, that it initialised the device the
    backend means (a GPU build that silently falls back to the CPU is rejected). ``reason``
    is the engine's first error line — the cause, whole — and its last, or what happened
    (exit code and last line, timeout). Probes that end without a deciding line are repeated
    (see the module doc); every probe process is stopped before this returns.
    """
    deadline = time.monotonic() + timeout
    spent = 0.0
    probes = 0
    killed: codesign.Killed | None = None
    while True:
        result = await _one_probe(build, backend, deadline)
        probes += 1
        spent += result.seconds
        if killed is None and _killed_silently(result):
            # macOS kills code whose signature does not hold, before it can say a word
            killed = await asyncio.to_thread(
                codesign.killed_reason,
                build.argv[0],
                result.exit_code,
                user_build=build.source == "user",
            )
            if killed is not None and killed.signature_broken:
                result.conclusive = True
        if (
            result.conclusive
            or probes >= MAX_PROBES
            or time.monotonic() > deadline - MIN_PROBE_TIME
        ):
            break
    result.seconds = spent
    result.probes = probes
    result.device_name, result.software = device_facts(result.lines)
    if not result.conclusive and probes > 1:
        result.reason += f"; the same in all {probes} tries"
    if killed is not None and _killed_silently(result):
        result.reason += f". {killed.reason}"
    return result


def _killed_silently(result: TrialResult) -> bool:
    """The probe ended by SIGKILL (not ours) without a line: on a Mac, the signature."""
    return (
        not result.ok
        and sys.platform != "win32"
        and result.exit_code == KILLED
        and not any(ln.strip() for ln in result.lines)
    )
