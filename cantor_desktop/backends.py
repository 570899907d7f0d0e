"""Backends: what this machine can run, which one is the default, install / use / update.

The seed page "cantor backends" made into functions the node, the app and the CLI share (the
CLI is a thin shell over them). States and the auto rule follow Lemonade:

- states per family × backend: ``unsupported`` (wrong OS/arch, no matching device, or no
  build published for this machine), ``installable``, ``installed``, ``update_available``
  (the manifest names a newer build), ``update_required`` (the installed build's version file
  is missing or from another Cantor);
- auto: a pin in node.toml wins; else the first supported backend in preference order, unless
  a later supported one is already installed while the earlier ones are merely installable —
  then the first installed one (no surprise multi-GB download when a working build is on disk).

Long operations report :class:`BackendEvent` objects to ``on_event`` as they happen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import config, download, engine_store, hardware, manifest, selfexec, trial
from .engine_store import InstalledBuild
from .manifest import Build, Manifest

BACKENDS = config.BACKENDS
GPU_BACKENDS = ("cuda12", "metal", "vulkan")
INSTALLED_STATES = ("installed", "update_available", "update_required")
TRIAL_TIMEOUT_ENV = "CANTOR_TRIAL_TIMEOUT"
DEFAULT_TRIAL_TIMEOUT = 60.0
LABELS = {"cuda12": "CUDA 12 (NVIDIA)", "metal": "Metal (Apple Silicon)",
          "vulkan": "Vulkan (any GPU)", "cpu": "CPU"}


class BackendError(Exception):
    """An install, --use or --update could not be done; the message says why."""


@dataclass
class BackendEvent:
    """One step of a long operation, for a progress line or a log."""

    kind: str            # note, skipped, no_build, download, unpack, trial, rejected,
                         # fallback, kept, failed, saved, updated, up_to_date
    backend: str | None
    message: str
    progress: float | None = None    # 0..1 during a download, when the size is known
    family: str = "acestep"
    received: int | None = None
    total: int | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "backend": self.backend, "message": self.message,
                "progress": self.progress, "family": self.family, "received": self.received,
                "total": self.total}


EventSink = Callable[[BackendEvent], None] | None


@dataclass
class BackendStatus:
    name: str
    state: str
    evidence: list[str] = field(default_factory=list)
    message: str = ""
    version: str | None = None       # installed version, else the one that can be fetched
    installed: bool = False
    pinned: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state, "evidence": list(self.evidence),
                "message": self.message, "version": self.version,
                "installed": self.installed, "pinned": self.pinned}


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
        out = {"os": self.os, "arch": self.arch, "pinned": self.pinned,
               "default": self.default, "keep_loaded": self.keep_loaded,
               "backends": [b.to_dict() for b in self.backends]}
        if with_hardware:
            out["family"] = self.family
            out["hardware"] = self.hardware.to_dict()
            out["manifest"] = self.manifest_source
        return out


def _emit(on_event: EventSink, kind: str, backend: str | None, message: str,
          family: str = "acestep", **extra) -> None:
    if on_event is not None:
        on_event(BackendEvent(kind=kind, backend=backend, message=message, family=family,
                              **extra))


def no_build_text(backend: str, os_name: str, arch: str) -> str:
    if backend == "cpu":
        return (f"No build for this machine: no cpu engine is published for {os_name} {arch}. "
                f"The built-in sketch engine still works.")
    return (f"No build for this machine: no {backend} engine is published for {os_name} "
            f"{arch}. Use another backend; the CPU always has one.")


def is_newer(build: Build | None, inst: InstalledBuild) -> bool:
    """Does the manifest name a newer (or re-published) build than the one installed?"""
    if build is None or inst.source != "store":
        return False
    new, old = manifest.version_key(build.version), manifest.version_key(inst.version)
    return new > old or (new == old and build.sha256 != inst.sha256)


# -- status and the auto rule -----------------------------------------------------------------

def _backend_status(family: str, name: str, hw: hardware.Hardware, m: Manifest,
                    pinned: str | None) -> BackendStatus:
    ev = hw.backends[name]
    st = BackendStatus(name=name, state="unsupported", evidence=list(ev.evidence),
                       pinned=(pinned == name))
    build = m.best(family, name, hw.os, hw.arch)
    user = engine_store.user_build(family, name)
    entry = engine_store.inspect(family, name)
    if not ev.supported:
        st.message = ev.reason
        if entry.build:
            st.evidence.append(f"installed {entry.build.version} in {entry.build.path}")
            st.installed = True
            st.version = entry.build.version
        return st
    if user is not None:
        st.version, st.installed = user.version, True
        st.evidence.append(f"your build: {user.path} (node.toml engines.{family}.path)")
        if not Path(user.argv[0]).is_file():
            st.state = "update_required"
            st.message = (f"The build named in node.toml does not exist: {user.argv[0]}. "
                          f"Run: cantor config set engines.{family}.path /path/to/ace-server")
        else:
            st.state = "installed"
            st.message = (f"Uses your own build; Cantor never replaces it. "
                          + _use_hint(name, pinned))
        return st
    if entry.build is not None:
        inst = entry.build
        st.version, st.installed = inst.version, True
        st.evidence.append(f"installed {inst.version} in {inst.path}")
        tried = engine_store.last_trial(inst)
        if tried:
            st.evidence.append(tried)
        if is_newer(build, inst):
            st.state = "update_available"
            st.message = (f"{build.version} is published (installed: {inst.version}). "
                          f"Run: cantor backends --update")
        else:
            st.state = "installed"
            st.message = f"Installed {inst.version}. " + _use_hint(name, pinned)
        return st
    if entry.problem:
        st.state = "update_required"
        st.installed = True
        st.message = f"The installed build cannot be used ({entry.problem}). " \
                     f"Run: cantor backends --update"
        return st
    if build is None:
        refusal = m.refusal(family, name, hw.os, hw.arch)
        st.message = refusal or no_build_text(name, hw.os, hw.arch)
        return st
    st.state = "installable"
    st.version = build.version
    size = f", {download.human_size(build.size)}" if build.size else ""
    st.message = (f"Not installed; {build.version}{size} can be fetched and tried. "
                  f"Run: cantor backends --install")
    return st


def _use_hint(name: str, pinned: str | None) -> str:
    if pinned == name:
        return "Pinned in node.toml. Run: cantor backends --use auto to let Cantor choose"
    return f"Run: cantor backends --use {name} to pin it"


def choose_default(backends: list[BackendStatus], pinned: str | None) -> str | None:
    """Lemonade's rule (see the module doc). None when nothing is supported here."""
    if pinned:
        return pinned
    supported = [b for b in backends if b.state != "unsupported"]
    if not supported:
        return None
    installed = next((b for b in supported if b.state in INSTALLED_STATES), None)
    return (installed or supported[0]).name


def status(family: str = "acestep", hw: hardware.Hardware | None = None,
           manifest: Manifest | None = None) -> SystemStatus:
    """The machine, and every backend in preference order with state, evidence and message.
    Reads no network: the manifest is the last published copy fetched, else the builtin."""
    hw = hw or hardware.probe_from_env()
    m = manifest or _manifest_module().current()
    cfg, problem = config.load_or_defaults()
    pinned = cfg.pinned_backend(family)
    items = [_backend_status(family, name, hw, m, pinned) for name in BACKENDS]
    default = choose_default(items, pinned)
    return SystemStatus(family=family, os=hw.os, arch=hw.arch, pinned=pinned, default=default,
                        keep_loaded=bool(cfg.get("node.keep_loaded")), backends=items,
                        hardware=hw, manifest_source=m.source,
                        config_problem=str(problem) if problem else "")


def _manifest_module():
    return manifest


def default_backend(family: str = "acestep", hw: hardware.Hardware | None = None,
                    manifest: Manifest | None = None) -> str | None:
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
        if other.sha256 != build.sha256 or other.backend == build.backend \
                or other.family != build.family or (other.os, other.arch) != (hw.os, hw.arch):
            continue
        have = engine_store.inspect(other.family, other.backend).build
        if have is None or have.sha256 != other.sha256:
            return True
    return False


def _progress_sink(on_event: EventSink, family: str, backend: str, what: str):
    def sink(p: download.Progress) -> None:
        total = f" of {download.human_size(p.total)}" if p.total else ""
        _emit(on_event, "download", backend,
              f"{backend}: downloading {what}: {download.human_size(p.received)}{total}",
              family, progress=p.fraction, received=p.received, total=p.total)
    return sink


async def _fetch(family: str, backend: str, build: Build, m: Manifest, hw: hardware.Hardware,
                 on_event: EventSink) -> InstalledBuild:
    cached = engine_store.archive_cache_path(build).exists()
    _emit(on_event, "download", backend,
          f"{backend}: fetching {build.version} ({build.url.rsplit('/', 1)[-1]})"
          + (" from the download cache" if cached else ""), family, progress=0.0)
    inst, _fetched = await engine_store.install(
        build, on_progress=_progress_sink(on_event, family, backend, build.version),
        keep_archive=_archive_needed_later(build, m, hw))
    _emit(on_event, "unpack", backend, f"{backend}: {build.version} verified (sha256) and "
          f"unpacked in {inst.path}", family, progress=1.0)
    return inst


@dataclass
class _Tried:
    ok: bool
    build: InstalledBuild | None = None
    reason: str = ""
    no_build: bool = False


async def _fetch_and_trial(family: str, backend: str, m: Manifest, hw: hardware.Hardware,
                           on_event: EventSink) -> _Tried:
    """Make sure a build for backend is on disk, then trial-load it. A store build that
    fails is removed again (the previous one, if any, takes over): only builds that work
    are kept."""
    user = engine_store.user_build(family, backend)
    existing = engine_store.inspect(family, backend).build
    build = m.best(family, backend, hw.os, hw.arch)
    fresh = False
    if user is not None:
        inst = user
    elif existing is not None and not is_newer(build, existing):
        inst = existing
    elif build is None:
        text = m.refusal(family, backend, hw.os, hw.arch) or no_build_text(backend, hw.os,
                                                                            hw.arch)
        return _Tried(False, reason=text, no_build=True)
    else:
        try:
            inst = await _fetch(family, backend, build, m, hw, on_event)
        except (download.DownloadError, engine_store.StoreError, OSError) as exc:
            return _Tried(False, reason=f"could not fetch {build.describe()}: {exc}")
        fresh = True
    _emit(on_event, "trial", backend, f"{backend}: trying {inst.version} on "
          f"{trial.expected_device(inst, backend)} …", family)
    result = await trial.trial_load(inst, backend, timeout=_trial_timeout())
    if result.ok:
        if inst.source == "store" and inst.path is not None:
            engine_store.record_trial(inst, result.device, result.seconds)
        return _Tried(True, build=inst)
    if inst.source == "store" and (fresh or existing is not None):
        engine_store.remove_current(family, backend)
    return _Tried(False, build=inst, reason=result.reason)


def rejected_text(backend: str, reason: str) -> str:
    first = (reason.strip().splitlines() or [""])[0]
    kind = "GPU backend" if backend in GPU_BACKENDS else "Backend"
    return f"{kind} rejected: {first}"


async def install(family: str = "acestep", on_event: EventSink = None, *,
                  hw: hardware.Hardware | None = None) -> InstalledBuild:
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
            _emit(on_event, "kept", name,
                  f"{name}: works — kept ({outcome.build.version}). The node uses it from "
                  f"its next start.", family)
            return outcome.build
        if outcome.no_build:
            _emit(on_event, "no_build", name, outcome.reason, family)
            continue
        tried.append(f"{name}: {outcome.reason}")
        _emit(on_event, "rejected", name, rejected_text(name, outcome.reason), family)
        nxt = _next_candidate(st, hw, name)
        if nxt:
            _emit(on_event, "fallback", nxt, f"Falling back to {nxt}.", family)
    raise BackendError("No backend works on this machine"
                       + (": " + "; ".join(tried) if tried else "") + ". The built-in sketch "
                       "engine still works.")


def _next_candidate(st: SystemStatus, hw: hardware.Hardware, after: str) -> str | None:
    names = [b.name for b in st.backends]
    for name in names[names.index(after) + 1:]:
        if hw.backends[name].supported:
            return name
    return None


async def use(backend: str, on_event: EventSink = None, *,
              hw: hardware.Hardware | None = None) -> list[InstalledBuild]:
    """Fetch ``backend`` for every family, trial-load it, and only then pin it in node.toml.

    ``"auto"`` removes the pin. On any failure raises BackendError and node.toml is left
    byte-identical."""
    if backend != "auto" and backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; one of auto, {', '.join(BACKENDS)}")
    # a malformed node.toml is reported before anything is fetched
    config.load()
    if backend == "auto":
        config.update({f"backends.{fam}": "auto" for fam in config.FAMILIES})
        _emit(on_event, "saved", None, "Saved: backends are chosen automatically again "
              "(node.toml). The node uses the choice from its next start.")
        return []
    hw = hw or hardware.probe_from_env()
    ev = hw.backends[backend]
    if not ev.supported:
        raise BackendError(f"{backend} cannot run on this machine: {ev.reason} "
                           f"node.toml is unchanged.")
    m, note = await manifest.fetch_or_fallback()
    if note:
        _emit(on_event, "note", None, note)
    builds = []
    for fam in config.FAMILIES:
        outcome = await _fetch_and_trial(fam, backend, m, hw, on_event)
        if not outcome.ok:
            text = outcome.reason if outcome.no_build else rejected_text(backend, outcome.reason)
            _emit(on_event, "no_build" if outcome.no_build else "rejected", backend, text, fam)
            current = default_backend(fam, hw, m)
            stays = f"; the node keeps using {current}" if current else ""
            raise BackendError(f"{text} (node.toml is unchanged{stays})")
        builds.append(outcome.build)
    config.update({f"backends.{fam}": backend for fam in config.FAMILIES})
    _emit(on_event, "saved", backend, f"Saved: {backend} is now the backend for "
          f"{', '.join(config.FAMILIES)} (pinned in node.toml). The node uses it from its "
          f"next start.")
    return builds


async def update(on_event: EventSink = None, *,
                 hw: hardware.Hardware | None = None) -> list[InstalledBuild]:
    """Fetch the newer builds the published manifest names for the backends in use:
    verified, unpacked, made current — not loaded. A running node keeps its build; the new
    one is used from its next start. With no published manifest set, the built-in one is the
    reference (new builds come with new versions of Cantor). Raises BackendError if the
    published manifest cannot be fetched or is refused (unsigned, tampered, wrong key)."""
    if not manifest.manifest_url():
        m = manifest.load_builtin()
        _emit(on_event, "note", None, manifest.NO_PUBLISHED_MANIFEST)
    else:
        try:
            m = await manifest.fetch()
        except manifest.ManifestError as exc:
            raise BackendError(f"cannot check for updates: {exc}. The manifest built into "
                               f"Cantor stays in use.") from None
    hw = hw or hardware.probe_from_env()
    done: list[InstalledBuild] = []
    for fam in config.FAMILIES:
        st = status(fam, hw, m)
        in_use = [b for b in (st.default, st.pinned) if b]
        for name in dict.fromkeys(in_use):
            item = st.backend(name)
            if engine_store.user_build(fam, name) is not None:
                _emit(on_event, "up_to_date", name, f"{name}: uses your own build from "
                      f"node.toml; Cantor never replaces it.", fam)
                continue
            if item.state in ("update_available", "update_required"):
                build = m.best(fam, name, hw.os, hw.arch)
                if build is None:
                    _emit(on_event, "failed", name, no_build_text(name, hw.os, hw.arch), fam)
                    continue
                try:
                    inst = await _fetch(fam, name, build, m, hw, on_event)
                except (download.DownloadError, engine_store.StoreError, OSError) as exc:
                    raise BackendError(f"{name}: could not fetch {build.version}: {exc}. "
                                       f"The installed build stays in use.") from None
                done.append(inst)
                _emit(on_event, "updated", name, f"{name}: {build.version} fetched and "
                      f"verified. A running node keeps the build it has; the new one is used "
                      f"from its next start.", fam)
            elif item.state == "installed":
                _emit(on_event, "up_to_date", name, f"{name}: {item.version} is the newest "
                      f"published build.", fam)
            elif item.state == "installable":
                _emit(on_event, "note", name, f"{name}: not installed, nothing to update. "
                      f"Run: cantor backends --install", fam)
            else:
                _emit(on_event, "note", name, f"{name}: {item.message}", fam)
    return done


def set_keep_loaded(on: bool) -> str:
    """Save node.keep_loaded; returns the sentence to show."""
    config.update({"node.keep_loaded": bool(on)})
    if on:
        return ("Keep-loaded is on (saved in node.toml): the last model stays loaded between "
                "songs, in RAM or on the GPU. It applies from the next song; restart the node "
                "to release a model held now.")
    return ("Keep-loaded is off (saved in node.toml): the node releases a model's weights "
            "after every song. It applies from the next song; restart the node to release a "
            "model held now.")


async def ensure_engine(family: str = "acestep", sink_or_backend: EventSink | str = None, *,
                        on_event: EventSink = None, backend: str | None = None,
                        hw: hardware.Hardware | None = None) -> InstalledBuild:
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
            text = outcome.reason if outcome.no_build else rejected_text(wanted, outcome.reason)
            _emit(on_event, "no_build" if outcome.no_build else "rejected", wanted, text, family)
            hint = " Run: cantor backends --use auto" if wanted == st.pinned else ""
            raise BackendError(f"{text}{hint}")
        _emit(on_event, "kept", wanted, f"{wanted}: works — installed "
              f"({outcome.build.version}).", family)
        return outcome.build
    return await install(family, on_event, hw=hw)


def sketch_build(family: str = "acestep") -> InstalledBuild:
    """The built-in sketch engine, started the same way as an ace-server build."""
    from .sketch import SKETCH_VERSION
    return InstalledBuild(family=family, backend="cpu", version=SKETCH_VERSION,
                          argv=selfexec.self_argv("sketch-server"), env={}, path=None,
                          source="sketch")
