"""`pull`: download a model's set (DiT + text encoder + VAE + LM), then make sure an engine
is installed for it.

Downloads go through the one downloader (``cantor_desktop.fetch.download``): ``.part`` resume, the
sha256 checked while streaming, the file only appearing when whole. Before the first byte
the total still to download (minus what ``.part`` files already hold) is checked against the
free disk space. Cancelling (Ctrl-C, the app's Cancel) keeps the ``.part`` files: the next
pull resumes them.

Progress goes to ``on_event(PullEvent)`` (:mod:`.events`); the same events feed the CLI's
progress lines, the node's SSE stream and the app's Library page.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from pathlib import Path
from collections.abc import Awaitable
from typing import Any, Callable

from filelock import FileLock, Timeout

from ..fetch import download as dl
from ..fetch.connection_slots import ConnectionSlots, Turn
from ..errors import CantorError
from ..system.paths import paths
from . import catalogue as cat
from . import hub, library
from .catalogue import FAMILY, SKETCH, UnknownModel
from .events import PullEvent, PullStep
from .library import LibraryError, ModelFiles

EnsureEngine = Callable[[str, Callable[[Any], None]], Awaitable[Any]]
"""An engine made sure of for a family, its progress told (the installer's ensure_engine)."""

TOKEN_MESSAGE = "This model needs a Hugging Face token: run `cantor login` or set HF_TOKEN"


class PullError(CantorError):
    """A pull failed; the message is meant for the user."""


class NeedsToken(PullError):
    """The hub answered 401/403."""


class BadModelName(PullError, ValueError):
    """Unknown model or language model size (bad input: CLI exit 2, HTTP 400)."""


class PullRunning(PullError):
    """The model is being downloaded right now (its files cannot be discarded yet)."""


def _as_dict(event: Any) -> dict:
    if isinstance(event, dict):
        return event
    if hasattr(event, "to_dict"):
        try:
            return dict(event.to_dict())
        except Exception:
            pass
    if hasattr(event, "__dataclass_fields__"):
        try:
            return asdict(event)
        except Exception:
            pass
    return {"message": str(event)}


def lock_for(name: str, timeout: float = 0) -> FileLock:
    """The lock a pull of ``name`` holds while it writes that model's files (a second pull,
    or removing its ``.part`` files, waits for it or is refused)."""
    folder = paths().locks_dir
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{name}.lock"), timeout=timeout)


def discard(name: str, *, wait: float = 5.0) -> library.RemoveResult:
    """Delete what a failed or stopped pull of ``name`` left (its ``.part`` files), never a
    complete file. A pull of it that is still stopping is waited for up to ``wait`` seconds
    (PullRunning after that); partial companions are kept while another model's pull runs,
    since it may be writing them. Raises UnknownModel / LibraryError as
    :func:`library.remove_parts` does."""
    model = library.find(name)
    lock = lock_for(model.name, timeout=wait)
    try:
        lock.acquire()
    except Timeout:
        raise PullRunning(f"{model.name} is still downloading; pause it first") from None
    try:
        return library.remove_parts(model.name, companions=not _other_pulls(model.name))
    finally:
        lock.release()


def _other_pulls(name: str) -> bool:
    """Is a pull of another model running now (holding its lock)?"""
    for path in sorted(paths().locks_dir.glob("*.lock")):
        if path.stem == name:
            continue
        lock = FileLock(str(path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            return True
        lock.release()
    return False


async def pull(
    name: str,
    *,
    on_event: Callable[[PullEvent], None] | None = None,
    lm_size: str | None = None,
    ensure_engine: EnsureEngine | None = None,
    stall_timeout: float = 30.0,
    retries: int = 5,
) -> ModelFiles:
    """Download what ``name`` still lacks and return the files the node will use.

    Raises BadModelName (unknown model / LM size), NeedsToken (401/403),
    ``download.NotEnoughSpace`` (before any byte), ``download.DownloadError`` (network,
    hash), PullError (anything else worth telling the user). ``asyncio.CancelledError``
    passes through with the ``.part`` files kept. With ``ensure_engine`` (the installer's
    :func:`cantor_desktop.install.backends.ensure_engine`) an engine is made sure of after the
    files; that step never fails the pull: its outcome is in the final ``done`` event
    (``engine_ready``, ``engine_error``).
    """
    emit = on_event or (lambda event: None)
    wanted = name.strip()
    if wanted.endswith(".gguf"):
        wanted = wanted[: -len(".gguf")]
    if wanted == SKETCH:
        emit(
            PullEvent(
                PullStep.DONE,
                SKETCH,
                message="the sketch engine is built in: nothing to download",
                engine_ready=True,
                backend=SKETCH,
            )
        )
        return library.resolve(SKETCH)
    if lm_size is not None and lm_size not in cat.LM_SIZES:
        raise BadModelName(f"--lm-size {lm_size!r} is not one of {', '.join(cat.LM_SIZES)}")

    emit(PullEvent(PullStep.CATALOGUE, wanted, message="asking the model hub for the file list"))
    try:
        catalogue = await cat.refresh()
    except hub.HubError as exc:  # a bad HF_ENDPOINT
        raise PullError(str(exc)) from None
    try:
        dit = catalogue.dit_for(wanted)
    except UnknownModel as exc:
        raise BadModelName(str(exc)) from None
    model_name = dit.stem
    try:
        info = library.find(model_name, catalogue=catalogue, lm_size=lm_size)
    except (UnknownModel, LibraryError) as exc:
        raise BadModelName(str(exc)) from None
    if info.imported:
        raise PullError(
            f"{model_name} was imported from {info.folder}; pull downloads only "
            f"into {library.family_dir()}. Remove the import first "
            f"(`cantor models rm {model_name}`) to download it."
        )

    todo = [f for f in info.files if f.state != library.F_READY]
    for f in todo:
        if catalogue.get(f.name) is None:
            raise PullError(
                f"{f.name} ({f.kind}) is {f.state} and is not a file of "
                f"{catalogue.repo}; replace it by hand"
            )
    total = sum(f.to_get for f in todo)
    approximate = any(f.size_approximate for f in todo) or catalogue.source == "builtin"
    emit(
        PullEvent(
            PullStep.PLAN,
            model_name,
            total=total,
            approximate=approximate,
            message=f"{len(todo)} file(s) to download" if todo else "already downloaded",
            files=[
                {
                    "name": f.name,
                    "kind": f.kind,
                    "size": f.size,
                    "to_get": f.to_get,
                    "state": f.state,
                }
                for f in todo
            ],
        )
    )

    folder = library.family_dir()
    lock = lock_for(model_name)
    try:
        lock.acquire()
    except Timeout:
        raise PullError(f"{model_name} is already being downloaded by another pull") from None
    try:
        if todo:
            dl.check_free_space(folder, total)  # before the first byte
        await _fetch_files(
            catalogue,
            todo,
            folder,
            model_name,
            total,
            approximate,
            emit,
            stall_timeout=stall_timeout,
            retries=retries,
        )
    finally:
        lock.release()

    files = library.resolve(model_name, lm_size=lm_size)
    if ensure_engine is None:
        emit(PullEvent(PullStep.DONE, model_name, message=f"{model_name} is ready"))
        return files
    outcome = await _engine_step(model_name, emit, ensure_engine)
    if outcome.engine_ready:
        message = f"{model_name} is ready"
    else:
        message = f"Model ready. No engine yet: {outcome.engine_error}"
    emit(
        PullEvent(
            PullStep.DONE,
            model_name,
            message=message,
            engine_ready=outcome.engine_ready,
            engine_error=outcome.engine_error,
            backend=outcome.backend,
            version=outcome.version,
            engine=outcome.engine,
        )
    )
    return files


async def _fetch_files(
    catalogue: cat.Catalogue,
    todo: list[library.FileInfo],
    folder: Path,
    model_name: str,
    total: int,
    approximate: bool,
    emit: Callable[[PullEvent], None],
    *,
    stall_timeout: float,
    retries: int,
) -> None:
    """Download ``todo`` over the pull's ``downloads.connections``, shared
    (`connection_slots`): the first file takes them all, and the next one starts once the
    file before it has asked for its last range, on the connections its last ranges leave
    free. The first failure stops the others (their ``.part`` files are kept) and is
    raised."""
    connections = dl.configured_connections()  # node.toml and the keyring: read once
    headers = hub.auth_headers()
    slots = ConnectionSlots(connections)
    turns = [slots.turn(rank) for rank in range(len(todo))]
    got = {f.name: 0 for f in todo}  # bytes of each file fetched in this pull
    speeds: dict[str, float] = {}  # the smoothed speed of each file still coming
    started = time.monotonic()

    def received() -> int:
        return sum(got.values())

    failed = False

    async def fetch(rank: int, f: library.FileInfo) -> None:
        nonlocal failed
        if rank > 0:
            await turns[rank - 1].asked_all.wait()
        if failed:  # an earlier file failed: the pull is stopping, start nothing more
            return
        try:
            await fetch_file(turns[rank], f)
        except BaseException:
            failed = True
            raise
        finally:
            turns[rank].asked_all.set()  # also when it failed before its first request

    async def fetch_file(turn: Turn, f: library.FileInfo) -> None:
        entry = catalogue.get(f.name)
        if entry is None:  # the plan is made from the catalogue: never, unless changed
            raise PullError(f"{f.name} is no longer in the hub's list of files")
        dest = folder / f.name
        if f.state == library.F_CORRUPT and dest.exists():
            dest.unlink()  # ours, in the library folder: replace it
        url = hub.resolve_url(catalogue.repo, f.name, catalogue.revision)
        sha = entry.sha256 or await hub.probe_sha256(url)
        size = None if entry.approximate else entry.size
        emit(
            PullEvent(
                PullStep.FILE_START,
                model_name,
                file=f.name,
                file_total=size or f.size,
                received=received(),
                total=total,
                approximate=approximate,
            )
        )

        def on_progress(p: dl.Progress) -> None:
            got[f.name] = max(0, p.received - p.resumed_from)
            speeds[f.name] = p.speed
            now_got = received()
            speed = sum(speeds.values()) or now_got / max(1e-6, time.monotonic() - started)
            left = max(0, total - now_got)
            emit(
                PullEvent(
                    PullStep.PROGRESS,
                    model_name,
                    file=f.name,
                    file_received=p.received,
                    file_total=p.total,
                    received=now_got,
                    total=total,
                    speed=speed,
                    eta=(left / speed) if speed > 0 else None,
                    approximate=approximate,
                )
            )

        try:
            await dl.download(
                url,
                dest,
                sha256=sha,
                size=size,
                headers=headers,
                on_progress=on_progress,
                stall_timeout=stall_timeout,
                retries=retries,
                connections=connections,
                slots=turn,
            )
        except dl.AuthRequired:
            raise NeedsToken(TOKEN_MESSAGE) from None
        finally:
            speeds.pop(f.name, None)
        library.record_hash(dest, sha256=sha, expected=sha, ok=True if sha else None)
        got[f.name] = f.to_get
        length = dest.stat().st_size
        emit(
            PullEvent(
                PullStep.FILE_DONE,
                model_name,
                file=f.name,
                file_received=length,
                file_total=length,
                received=received(),
                total=total,
                verified=sha is not None,
                message="" if sha else "no sha256 known: checked by size only",
            )
        )

    tasks = [asyncio.create_task(fetch(rank, f)) for rank, f in enumerate(todo)]
    await dl.all_or_first_error(tasks)


async def _engine_step(
    model_name: str, emit: Callable[[PullEvent], None], ensure_engine: EnsureEngine
) -> PullEvent:
    """Make sure an engine is installed. The model files are already complete and verified,
    so a failure here (typically no internet for the engine download) does not fail the
    pull: it is reported in the returned event (``engine_ready`` False, ``engine_error``)."""
    emit(PullEvent(PullStep.ENGINE, model_name, message="making sure an engine is installed"))
    try:
        build = await ensure_engine(
            FAMILY,
            lambda ev: emit(
                PullEvent(
                    PullStep.ENGINE,
                    model_name,
                    message=str(_as_dict(ev).get("message") or ev),
                    engine=_as_dict(ev),
                )
            ),
        )
    except Exception as exc:  # cancellation (BaseException) still ends the pull
        reason = (str(exc).strip() or type(exc).__name__).rstrip(".")
        engine = {"ready": False, "error": reason}
        emit(
            PullEvent(
                PullStep.ENGINE,
                model_name,
                message=f"no engine yet: {reason}",
                engine=engine,
                engine_ready=False,
                engine_error=reason,
            )
        )
        return PullEvent(
            PullStep.ENGINE, model_name, engine=engine, engine_ready=False, engine_error=reason
        )
    backend = getattr(build, "backend", None)
    version = str(getattr(build, "version", "") or "") or None
    what = " ".join(v for v in (backend, version) if v)
    engine = {"ready": True, "backend": backend, "version": version}
    emit(
        PullEvent(
            PullStep.ENGINE,
            model_name,
            message=f"engine ready: {what or build}",
            engine=engine,
            engine_ready=True,
            backend=backend,
            version=version,
        )
    )
    return PullEvent(
        PullStep.ENGINE,
        model_name,
        engine=engine,
        engine_ready=True,
        backend=backend,
        version=version,
    )
