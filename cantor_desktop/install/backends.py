"""Backends: what this machine can run, which one is the default, install / use / update.

The seed page "cantor backends" made into functions the node, the app and the CLI share (the
CLI is a thin shell over them). States and the auto rule follow Lemonade:

- states per family × backend: ``unsupported`` (wrong OS/arch, no matching device, or no
  build published for this machine), ``installable``, ``installed``, ``update_available``
  (the manifest names a newer build), ``update_required`` (the installed build's version file
  is missing or from another Cantor), ``rejected`` (its build was trial-loaded here and did
  not come up; the message says "rejected: <the engine's reason>");
- auto: a pin in node.toml wins; else the first supported backend in preference order, unless
  a later supported one is already installed while the earlier ones are merely installable —
  then the first installed one (no surprise multi-GB download when a working build is on disk).
  A rejected backend is skipped, until an explicit ``--install`` / ``--use`` or a change in
  its hardware evidence (a new driver) tries it again.

Every trial is recorded (engine_store.record_trial) with the evidence it ran on. A user's own
build (``engines.<family>.path``) is trial-loaded for each backend it is used for and counts
only where it loaded; a build ``--update`` staged is trial-loaded by the node before it takes
over (:func:`settle_staged`), and one that fails is never offered again.

Long operations report :class:`BackendEvent` objects to ``on_event`` as they happen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeGuard

from .. import config
from ..fetch import download
from ..system import hardware
from . import bundled, engine_store, manifest, speeds, trial
from ..system import procs, selfexec
from .engine_store import InstalledBuild
from ..errors import CantorError
from ..units import human_size
from .manifest import Build, Manifest

BACKENDS = config.BACKENDS
GPU_BACKENDS = ("cuda12", "metal", "vulkan")
INSTALLED_STATES = ("installed", "update_available", "update_required")
REJECTED = "rejected"
TRIAL_TIMEOUT_ENV = "CANTOR_TRIAL_TIMEOUT"
DEFAULT_TRIAL_TIMEOUT = 60.0
LABELS = {
    "cuda12": "CUDA 12 (NVIDIA)",
    "metal": "Metal (Apple Silicon)",
    "vulkan": "Vulkan (any GPU)",
    "cpu": "CPU",
}
DEVICE_NAMES = {"cuda12": "CUDA", "metal": "Metal", "vulkan": "Vulkan", "cpu": "the CPU"}


class BackendError(CantorError):
    """An install, --use or --update could not be done; the message says why."""


@dataclass
class BackendEvent:
    """One step of a long operation, for a progress line or a log."""

    kind: str  # note, skipped, no_build, download, unpack, trial, rejected,
    # fallback, kept, failed, saved, updated, up_to_date, rolled_back
    backend: str | None
    message: str
    progress: float | None = None  # 0..1 during a download, when the size is known
    family: str = "acestep"
    received: int | None = None
    total: int | None = None

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "backend": self.backend,
            "message": self.message,
            "progress": self.progress,
            "family": self.family,
            "received": self.received,
            "total": self.total,
        }

    def to_sse(self) -> tuple[str, dict]:
        """The event as the node streams it (``event: KIND``, its dict as the data), and
        as a client of the stream reads it back."""
        return self.kind, self.to_dict()


EventSink = Callable[[BackendEvent], None] | None
log = logging.getLogger(__name__)


@dataclass
class BackendStatus:
    name: str
    state: str
    evidence: list[str] = field(default_factory=list)
    message: str = ""
    version: str | None = None  # installed version, else the one that can be fetched
    installed: bool = False  # a build for this backend is here (not one rejected)
    pinned: bool = False
    trial: dict | None = None  # the last trial of the build that counts (a record)
    staged: str | None = None  # the version --update fetched, not trial-loaded yet
    software: str = ""  # the software device it would run on (never chosen by itself)
    measured: dict | None = None  # its speed in this machine's songs (speeds.Speed.to_dict)

    @property
    def works(self) -> bool:
        """Installed and not rejected: a build the node can start for this backend."""
        return self.installed and self.state in INSTALLED_STATES

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "state": self.state,
            "evidence": list(self.evidence),
            "message": self.message,
            "version": self.version,
            "installed": self.installed,
            "pinned": self.pinned,
            "trial": self.trial,
            "staged": self.staged,
            "software": self.software,
            "measured": self.measured,
        }


@dataclass
class SystemStatus:
    family: str
    os: str
    arch: str
    pinned: str | None
    default: str | None
    keep_loaded: bool
    backends: list[BackendStatus]
    hardware: hardware.Hardware
    manifest_source: str = "builtin"
    config_problem: str = ""

    def backend(self, name: str) -> BackendStatus:
        return next(b for b in self.backends if b.name == name)

    def to_dict(self, *, with_hardware: bool = False) -> dict:
        out: dict[str, Any] = {
            "os": self.os,
            "arch": self.arch,
            "pinned": self.pinned,
            "default": self.default,
            "keep_loaded": self.keep_loaded,
            "backends": [b.to_dict() for b in self.backends],
        }
        if with_hardware:
            out["family"] = self.family
            out["hardware"] = self.hardware.to_dict()
            out["manifest"] = self.manifest_source
        return out


def _emit(
    on_event: EventSink,
    kind: str,
    backend: str | None,
    message: str,
    family: str = "acestep",
    **extra,
) -> None:
    if on_event is not None:
        on_event(BackendEvent(kind=kind, backend=backend, message=message, family=family, **extra))


def no_build_text(backend: str, os_name: str, arch: str, cpu_build: bool = True) -> str:
    """Why ``backend`` has nothing to install here; ``cpu_build``: whether the manifest has
    a CPU build for this machine (macOS has none today: never point the user at one)."""
    if backend == "cpu" or not cpu_build:
        what = "no cpu engine" if backend == "cpu" else f"neither a {backend} nor a cpu engine"
        return (
            f"No build for this machine: {what} is published for {os_name} {arch}. The "
            f"built-in sketch engine still works, and so does an ace-server you build "
            f"yourself: cantor config set engines.acestep.path /path/to/ace-server"
        )
    return (
        f"No build for this machine: no {backend} engine is published for {os_name} "
        f"{arch}. Use another backend; the CPU always has one."
    )


def is_newer(build: Build | None, inst: InstalledBuild) -> TypeGuard[Build]:
    """Does the manifest name a newer (or re-published) build than the one installed?"""
    if build is None or inst.source != "store":
        return False
    new = manifest.version_key(build.version)  # checked when the manifest was read
    try:
        old = manifest.version_key(inst.version)
    except manifest.ManifestError:  # installed before versions had to be PEP 440 ones
        return build.sha256 != inst.sha256
    return new > old or (new == old and build.sha256 != inst.sha256)


def applicable_record(
    family: str, backend: str, build: InstalledBuild | Build | None, hw: hardware.Hardware
) -> engine_store.TrialRecord | None:
    """The last trial of ``build`` on ``backend`` if it still holds on this machine (ran on
    the same hardware evidence), else None."""
    if build is None:
        return None
    record = engine_store.trial_record(family, backend, engine_store.build_key(build))
    if record is None or not record.applies(hw.backends[backend].evidence):
        return None
    return record


def _rejected_text(record: engine_store.TrialRecord, name: str) -> str:
    return (
        f"rejected: {record.reason} (trial load of {record.version}, {record.when()} UTC). "
        f"Run: cantor backends --use {name} to try it again"
    )


def _backend_status(
    family: str, name: str, hw: hardware.Hardware, m: Manifest, pinned: str | None
) -> BackendStatus:
    """The state of one backend, with what this machine measured of it in its songs."""
    st = _state_of(family, name, hw, m, pinned)
    speed = speeds.summary(family, name)
    if speed is not None:
        st.measured = speed.to_dict()
        st.evidence.append(f"measured here: {speed.words()}")
    slower = speeds.slower_than_cpu(family, name)
    if slower is not None:
        mine, cpu = slower
        st.message = (
            f"{st.message.rstrip('. ')}. Measured slower than the CPU here "
            f"({mine.seconds_per_step:.2f} against {cpu.seconds_per_step:.2f} s a diffusion "
            f"step for a minute of audio): the CPU is the faster choice. Run: cantor "
            f"backends --use cpu"
        ).lstrip(". ")
    return st


def _state_of(
    family: str, name: str, hw: hardware.Hardware, m: Manifest, pinned: str | None
) -> BackendStatus:
    ev = hw.backends[name]
    st = BackendStatus(
        name=name, state="unsupported", evidence=list(ev.evidence), pinned=(pinned == name)
    )
    build = m.best(family, name, hw.os, hw.arch)
    user = engine_store.user_build(family, name)
    entry = engine_store.inspect(family, name)
    st.software = ev.software
    if not ev.supported and not (ev.software and pinned == name):
        st.message = ev.reason
        if entry.build:
            st.evidence.append(f"installed {entry.build.version} in {entry.build.path}")
            st.installed = True
            st.version = entry.build.version
        return st
    if user is not None:
        st.version, st.installed = user.version, True
        st.evidence.append(f"your build: {user.path} (node.toml engines.{family}.path)")
        record = applicable_record(family, name, user, hw)
        st.trial = record.to_dict() if record else None
        quarantine = hw.os == "macos" and procs.macos.quarantine_note(user.argv[0])
        if not Path(user.argv[0]).is_file():
            st.state = "update_required"
            st.message = (
                f"The build named in node.toml does not exist: {user.argv[0]}. "
                f"Run: cantor config set engines.{family}.path /path/to/ace-server"
            )
        elif quarantine:
            st.state = "update_required"
            st.message = quarantine
        elif record is not None and record.rejected:
            st.state = REJECTED
            st.installed = False  # not for this backend: it did not load here
            st.message = _rejected_text(record, name)
        else:
            st.state = "installed"
            if record is not None:
                st.evidence.append(
                    f"trial load: came up on {record.device_words()} ({record.when()} UTC)"
                )
                tried = ""
            else:
                tried = (
                    f"Not trial-loaded on {DEVICE_NAMES.get(name, name)} yet: the node "
                    f"does that before its first song. "
                )
            st.message = f"Uses your own build; Cantor never replaces it. {tried}" + _use_hint(
                name, pinned
            )
        return st
    if entry.build is not None:
        inst = entry.build
        st.version, st.installed = inst.version, True
        came = " (it came with Cantor)" if bundled.is_bundled(inst) else ""
        st.evidence.append(f"installed {inst.version} in {inst.path}{came}")
        record = applicable_record(family, name, inst, hw)
        st.trial = record.to_dict() if record else None
        if record is not None and not record.rejected:
            st.evidence.append(
                f"trial load: came up on {record.device_words()} ({record.when()} UTC)"
            )
        waiting = engine_store.staged(family, name)
        if waiting is not None:
            st.staged = waiting.version
            st.evidence.append(
                f"staged: {waiting.version} (fetched by --update; trial-loaded "
                f"when the node next starts, before it takes over)"
            )
        # the newer build, when its trial here rejected it
        refused: tuple[Build, engine_store.TrialRecord] | None = None
        if is_newer(build, inst):
            newest = applicable_record(family, name, build, hw)
            if newest is not None and newest.rejected:
                refused = (build, newest)
        if refused is not None:
            st.evidence.append(
                f"update {refused[0].version} rejected here ({refused[1].when()} UTC): "
                f"{refused[1].reason}"
            )
        if record is not None and record.rejected:
            st.state = REJECTED
            st.installed = False
            st.message = _rejected_text(record, name)
        elif (
            is_newer(build, inst)
            and refused is None
            and not (
                waiting is not None
                and engine_store.build_key(waiting) == engine_store.build_key(build)
            )
        ):
            st.state = "update_available"
            st.message = (
                f"{build.version} is published (installed: {inst.version}). "
                f"Run: cantor backends --update"
            )
        else:
            st.state = "installed"
            st.message = f"Installed {inst.version}{came}. "
            if waiting is not None:
                st.message += (
                    f"{waiting.version} is staged: the node tries it at its next "
                    f"start and keeps {inst.version} if it fails. "
                )
            elif refused is not None:
                st.message += (
                    f"The update to {refused[0].version} was rejected here and is not "
                    f"offered again: {refused[1].reason}. "
                )
            st.message += _use_hint(name, pinned)
        return st
    if entry.problem:
        st.state = "update_required"
        st.installed = True
        st.message = (
            f"The installed build cannot be used ({entry.problem}). Run: cantor backends --update"
        )
        return st
    if build is None:
        refusal = m.refusal(family, name, hw.os, hw.arch)
        st.message = refusal or no_build_text(
            name, hw.os, hw.arch, m.best(family, "cpu", hw.os, hw.arch) is not None
        )
        return st
    st.version = build.version
    record = applicable_record(family, name, build, hw)
    if record is not None and record.rejected:
        st.state = REJECTED
        st.trial = record.to_dict()
        st.message = _rejected_text(record, name)
        return st
    st.state = "installable"
    size = f", {human_size(build.size)}" if build.size else ""
    st.message = (
        f"Not installed; {build.version}{size} can be fetched and tried. "
        f"Run: cantor backends --install"
    )
    return st


def with_device_env(build: InstalledBuild, hw: hardware.Hardware) -> InstalledBuild:
    """``build`` with what its backend's device needs in the engine's environment (a
    software Vulkan device named by GGML_VK_VISIBLE_DEVICES: ggml hides CPU-type devices)."""
    extra = hw.backends[build.backend].env if build.backend in hw.backends else {}
    if not extra:
        return build
    return dataclasses.replace(build, env={**build.env, **extra})


def _use_hint(name: str, pinned: str | None) -> str:
    if pinned == name:
        return "Pinned in node.toml. Run: cantor backends --use auto to let Cantor choose"
    return f"Run: cantor backends --use {name} to pin it"


def choose_default(backends: list[BackendStatus], pinned: str | None) -> str | None:
    """Lemonade's rule (see the module doc). None when nothing is supported here."""
    if pinned:
        return pinned
    supported = [b for b in backends if b.state not in ("unsupported", REJECTED) and not b.software]
    if not supported:
        return None
    installed = next((b for b in supported if b.state in INSTALLED_STATES), None)
    return (installed or supported[0]).name


def status(
    family: str = "acestep", hw: hardware.Hardware | None = None, manifest: Manifest | None = None
) -> SystemStatus:
    """The machine, and every backend in preference order with state, evidence and message.
    Reads no network: the manifest is the last published copy fetched, else the builtin."""
    hw = hw or hardware.probe_from_env()
    bundled.adopt_all(hw)  # the engine in the box, the first time the store has none
    m = manifest or _manifest_module().current()
    cfg, problem = config.load_or_defaults()
    pinned = cfg.pinned_backend(family)
    items = [_backend_status(family, name, hw, m, pinned) for name in BACKENDS]
    default = choose_default(items, pinned)
    return SystemStatus(
        family=family,
        os=hw.os,
        arch=hw.arch,
        pinned=pinned,
        default=default,
        keep_loaded=bool(cfg.get("node.keep_loaded")),
        backends=items,
        hardware=hw,
        manifest_source=m.source,
        config_problem=str(problem) if problem else "",
    )


def _manifest_module():
    return manifest


def default_backend(
    family: str = "acestep", hw: hardware.Hardware | None = None, manifest: Manifest | None = None
) -> str | None:
    """The backend the node uses for ``family``: the pin, else the auto rule. None only when
    no backend at all has a build for this machine (then only the sketch engine runs)."""
    return status(family, hw, manifest).default


# -- fetching and trying ----------------------------------------------------------------------


def _trial_timeout() -> float:
    try:
        return float(os.environ.get(TRIAL_TIMEOUT_ENV) or DEFAULT_TRIAL_TIMEOUT)
    except ValueError:
        return DEFAULT_TRIAL_TIMEOUT


def _archive_needed_later(build: Build, m: Manifest, hw: hardware.Hardware) -> bool:
    """Another backend's build for this machine shares this download and is not installed."""
    for other in m.builds:
        if (
            other.sha256 != build.sha256
            or other.backend == build.backend
            or other.family != build.family
            or (other.os, other.arch) != (hw.os, hw.arch)
        ):
            continue
        have = engine_store.inspect(other.family, other.backend).build
        if have is None or have.sha256 != other.sha256:
            return True
    return False


def _progress_sink(on_event: EventSink, family: str, backend: str, what: str):
    def sink(p: download.Progress) -> None:
        total = f" of {human_size(p.total)}" if p.total else ""
        _emit(
            on_event,
            "download",
            backend,
            f"{backend}: downloading {what}: {human_size(p.received)}{total}",
            family,
            progress=p.fraction,
            received=p.received,
            total=p.total,
        )

    return sink


async def _fetch(
    family: str,
    backend: str,
    build: Build,
    m: Manifest,
    hw: hardware.Hardware,
    on_event: EventSink,
    *,
    stage: bool = False,
) -> InstalledBuild:
    cached = engine_store.archive_cache_path(build).exists()
    _emit(
        on_event,
        "download",
        backend,
        f"{backend}: fetching {build.version} ({build.url.rsplit('/', 1)[-1]})"
        + (" from the download cache" if cached else ""),
        family,
        progress=0.0,
    )
    inst, _fetched = await engine_store.install(
        build,
        on_progress=_progress_sink(on_event, family, backend, build.version),
        keep_archive=_archive_needed_later(build, m, hw),
        stage=stage,
    )
    _emit(
        on_event,
        "unpack",
        backend,
        f"{backend}: {build.version} verified (sha256) and unpacked in {inst.path}"
        + (f"; {inst.signature}" if inst.signature else ""),
        family,
        progress=1.0,
    )
    return inst


@dataclass
class _Tried:
    ok: bool
    build: InstalledBuild | None = None
    reason: str = ""
    no_build: bool = False
    fetched: bool = True  # False: the build never arrived, so nothing was rejected

    @property
    def kept(self) -> InstalledBuild:
        """The build that works (asked only when ``ok``)."""
        if not self.ok or self.build is None:
            raise RuntimeError("no build was kept")
        return self.build

    def told(self, backend: str) -> tuple[str, str]:
        """The event kind and the words for a failed outcome: no build for this machine, a
        build that could not be fetched, or one the trial load rejected."""
        if self.no_build:
            return "no_build", self.reason
        if not self.fetched:
            return "failed", f"{backend}: {self.reason}"
        return "rejected", rejected_text(backend, self.reason)


def _source_text(inst: InstalledBuild) -> str:
    return "your build" if inst.source == "user" else inst.version


async def _trial(
    family: str,
    backend: str,
    inst: InstalledBuild,
    hw: hardware.Hardware,
    on_event: EventSink,
    what: str = "",
) -> trial.TrialResult:
    """Trial-load ``inst`` on ``backend`` and remember the outcome with its evidence."""
    _emit(
        on_event,
        "trial",
        backend,
        f"{backend}: trying {what or _source_text(inst)} on "
        f"{trial.expected_device(inst, backend)} …",
        family,
    )
    result = await trial.trial_load(with_device_env(inst, hw), backend, timeout=_trial_timeout())
    if inst.source in ("store", "user"):
        engine_store.record_trial(
            inst,
            ok=result.ok,
            reason=result.reason,
            device=result.device,
            seconds=result.seconds,
            probes=result.probes,
            evidence=hw.backends[backend].evidence,
            device_name=result.device_name,
            software=result.software,
        )
    return result


async def _fetch_and_trial(
    family: str, backend: str, m: Manifest, hw: hardware.Hardware, on_event: EventSink
) -> _Tried:
    """Make sure a build for backend is on disk, then trial-load it (an explicit --install or
    --use: a backend rejected before is tried again). A store build that fails is removed
    again (the previous one, if any, takes over and is tried in its turn): only builds that
    work are kept. A user's own build is tried on this backend and never touched."""
    await settle_staged(family, hw=hw, on_event=on_event, only=backend)
    user = engine_store.user_build(family, backend)
    existing = engine_store.inspect(family, backend).build
    build = m.best(family, backend, hw.os, hw.arch)
    newest = applicable_record(family, backend, build, hw)
    fresh = False
    if user is not None:
        inst = user
    elif existing is not None and (
        not is_newer(build, existing) or (newest is not None and newest.rejected)
    ):
        inst = existing  # a newer build rejected here is not fetched again
    elif build is None:
        text = m.refusal(family, backend, hw.os, hw.arch) or no_build_text(
            backend, hw.os, hw.arch, m.best(family, "cpu", hw.os, hw.arch) is not None
        )
        return _Tried(False, reason=text, no_build=True)
    else:
        try:
            inst = await _fetch(family, backend, build, m, hw, on_event)
        except (download.DownloadError, engine_store.StoreError, OSError) as exc:
            return _Tried(False, reason=f"could not fetch {build.describe()}: {exc}", fetched=False)
        fresh = True
    result = await _trial(family, backend, inst, hw, on_event)
    if result.ok:
        return _Tried(True, build=inst)
    if inst.source == "store" and (fresh or existing is not None):
        engine_store.remove_current(family, backend)
        back = engine_store.inspect(family, backend).build
        if fresh and back is not None:
            _emit(
                on_event,
                "note",
                backend,
                f"{backend}: {inst.version} was rejected "
                f"({result.reason}); trying the build installed before, {back.version}.",
                family,
            )
            again = await _trial(family, backend, back, hw, on_event)
            if again.ok:
                return _Tried(True, build=back)
            engine_store.remove_current(family, backend)
            return _Tried(False, build=back, reason=again.reason)
        if (
            not fresh
            and build is not None
            and engine_store.build_key(build) != engine_store.build_key(inst)
            and applicable_record(family, backend, build, hw) is None
        ):
            # the build on disk (the one that came with Cantor, say) did not load here: the
            # published one, never tried here, is fetched and tried in its place
            _emit(
                on_event,
                "note",
                backend,
                f"{backend}: {inst.version} was rejected ({result.reason}); fetching "
                f"{build.version} instead.",
                family,
            )
            try:
                other = await _fetch(family, backend, build, m, hw, on_event)
            except (download.DownloadError, engine_store.StoreError, OSError) as exc:
                return _Tried(False, reason=f"could not fetch {build.describe()}: {exc}")
            again = await _trial(family, backend, other, hw, on_event)
            if again.ok:
                return _Tried(True, build=other)
            engine_store.remove_current(family, backend)
            return _Tried(False, build=other, reason=again.reason)
    return _Tried(False, build=inst, reason=result.reason)


def rejected_text(backend: str, reason: str) -> str:
    first = (reason.strip().splitlines() or [""])[0]
    kind = "GPU backend" if backend in GPU_BACKENDS else "Backend"
    return f"{kind} rejected: {first}"


def in_use_text(family: str, hw: hardware.Hardware, m: Manifest | None = None) -> str:
    """What the node runs for ``family`` now, named only when it is installed and working:
    "the node keeps using cpu", or that nothing but the sketch engine runs."""
    st = status(family, hw, m)
    current = st.default
    if current and st.backend(current).works:
        return f"the node keeps using {current}"
    return (
        "no engine backend is installed and working here yet; only the built-in sketch "
        "engine runs. Run: cantor backends --install"
    )


async def install(
    family: str = "acestep", on_event: EventSink = None, *, hw: hardware.Hardware | None = None
) -> InstalledBuild:
    """Fetch and trial-load each candidate in preference order; keep the first that works.

    Emits one event per outcome as it happens. Raises BackendError when nothing works."""
    hw = hw or hardware.probe_from_env()
    m, note = await manifest.fetch_or_fallback()
    if note:
        _emit(on_event, "note", None, note, family)
    st = status(family, hw, m)
    tried: list[str] = []
    for item in st.backends:
        name = item.name
        ev = hw.backends[name]
        if not ev.supported:
            _emit(on_event, "skipped", name, f"{name}: skipped — {ev.reason}", family)
            continue
        outcome = await _fetch_and_trial(family, name, m, hw, on_event)
        if outcome.ok:
            _emit(
                on_event,
                "kept",
                name,
                f"{name}: works — kept ({_source_text(outcome.kept)}). The node uses it "
                f"from its next start.",
                family,
            )
            return outcome.kept
        if outcome.no_build:
            _emit(on_event, "no_build", name, outcome.reason, family)
            continue
        tried.append(f"{name}: {outcome.reason}")
        kind, text = outcome.told(name)
        _emit(on_event, kind, name, text, family)
        nxt = _next_candidate(st, hw, name)
        if nxt:
            _emit(on_event, "fallback", nxt, f"Falling back to {nxt}.", family)
    raise BackendError(
        "No backend works on this machine"
        + (": " + "; ".join(tried) if tried else "")
        + ". The built-in sketch "
        "engine still works."
    )


def _next_candidate(st: SystemStatus, hw: hardware.Hardware, after: str) -> str | None:
    names = [b.name for b in st.backends]
    for name in names[names.index(after) + 1 :]:
        if hw.backends[name].supported:
            return name
    return None


async def use(
    backend: str, on_event: EventSink = None, *, hw: hardware.Hardware | None = None
) -> list[InstalledBuild]:
    """Fetch ``backend`` for every family, trial-load it, and only then pin it in node.toml.

    ``"auto"`` removes the pin. On any failure raises BackendError and node.toml is left
    byte-identical."""
    if backend != "auto" and backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; one of auto, {', '.join(BACKENDS)}")
    # a malformed node.toml is reported before anything is fetched
    config.load()
    if backend == "auto":
        config.update({f"backends.{fam}": "auto" for fam in config.FAMILIES})
        _emit(
            on_event,
            "saved",
            None,
            "Saved: backends are chosen automatically again "
            "(node.toml). The node uses the choice from its next start.",
        )
        return []
    hw = hw or hardware.probe_from_env()
    ev = hw.backends[backend]
    if not ev.supported and not ev.software:
        raise BackendError(
            f"{backend} cannot run on this machine: {ev.reason} node.toml is unchanged."
        )
    if ev.software:
        _emit(
            on_event,
            "note",
            backend,
            f"{backend} here is {ev.software}, a software device: it computes on the CPU, "
            f"usually far slower than the CPU engine. Hardware & Backends and `cantor "
            f"backends` show the speed each backend measured in its songs.",
        )
    m, note = await manifest.fetch_or_fallback()
    if note:
        _emit(on_event, "note", None, note)
    builds = []
    for fam in config.FAMILIES:
        outcome = await _fetch_and_trial(fam, backend, m, hw, on_event)
        if not outcome.ok:
            kind, text = outcome.told(backend)
            _emit(on_event, kind, backend, text, fam)
            raise BackendError(f"{text} (node.toml is unchanged; {in_use_text(fam, hw, m)})")
        builds.append(outcome.kept)
    config.update({f"backends.{fam}": backend for fam in config.FAMILIES})
    _emit(
        on_event,
        "saved",
        backend,
        f"Saved: {backend} is now the backend for "
        f"{', '.join(config.FAMILIES)} (pinned in node.toml). The node uses it from its "
        f"next start.",
    )
    return builds


async def update(
    on_event: EventSink = None, *, hw: hardware.Hardware | None = None
) -> list[InstalledBuild]:
    """Fetch the newer builds the published manifest names for the backends in use:
    verified, unpacked and staged — not loaded. A running node keeps its build; the node
    trial-loads a staged build at its next start and lets it take over only if it works
    (:func:`settle_staged`). With no published manifest set, the built-in one is the
    reference (new builds come with new versions of Cantor). Raises BackendError if the
    published manifest cannot be fetched or is refused (unsigned, tampered, wrong key)."""
    if not manifest.manifest_url():
        m = manifest.load_builtin()
        _emit(on_event, "note", None, manifest.NO_PUBLISHED_MANIFEST)
    else:
        try:
            m = await manifest.fetch()
        except manifest.ManifestError as exc:
            raise BackendError(
                f"cannot check for updates: {exc}. The manifest built into Cantor stays in use."
            ) from None
    hw = hw or hardware.probe_from_env()
    done: list[InstalledBuild] = []
    for fam in config.FAMILIES:
        st = status(fam, hw, m)
        in_use = [b for b in (st.default, st.pinned) if b]
        for name in dict.fromkeys(in_use):
            item = st.backend(name)
            if engine_store.user_build(fam, name) is not None:
                _emit(
                    on_event,
                    "up_to_date",
                    name,
                    f"{name}: uses your own build from node.toml; Cantor never replaces it.",
                    fam,
                )
                continue
            if item.state in ("update_available", "update_required"):
                build = m.best(fam, name, hw.os, hw.arch)
                if build is None:
                    _emit(
                        on_event,
                        "failed",
                        name,
                        no_build_text(
                            name, hw.os, hw.arch, m.best(fam, "cpu", hw.os, hw.arch) is not None
                        ),
                        fam,
                    )
                    continue
                current = engine_store.inspect(fam, name).build
                stage = item.state == "update_available" and current is not None
                try:
                    inst = await _fetch(fam, name, build, m, hw, on_event, stage=stage)
                except (download.DownloadError, engine_store.StoreError, OSError) as exc:
                    raise BackendError(
                        f"{name}: could not fetch {build.version}: {exc}. "
                        f"The installed build stays in use."
                    ) from None
                done.append(inst)
                if stage and current is not None:
                    text = (
                        f"{name}: {build.version} fetched and verified. A running node "
                        f"keeps the build it has; at its next start the node trial-loads "
                        f"{build.version} and uses it only if it works ({current.version} "
                        f"stays otherwise)."
                    )
                else:
                    text = (
                        f"{name}: {build.version} fetched and verified. A running node "
                        f"keeps the build it has; the new one is trial-loaded and used "
                        f"from its next start."
                    )
                _emit(on_event, "updated", name, text, fam)
            elif item.state == "installed":
                if item.staged:
                    text = (
                        f"{name}: {item.staged} is already fetched; the node trial-loads "
                        f"it at its next start."
                    )
                else:
                    text = f"{name}: {item.version} is the newest published build."
                    newest = m.best(fam, name, hw.os, hw.arch)
                    refused = applicable_record(fam, name, newest, hw)
                    if (
                        newest is not None
                        and refused is not None
                        and refused.rejected
                        and newest.version != item.version
                    ):
                        text = (
                            f"{name}: {item.version} stays; {newest.version} was "
                            f"rejected here and is not offered again "
                            f"({refused.reason})."
                        )
                _emit(on_event, "up_to_date", name, text, fam)
            elif item.state == "installable":
                _emit(
                    on_event,
                    "note",
                    name,
                    f"{name}: not installed, nothing to update. Run: cantor backends --install",
                    fam,
                )
            else:
                _emit(on_event, "note", name, f"{name}: {item.message}", fam)
    return done


async def settle_staged(
    family: str = "acestep",
    *,
    hw: hardware.Hardware | None = None,
    on_event: EventSink = None,
    only: str | None = None,
) -> list[BackendEvent]:
    """Trial-load every build ``--update`` staged for ``family`` (or only ``only``'s) before
    it takes over: one that works replaces the current build (which stays as the previous
    one, for --rollback); one that fails is deleted, recorded as rejected with the engine's
    reason — ``--update`` will not offer it again — and the current build stays in use.
    The node calls this when it starts. Returns the events it emitted."""
    told: list[BackendEvent] = []

    def tell(event: BackendEvent) -> None:
        told.append(event)
        if on_event is not None:
            on_event(event)

    names = [only] if only else list(BACKENDS)
    staged = [(name, engine_store.staged(family, name)) for name in names]
    waiting = [(name, build) for name, build in staged if build is not None]
    if not waiting:
        return told
    hw = hw or hardware.probe_from_env()
    for name, build in waiting:
        if not hw.backends[name].supported:
            continue
        current = engine_store.inspect(family, name).build
        result = await _trial(family, name, build, hw, tell, what=f"the update to {build.version}")
        if result.ok:
            engine_store.promote_staged(family, name)
            was = (
                f" (was {current.version}; cantor backends --rollback returns to it)"
                if current is not None
                else ""
            )
            _emit(
                tell,
                "updated",
                name,
                f"{name}: {build.version} works on {result.device} and is now in use{was}.",
                family,
            )
        else:
            engine_store.drop_staged(family, name)
            stays = (
                f"{current.version} stays in use"
                if current is not None
                else f"no {name} build is installed"
            )
            _emit(
                tell,
                "rejected",
                name,
                f"{name}: the update to {build.version} was "
                f"rejected: {result.reason}. {stays}; --update will not offer "
                f"{build.version} again.",
                family,
            )
    return told


async def engine_for(
    family: str = "acestep", *, hw: hardware.Hardware | None = None, on_event: EventSink = None
) -> InstalledBuild:
    """The build the node runs for ``family``: the pinned backend, else the auto rule's,
    trial-loaded first when no trial of it holds on this machine (a user's own build on a
    backend it was never tried on, a build tried before a driver changed). In auto mode a
    backend rejected now is skipped for the next one. Raises BackendError saying why no
    engine can run (never naming as in use one that is not installed and working)."""
    machine = hw if hw is not None else await asyncio.to_thread(hardware.probe_from_env)
    await settle_staged(family, hw=machine, on_event=on_event)
    for _round in range(len(BACKENDS) + 1):
        st = await asyncio.to_thread(status, family, machine)
        chosen = st.default
        if not chosen:
            raise BackendError(
                f"no {family} engine has a build for this machine; only the "
                f"sketch engine can run here"
            )
        item = st.backend(chosen)
        how = "pinned in node.toml" if st.pinned else "chosen automatically"
        if item.state == REJECTED:
            raise BackendError(
                f"the {chosen} engine ({how}) was {item.message}; or run: "
                f"cantor backends --use auto"
            )
        build = engine_store.installed(family, chosen)
        if build is None or not item.works:
            raise BackendError(
                f"the {chosen} engine ({how}) is not installed for {family}; "
                f"run `cantor backends --install`"
            )
        if item.trial is not None:
            return with_device_env(build, machine)
        result = await _trial(family, chosen, build, machine, on_event)
        if result.ok:
            return with_device_env(build, machine)
        log.warning("the %s engine for %s was rejected: %s", chosen, family, result.reason)
        if st.pinned:
            raise BackendError(
                f"the {chosen} engine ({how}) was rejected: {result.reason}. "
                f"Run: cantor backends --use auto"
            )
    raise BackendError(
        f"no {family} engine works on this machine; only the sketch engine can run here"
    )


def rollback(
    on_event: EventSink = None, *, hw: hardware.Hardware | None = None
) -> list[InstalledBuild]:
    """``cantor backends --rollback``: for each backend in use, drop a staged update, or make
    the previous build current again. Raises BackendError when there is nothing to return
    to. A running node keeps the build it started with until it restarts."""
    hw = hw or hardware.probe_from_env()
    done: list[InstalledBuild] = []
    for fam in config.FAMILIES:
        st = status(fam, hw)
        for name in dict.fromkeys(b for b in (st.pinned, st.default) if b):
            current = engine_store.inspect(fam, name).build
            waiting = engine_store.staged(fam, name)
            if waiting is not None:
                engine_store.drop_staged(fam, name)
                keep = f"{current.version} stays in use" if current else "nothing else is installed"
                _emit(
                    on_event,
                    "rolled_back",
                    name,
                    f"{name}: the staged {waiting.version} is dropped; {keep}.",
                    fam,
                )
                if current is not None:
                    done.append(current)
                continue
            before = engine_store.previous(fam, name)
            if current is None or before is None:
                continue
            back = engine_store.rollback(fam, name)
            if back is not None:
                done.append(back)
                _emit(
                    on_event,
                    "rolled_back",
                    name,
                    f"{name}: back to {back.version} (was "
                    f"{current.version}). The node uses it from its next start.",
                    fam,
                )
    if not done:
        raise BackendError(
            "nothing to roll back: no backend in use has a previous or a staged build"
        )
    return done


def set_keep_loaded(on: bool) -> str:
    """Save node.keep_loaded; returns the sentence to show."""
    config.update({"node.keep_loaded": bool(on)})
    if on:
        return (
            "Keep-loaded is on (saved in node.toml): the last model stays loaded between "
            "songs, in RAM or on the GPU. It applies from the next song; restart the node "
            "to release a model held now."
        )
    return (
        "Keep-loaded is off (saved in node.toml): the node releases a model's weights "
        "after every song. It applies from the next song; restart the node to release a "
        "model held now."
    )


async def ensure_engine(
    family: str = "acestep",
    sink_or_backend: EventSink | str = None,
    *,
    on_event: EventSink = None,
    backend: str | None = None,
    hw: hardware.Hardware | None = None,
) -> InstalledBuild:
    """The installed build for the default backend; if none is installed, install one the
    way ``--install`` does. ``cantor pull`` calls this so a model comes with an engine.

    The second argument is the event sink, or a backend name (then it is like ``backend=``).
    With a backend (or a pin in node.toml) that one is fetched and trial-loaded if it is not
    installed, and a failure raises BackendError instead of falling back. Nothing is pinned.
    """
    if isinstance(sink_or_backend, str):
        backend = backend or sink_or_backend
    elif sink_or_backend is not None:
        on_event = on_event or sink_or_backend
    if backend is not None and backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
    hw = hw or hardware.probe_from_env()
    st = status(family, hw)
    wanted = backend or st.default
    if wanted:
        inst = engine_store.installed(family, wanted)
        if inst is not None and st.backend(wanted).state != "update_required":
            return inst
    wanted = backend or st.pinned
    if wanted:
        m, note = await manifest.fetch_or_fallback()
        if note:
            _emit(on_event, "note", None, note, family)
        outcome = await _fetch_and_trial(family, wanted, m, hw, on_event)
        if not outcome.ok:
            kind, text = outcome.told(wanted)
            _emit(on_event, kind, wanted, text, family)
            hint = " Run: cantor backends --use auto" if wanted == st.pinned else ""
            raise BackendError(f"{text}{hint}")
        _emit(
            on_event,
            "kept",
            wanted,
            f"{wanted}: works — installed ({outcome.kept.version}).",
            family,
        )
        return outcome.kept
    return await install(family, on_event, hw=hw)


SKETCH_TEST_SYNTH_ENV = "CANTOR_TEST_SKETCH_SYNTH_S"
"""Tests and benches only: every Sketch synth job of this node takes at least this many
seconds (so engines sharing a small machine behave like engines on machines of their own)."""


def sketch_build(family: str = "acestep") -> InstalledBuild:
    """The built-in sketch engine, started the same way as an ace-server build."""
    from ..sketch import SKETCH_VERSION

    argv = selfexec.self_argv("sketch-server")
    paced = os.environ.get(SKETCH_TEST_SYNTH_ENV, "").strip()
    if paced:  # tests and benches only: a fixed render time (sketch-server --help)
        argv += ["--test-synth-seconds", paced]
    return InstalledBuild(
        family=family,
        backend="cpu",
        version=SKETCH_VERSION,
        argv=argv,
        env={},
        path=None,
        source="sketch",
    )
