"""An async client for one engine speaking ace-server's job protocol (a real ace-server build
or the built-in sketch engine): submit → poll → fetch, for ``/lm`` and ``/synth``, and the
two-stage song on top of them.

What the protocol gives and what it does not: a job's id is opaque (never parsed), a result
is read by its Content-Type (JSON, one audio body, or a multipart of audio and latents),
and a failed job's reason is only in the engine's log (its stderr, read by :mod:`.progress`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

import httpx

from ..errors import CantorError
from ..song.lyrics import INSTRUMENTAL, is_instrumental
from ..system.procs.exits import is_bare_exit
from ..song.request import SongRequest

log = logging.getLogger(__name__)

FIRST_POLL = 0.05  # seconds; the first status checks are quick (short LM jobs)
MAX_POLL = 1.0  # never slower than this
POLL_GROWTH = 1.5
STAGE_TIMEOUT = 1200.0  # 20 minutes per stage
DYING_WITHIN = 1.5  # a job "not found" by an engine that is gone this soon died with it
CANCEL_GRACE = 3.0
"""Seconds a cancelled job may take to end at the engine. ace-server checks its cancel flag
between LM tokens, DiT steps and VAE tiles; a step or tile that runs longer (a long song on
a CPU) is ended by stopping the engine, so no CPU goes to a song nobody wants."""
# Song formats the engine does not write itself: ask for 24-bit PCM (peak-normalised, and
# FLAC's deepest depth) and let the node convert.
_CONVERTED_FORMATS = {"flac": "wav24", "mp3": "wav24"}


class EngineError(CantorError):
    """The engine refused or failed a request; ``message`` is the engine's own words."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message if status is None else f"{message} (HTTP {status})")
        self.message = message
        self.status = status


class JobFailed(EngineError):
    """A job ended ``failed`` (or the engine died under it); ``reason`` comes from its log."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason, status)
        self.reason = reason


class JobCancelled(EngineError):
    """The job was cancelled at the engine."""


class EngineUnreachable(EngineError):
    """The engine refused the connection when a song's first job was sent: it is not
    running, and nothing of the song reached it (the caller may start it and send again)."""


class JobLog(Protocol):
    """What the one reading an engine's stderr (the supervisor) tells a client about a job.
    ``since`` is :meth:`mark` taken just before the job was sent: lines before it belong to
    earlier jobs and never explain this one."""

    def mark(self) -> Any: ...

    def failure_reason(self, job_id: str | None = None, since: Any = None) -> str | None: ...

    def last_words(self, job_id: str | None = None, since: Any = None) -> str | None: ...

    @property
    def ended(self) -> bool:
        """The engine process has exited and its exit is known (and read into reasons)."""
        ...


@dataclass
class Track:
    audio: bytes
    content_type: str
    latent: bytes | None = None


@dataclass(frozen=True)
class Part:
    """A file part of a multipart job: audio (WAV or MP3) or a latent (float32 [T, 64])."""

    filename: str
    data: bytes
    content_type: str = "application/octet-stream"


ENDPOINTS = ("/lm", "/synth", "/understand", "/vae")
LATENT_FRAME_BYTES = 64 * 4  # one latent frame: 64 float32 channels; 25 frames a second


def understood(content_type: str, params: dict[str, str], body: bytes) -> tuple[dict, bytes | None]:
    """An ``/understand`` result: the request the engine heard in the audio (the JSON part,
    an array of one) and the source's latent when it came along."""
    if content_type == "application/json":
        found, latent = json.loads(body), None
    elif content_type.startswith("multipart/"):
        found, latent = None, None
        for headers, content in parse_multipart(body, params.get("boundary", "")):
            part_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if part_type == "application/json" and found is None:
                found = json.loads(content)
            elif part_type == "application/octet-stream":
                latent = content
    else:
        raise EngineError(f"the engine answered /understand with {content_type or 'nothing'}")
    if isinstance(found, list):
        found = found[0] if found else None
    if not isinstance(found, dict):
        raise EngineError("the engine's /understand result holds no request")
    return found, latent


def engine_format(song_format: str | None) -> str:
    """The ``output_format`` to ask the engine for, given the song's file format."""
    fmt = (song_format or "wav24").lower()
    if fmt in ("wav16", "wav24", "wav32"):
        return fmt
    if fmt in _CONVERTED_FORMATS:
        return _CONVERTED_FORMATS[fmt]
    raise ValueError(f"format: {song_format!r} is not a song format")


STYLE_NAMES = {
    "steps": "inference_steps",
    "guidance": "guidance_scale",
    "shift": "shift",
    "solver": "solver",
    "lm_temperature": "lm_temperature",
    "lm_cfg": "lm_cfg_scale",
    "lm_top_p": "lm_top_p",
    "lm_top_k": "lm_top_k",
    "lm_negative_prompt": "lm_negative_prompt",
    "adapter": "adapter",
    "adapter_scale": "adapter_scale",
}
"""The song request's style fields → the engine's names (None: the engine's default)."""


def engine_request(
    song: SongRequest,
    *,
    synth_model: str | None,
    lm_model: str | None,
    output_format: str,
    source_duration: float | None = None,
    audio_codes: str | None = None,
) -> dict[str, Any]:
    """A validated song request in the engine's field names. Fields the user left to the
    model are omitted (the engine's defaults mean "choose"). ``output_format`` is the song's
    format; flac and mp3 are rendered as wav24 for the node to convert.

    Edits name their task: cover (``cover-nofsq`` when faithful) with its strengths,
    repaint with its region, extend as the engine's outpainting (a repaint that starts
    before 0 or ends past the source's ``source_duration``), extract / lego / complete with
    their track. ``audio_codes`` (a take's own) re-render it without the LM. A seed asked
    for seeds the LM too (``lm_seed``), so the same seed gives the same song."""
    body: dict[str, Any] = {
        "caption": song.caption,
        "lyrics": INSTRUMENTAL if song.instrumental else song.lyrics,
        "seed": int(song.seed),
        "output_format": engine_format(output_format),
        "synth_batch_size": int(song.batch),
    }
    task = song.task
    if task == "cover":
        body["task_type"] = "cover-nofsq" if song.faithful else "cover"
        if song.strength is not None:
            body["audio_cover_strength"] = float(song.strength)
        if song.noise is not None:
            body["cover_noise_strength"] = float(song.noise)
    elif task == "repaint":
        if song.region is None:
            raise ValueError("repaint needs a region")
        body.update(
            task_type="repaint",
            repainting_start=float(song.region["start"]),
            repainting_end=float(song.region["end"]),
        )
    elif task == "extend":
        if source_duration is None or song.extend is None:
            raise ValueError("extend needs the source's duration and what to add")
        # the repainted region is only what is added: [D, D + after] after the source,
        # [-before, 0] before it (ace-server keeps everything outside the region); both at
        # once can only be one region over the whole canvas, which re-makes the source too
        before = float(song.extend.get("before", 0.0))
        after = float(song.extend.get("after", 0.0))
        if before and after:
            start, end = -before, float(source_duration) + after
        elif before:
            start, end = -before, 0.0
        else:
            start, end = float(source_duration), float(source_duration) + after
        body.update(task_type="repaint", repainting_start=start, repainting_end=end)
    elif task in ("extract", "lego", "complete"):
        body.update(task_type=task, track=song.track)
        if task == "lego" and song.region:
            body.update(
                repainting_start=float(song.region["start"]),
                repainting_end=float(song.region["end"]),
            )
    for field, name in STYLE_NAMES.items():
        value = getattr(song, field)
        if value is not None:
            body[name] = value
    if song.lock_caption:
        body["use_cot_caption"] = False
    if audio_codes:
        body["audio_codes"] = audio_codes
    if song.duration is not None and task in ("text2music", "lego", "complete"):
        body["duration"] = float(song.duration)
    if song.bpm is not None:
        body["bpm"] = int(song.bpm)
    if song.key:
        body["keyscale"] = song.key
    if song.time_signature is not None:
        body["timesignature"] = str(song.time_signature)
    if song.language and not song.instrumental:
        body["vocal_language"] = song.language
    if int(song.seed) >= 0 and not song.instrumental:
        # the LM draws the audio codes (the song's length and melody) from its own seed,
        # random unless given: a song asked for by its seed is then the same song again
        body["lm_seed"] = int(song.seed)
    if synth_model:
        body["synth_model"] = synth_model
    if lm_model and (not song.instrumental or (song.extend or {}).get("lyrics")):
        body["lm_model"] = lm_model  # an extend of an instrumental may sing new lines
    return body


def _content_type(headers: httpx.Headers) -> tuple[str, dict[str, str]]:
    """("multipart/mixed", {"boundary": "..."}) from a Content-Type header."""
    raw = headers.get("content-type", "")
    main, _, rest = raw.partition(";")
    params: dict[str, str] = {}
    for item in rest.split(";"):
        name, eq, value = item.strip().partition("=")
        if eq:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            params[name.strip().lower()] = value
    return main.strip().lower(), params


def parse_multipart(body: bytes, boundary: str) -> list[tuple[dict[str, str], bytes]]:
    """Split a multipart body into (headers, content) parts (RFC 2046): parts sit between
    ``--boundary`` lines; the body of each ends at the CRLF before the next delimiter."""
    if not boundary:
        raise EngineError("multipart result without a boundary")
    delim = b"--" + boundary.encode("latin-1")
    newline = b"\r\n" if (b"\r\n" + delim) in b"\r\n" + body else b"\n"
    data = newline + body
    marker = newline + delim
    pieces = data.split(marker)
    parts: list[tuple[dict[str, str], bytes]] = []
    closed = False
    for piece in pieces[1:]:  # pieces[0] is the preamble
        if piece.startswith(b"--"):
            closed = True
            break
        # the rest of the delimiter line (transport padding), then headers, blank line, body
        _, sep, piece = piece.partition(newline)
        if not sep:
            raise EngineError("malformed multipart result: a delimiter line does not end")
        head, sep, content = piece.partition(newline + newline)
        if not sep:
            if piece.startswith(newline):  # no headers at all
                head, content = b"", piece[len(newline) :]
            else:
                raise EngineError("malformed multipart result: a part has no header end")
        headers: dict[str, str] = {}
        for raw in head.split(newline):
            name, colon, value = raw.decode("latin-1").partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        parts.append((headers, content))
    if not closed:
        raise EngineError("truncated multipart result: no closing boundary")
    return parts


def tracks_from_response(content_type: str, params: dict[str, str], body: bytes) -> list[Track]:
    """One Track per audio part of a multipart result, or one for a raw audio body (older
    servers). Latent parts attach to the audio part before them."""
    if content_type.startswith("audio/"):
        return [Track(audio=body, content_type=content_type)]
    if content_type.startswith("multipart/"):
        tracks: list[Track] = []
        for headers, content in parse_multipart(body, params.get("boundary", "")):
            part_type = headers.get("content-type", "").split(";")[0].strip().lower()
            disposition = headers.get("content-disposition", "")
            if part_type.startswith("audio/"):
                tracks.append(Track(audio=content, content_type=part_type))
            elif 'name="latent"' in disposition or part_type == "application/octet-stream":
                if tracks and tracks[-1].latent is None:
                    tracks[-1].latent = content
            # anything else is not ours to interpret: skipped
        if not tracks:
            raise EngineError("the engine's result holds no audio part")
        return tracks
    raise EngineError(f"the engine answered an unexpected result type {content_type or 'none'!r}")


def join_reasons(lines: list[str]) -> str | None:
    """The engine's error lines for one job as one reason: the first whole (the cause, e.g.
    ``[Load] FATAL: invalid DiT config in X``) and the last (the symptom, ``[Server] FATAL:
    synth load failed``); an ellipsis stands for the links of the chain in between."""
    unique = list(dict.fromkeys(line.strip() for line in lines if line.strip()))
    if not unique:
        return None
    if len(unique) <= 2:
        return "; ".join(unique)
    return f"{unique[0]}; …; {unique[-1]}"


def _names_a_cause(reason: str) -> bool:
    """More than how the process ended ("exit code 1", "killed by signal 9 (SIGKILL)")."""
    return not is_bare_exit(reason)


def _model_files(path: str, body: Any) -> str:
    """The model files a job names: "LM acestep-5Hz-lm-0.6B-Q8_0.gguf" / "DiT x.gguf"."""
    first = body[0] if isinstance(body, list) and body else body
    if not isinstance(first, dict):
        return ""
    names = []
    if path == "/lm" and first.get("lm_model"):
        names.append(f"LM {first['lm_model']}")
    if path == "/synth":
        for key, label in (("synth_model", "DiT"), ("vae", "VAE")):
            if first.get(key):
                names.append(f"{label} {first[key]}")
    return ", ".join(names)


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"]
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message") or data["error"])
    text = response.text.strip()
    return text[:300] if text else f"HTTP {response.status_code} with an empty body"


class EngineClient:
    """One engine at ``base_url``. ``log`` (the supervisor reading the engine's stderr)
    explains failed jobs and a dead engine; without it the reason is looked up in the
    engine's ``/logs`` replay."""

    def __init__(
        self,
        base_url: str,
        *,
        log: JobLog | None = None,
        stage_timeout: float = STAGE_TIMEOUT,
        on_stuck_cancel: Callable[[str], Awaitable[None]] | None = None,
        cancel_grace: float = CANCEL_GRACE,
    ):
        self.base_url = base_url.rstrip("/")
        self._log = log
        self._on_stuck_cancel = on_stuck_cancel  # ends a job the engine did not end itself
        self.cancel_grace = cancel_grace
        self._marks: dict[str, Any] = {}  # job id → the log's mark when it was sent
        self._jobs: dict[str, tuple[str, Any]] = {}  # job id → (path, body) while it runs
        self.stage_timeout = stage_timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=httpx.Timeout(30.0, connect=5.0)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "EngineClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    # -- plain endpoints ----------------------------------------------------------------------

    async def health(self) -> bool:
        try:
            response = await self._http.get("/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def props(self) -> dict:
        response = await self._request("GET", "/props")
        return response.json()

    async def submit(
        self, path: str, body: dict | list, parts: dict[str, "Part"] | None = None
    ) -> str:
        """Queue a job at ``/lm``, ``/synth``, ``/understand`` or ``/vae``; the id is an
        opaque string. With ``parts`` (audio or latents) the body goes as multipart
        form data: a ``request`` field holding one request, and each part as a file."""
        if path not in ENDPOINTS:
            raise ValueError(f"path must be one of {', '.join(ENDPOINTS)}, not {path!r}")
        if parts is not None or path in ("/understand", "/vae"):
            if not isinstance(body, dict):
                raise ValueError("a multipart job takes one request, not an array")
            files = {
                name: (part.filename, part.data, part.content_type)
                for name, part in (parts or {}).items()
            }
            response = await self._request(
                "POST", path, data={"request": json.dumps(body)}, files=files
            )
        else:
            response = await self._request("POST", path, json=body)
        try:
            job_id = response.json()["id"]
        except (ValueError, KeyError, TypeError):
            raise EngineError(
                f"the engine answered {path} without a job id: {response.text[:200]!r}",
                response.status_code,
            ) from None
        return str(job_id)

    async def status(self, job_id: str) -> str:
        response = await self._request("GET", "/job", params={"id": job_id})
        return str(response.json().get("status", ""))

    async def wait(
        self, job_id: str, *, timeout: float | None = None, wake: asyncio.Event | None = None
    ) -> str:
        """Poll until the job is done (returns "done"); JobFailed / JobCancelled otherwise.
        Polls every 50 ms at first, backing off to once a second; gives up (and cancels the
        job) after ``stage_timeout`` seconds. ``wake``, when given, is set by whoever reads
        the engine's log on a line that ends a job: the next poll then happens at once."""
        limit = self.stage_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        delay = FIRST_POLL
        lost_connection = 0
        while True:
            if wake is not None:
                wake.clear()
            try:
                state = await self.status(job_id)
                lost_connection = 0
            except httpx.TransportError as exc:
                # A local engine that refuses connections has died; allow a brief blip.
                lost_connection += 1
                if lost_connection >= 4:
                    raise await self._engine_gone(exc, job_id) from None
                await asyncio.sleep(0.1)
                continue
            except EngineError as exc:
                if exc.status == 404:
                    # a dying engine still answers while its job table is torn down (the
                    # real one exits from its worker thread): that is a death, not a loss
                    if await self._dying():
                        raise await self._engine_gone(exc, job_id) from None
                    raise JobFailed(
                        f"the engine lost job {job_id}: {exc.message}", exc.status
                    ) from None
                raise
            if state == "done":
                return state
            if state == "failed":
                reason = await self._reason(job_id, wait=True)
                if not reason:
                    words = self._last_words(job_id)
                    reason = "the engine did not say why the job failed" + (
                        f" (its last line: {words})" if words else ""
                    )
                raise JobFailed(reason)
            if state == "cancelled":
                raise JobCancelled("the job was cancelled")
            if time.monotonic() >= deadline:
                await self._cancel_quietly(job_id)
                raise JobFailed(f"the engine did not finish within {limit:.0f} s")
            pause = min(delay, max(deadline - time.monotonic(), 0.0))
            if wake is None:
                await asyncio.sleep(pause)
            else:
                try:
                    await asyncio.wait_for(wake.wait(), pause)
                except asyncio.TimeoutError:
                    pass
            delay = min(delay * POLL_GROWTH, MAX_POLL)

    async def result(self, job_id: str, path: str = "/synth") -> Any:
        """The finished job's result, parsed: JSON (``/lm``), Tracks (``/synth``), the heard
        request and latent (``/understand``), latent bytes (``/vae`` encode)."""
        headers, body = await self._body("GET", "/job", params={"id": job_id, "result": "1"})
        kind, params = _content_type(headers)
        if path == "/understand":
            return understood(kind, params, body)
        if path == "/vae":
            return body
        if kind == "application/json":
            return json.loads(body)
        return tracks_from_response(kind, params, body)

    async def cancel(self, job_id: str) -> str:
        response = await self._request("POST", "/job", params={"id": job_id, "cancel": "1"})
        return str(response.json().get("status", ""))

    # -- jobs ---------------------------------------------------------------------------------

    async def run(
        self,
        path: str,
        body: dict | list,
        *,
        wake: asyncio.Event | None = None,
        parts: dict[str, Part] | None = None,
    ) -> Any:
        """Submit, wait, fetch. Cancelling the awaiting task cancels the engine job too.
        ``wake``: see :meth:`wait`; ``parts``: see :meth:`submit`. Raises EngineUnreachable
        when the engine refused the connection (nothing was sent), JobFailed with the
        engine's reason otherwise."""
        since = self._log.mark() if self._log is not None else None
        posting = asyncio.ensure_future(self.submit(path, body, parts))
        try:
            job_id = await asyncio.shield(posting)
        except httpx.ConnectError as exc:
            raise EngineUnreachable(f"{type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            # sent, and the engine died while answering: its log says why
            self._marks[""] = since
            try:
                raise await self._engine_gone(exc, "", path, body) from None
            finally:
                self._marks.pop("", None)
        except asyncio.CancelledError:
            # the engine may queue the job all the same: cancel it once its id arrives
            try:
                job_id = await asyncio.wait_for(posting, 5.0)
            except BaseException:  # noqa: BLE001 - no id, nothing to cancel
                raise asyncio.CancelledError() from None
            await self._cancel_settled(job_id)
            raise
        self._marks[job_id] = since
        self._jobs[job_id] = (path, body)
        try:
            await self.wait(job_id, wake=wake)
            return await self.result(job_id, path)
        except httpx.TransportError as exc:
            raise await self._engine_gone(exc, job_id, path, body) from None
        except asyncio.CancelledError:
            await self._cancel_settled(job_id)
            raise
        finally:
            self._marks.pop(job_id, None)
            self._jobs.pop(job_id, None)

    async def lm(self, request: dict, *, wake: asyncio.Event | None = None) -> list[dict]:
        result = await self.run("/lm", request, wake=wake)
        if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
            raise EngineError(
                f"the engine's /lm result is not an array of requests: {json.dumps(result)[:200]}"
            )
        return result

    async def synth(
        self,
        body: dict | list,
        *,
        wake: asyncio.Event | None = None,
        parts: dict[str, Part] | None = None,
    ) -> list[Track]:
        result = await self.run("/synth", body, wake=wake, parts=parts)
        if not isinstance(result, list) or not all(isinstance(t, Track) for t in result):
            raise EngineError("the engine's /synth result is not audio")
        return result

    async def song(
        self,
        request: dict,
        *,
        on_stage: Callable[[str], None] | None = None,
        on_lm_result: Callable[[list[dict]], None] | None = None,
        wake: asyncio.Event | None = None,
        parts: dict[str, Part] | None = None,
    ) -> list[Track]:
        """A whole song. With lyrics: ``/lm`` (generate) then its array to ``/synth`` as it
        came. Instrumental: ``/synth`` alone, with the sentinel lyrics sent explicitly.
        ``on_lm_result`` hears the LM's array; ``wake`` ends each wait early (see
        :meth:`wait`). EngineUnreachable only when the song's first job could not be sent.

        ``parts`` (a source to edit, a reference sound: see :meth:`submit`) send ``/synth``
        as multipart, which takes one request: the LM's first one, its takes kept. Tasks
        that only re-render their source (cover, repaint, extend, extract) and songs whose
        audio codes are given skip the LM."""
        skip_lm = (
            is_instrumental(request.get("lyrics"))
            or bool(request.get("audio_codes"))
            or request.get("task_type") in ("cover", "cover-nofsq", "repaint", "extract")
        )
        if skip_lm:
            if on_stage:
                on_stage("synth")
            lyrics = INSTRUMENTAL if is_instrumental(request.get("lyrics")) else request["lyrics"]
            return await self.synth({**request, "lyrics": lyrics}, wake=wake, parts=parts)
        if on_stage:
            on_stage("lm")
        enriched = await self.lm({**request, "lm_mode": "generate"}, wake=wake)
        if on_lm_result:
            on_lm_result(enriched)
        if on_stage:
            on_stage("synth")
        body: dict | list = enriched
        if parts is not None:
            body = {**enriched[0], "synth_batch_size": request.get("synth_batch_size", 1)}
        try:
            return await self.synth(body, wake=wake, parts=parts)
        except EngineUnreachable as exc:
            # half a song is not "nothing sent": the engine died after the LM
            raise await self._engine_gone(exc, "", "/synth", enriched) from None

    async def understand(
        self,
        parts: dict[str, Part],
        request: dict | None = None,
        *,
        wake: asyncio.Event | None = None,
    ) -> tuple[dict, bytes | None]:
        """What the engine hears in audio (``audio`` or ``src_latents``): a request with
        caption, lyrics, bpm, keyscale, timesignature, duration, vocal_language; and the
        source's latent."""
        return await self.run("/understand", request or {}, wake=wake, parts=parts)

    async def encode(self, audio: Part, *, wake: asyncio.Event | None = None) -> bytes:
        """The VAE latent of ``audio`` (float32 [T, 64]): encoded once, sent as
        ``src_latents`` to every later job on the same source."""
        latent = await self.run("/vae", {}, wake=wake, parts={"audio": audio})
        if not isinstance(latent, (bytes, bytearray)) or len(latent) % LATENT_FRAME_BYTES:
            raise EngineError("the engine's /vae result is not a latent")
        return bytes(latent)

    # -- internals ----------------------------------------------------------------------------

    async def _body(self, method: str, url: str, **kwargs) -> tuple[httpx.Headers, bytes]:
        """An answer's headers and body, the body read here rather than kept on the response.

        httpx's Response and its stream refer to each other, so a response lives until the
        cyclic garbage collector runs, with any body read into it: a song's audio (34 MiB for
        two minutes) stayed in the node after the song, until some later collection
        (https://github.com/encode/httpx/pull/3733). Bytes read from the stream belong to
        the caller alone and go when it drops them."""
        async with self._http.stream(method, url, **kwargs) as response:
            if response.status_code >= 400:
                await response.aread()  # an error's few words, for the message
                raise EngineError(_error_message(response), response.status_code)
            return response.headers, b"".join([part async for part in response.aiter_bytes()])

    async def _request(self, method: str, url: str, **kwargs) -> httpx.Response:
        response = await self._http.request(method, url, **kwargs)
        if response.status_code >= 400:
            raise EngineError(_error_message(response), response.status_code)
        return response

    async def _engine_gone(
        self, exc: Exception, job_id: str | None, path: str = "", body: Any = None
    ) -> JobFailed:
        """The engine stopped answering mid-job: it died. Say why in its own words when its
        log has them; when it lost them (the real engine drops its last lines at an exit),
        say what is known: how it ended, the stage, the model files, its last line."""
        if not path and job_id in self._jobs:
            path, body = self._jobs[job_id]
        reason = None
        if self._log is not None:
            reason = await self._reason(job_id or "", wait=True, dying=True)
        if reason and _names_a_cause(reason):
            return JobFailed(f"engine stopped: {reason}")
        ended = reason or f"{type(exc).__name__}: {exc}".rstrip(": ")
        stage = {"/lm": "the LM stage", "/synth": "the synth stage"}.get(path, "a job")
        text = f"engine stopped: {ended}, during {stage}"
        files = _model_files(path, body)
        if files:
            text += f" ({files})"
        words = self._last_words(job_id or "")
        if words:
            text += f"; its last line: {words}"
        elif self._log is not None:
            text += "; it printed nothing for this job"
        if self._log is not None and "killed by signal" not in ended:
            text += " — it did not say why (the engine can lose its last lines when it exits)"
        return JobFailed(text)

    async def _dying(self, within: float = DYING_WITHIN) -> bool:
        """Does the engine stop answering within ``within`` seconds?"""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                await self._http.get("/health", timeout=0.3)
            except httpx.TransportError:
                return True
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
        return False

    def _last_words(self, job_id: str) -> str | None:
        if self._log is None:
            return None
        try:
            return self._log.last_words(job_id or None, self._marks.get(job_id))
        except Exception:  # noqa: BLE001 - a reason is best effort
            return None

    async def _cancel_quietly(self, job_id: str) -> None:
        """Best effort, and it survives the caller's own cancellation."""
        try:
            await asyncio.shield(asyncio.wait_for(self.cancel(job_id), 3.0))
        except (asyncio.CancelledError, asyncio.TimeoutError, httpx.HTTPError, EngineError):
            pass
        except Exception:  # noqa: BLE001 - never mask the caller's error
            log.exception("cancel of job %s failed", job_id)

    async def _cancel_settled(self, job_id: str) -> None:
        """Cancel the job and see it end: the engine's cancel lands at its next LM token,
        DiT step or VAE tile. A job still running after :attr:`cancel_grace` seconds is
        ended by ``on_stuck_cancel`` (the supervisor stops the engine). Survives the
        caller's own cancellation, which is why it is called."""

        async def settle() -> None:
            await self._cancel_quietly(job_id)
            deadline = time.monotonic() + self.cancel_grace
            while time.monotonic() < deadline:
                try:
                    if await self.status(job_id) != "running":
                        return
                except (httpx.HTTPError, EngineError):
                    return  # gone with its engine, or evicted: nothing runs it
                await asyncio.sleep(0.05)
            if self._on_stuck_cancel is not None:
                log.warning(
                    "the engine did not end cancelled job %s within %g s: stopping it",
                    job_id,
                    self.cancel_grace,
                )
                await self._on_stuck_cancel(job_id)

        try:
            await asyncio.shield(settle())
        except asyncio.CancelledError:
            pass  # the caller is being cancelled again (the node stops): it stops the engine
        except Exception:  # noqa: BLE001 - never mask the caller's cancellation
            log.exception("settling the cancel of job %s failed", job_id)

    async def _reason(self, job_id: str, *, wait: bool, dying: bool = False) -> str | None:
        """Why the job failed, from the engine's log (only lines since it was sent). The
        supervisor reads stderr a moment behind, so give it up to half a second to catch up."""
        if self._log is None:
            return await self._reason_from_logs(job_id)
        since = self._marks.get(job_id)
        deadline = time.monotonic() + (0.5 if wait else 0.0)
        while True:
            reason = self._log.failure_reason(job_id or None, since)
            # a dying engine's exit belongs in the reason too: wait for it as well
            settled = reason and _names_a_cause(reason) and (not dying or self._log.ended)
            if settled or time.monotonic() >= deadline:
                return reason
            await asyncio.sleep(0.05)

    async def _reason_from_logs(self, job_id: str, budget: float = 0.5) -> str | None:
        """Without a supervisor: the error lines the ``/logs`` replay shows after the job was
        created (read for at most ``budget`` seconds, since the stream never ends)."""
        from .progress import is_error_line

        errors: list[str] = []
        created = f"Job {job_id} created"

        async def read() -> None:
            async with self._http.stream("GET", "/logs") as response:
                if response.status_code != 200:
                    return
                async for raw in response.aiter_lines():
                    if raw.startswith("data:"):
                        text = raw[5:].strip()
                        if created in text:
                            errors.clear()
                        elif is_error_line(text):
                            errors.append(text)

        try:
            await asyncio.wait_for(read(), budget)
        except (asyncio.TimeoutError, httpx.HTTPError):
            pass
        return join_reasons(errors)
