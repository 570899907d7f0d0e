"""A song, as the node keeps it and every client sees it: one record, one JSON shape, one
set of states, one event vocabulary (no Qt, no server code).

The node's queue holds :class:`Song` records and sends :meth:`Song.to_json`; the app and the
CLI rebuild the same dataclass with :meth:`Song.from_json`, once, from the node's answer.
Live changes travel as :class:`SongEvent` (``queued``, ``stage``, ``progress``, ``done``,
``failed``, ``cancelled``, plus node-wide ``added`` and ``removed``): the node publishes
them, the SSE stream carries :meth:`SongEvent.to_sse`, a client reads them back with
:meth:`SongEvent.from_sse` and folds them in with :meth:`Song.apply`. A ``done`` event carries
the whole finished song, so nobody asks for it again.

Each finished song has one :class:`Take` per rendered variation (``batch``): its audio file
and sidecar on the node's machine, its seed, length and musical facts (tempo and key, with
where each came from).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from collections.abc import Mapping
from typing import Any
from . import take_check


class SongState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({SongState.DONE, SongState.FAILED, SongState.CANCELLED})
"""The states a song never leaves (but by a retry, which queues it again)."""


class Stage(StrEnum):
    LM = "lm"  # the language model writes the arrangement (songs with lyrics)
    SYNTH = "synth"  # the DiT renders the audio
    SAVING = "saving"  # the node encodes and writes the files


NODE_STOPPED = "node stopped"
TITLE_MAX = 200  # characters of a song's title, one line
SONG_ID = re.compile(r"[0-9a-f]{16}")


def check_song_id(song_id: Any) -> str:
    """A song id in the node's format (16 lower-case hex digits), else ValueError: an id is
    a name in URLs and cache files, never a path."""
    if not isinstance(song_id, str) or not SONG_ID.fullmatch(song_id):
        raise ValueError(f"not a song id: {str(song_id)[:40]!r}")
    return song_id


def safe_file_name(name: str, fallback: str = "") -> str:
    """A file name the node sent (its path may be another OS's) as a plain name in one of
    our folders: the last part only; nothing that could name a parent, a drive or a device
    (``..``, ``C:x``, NUL), else ``fallback``."""
    last = (name or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    if last in ("", ".", "..") or any(ch in last for ch in ":\x00") or last.endswith("."):
        return fallback
    return last


def _number(value: Any, kind: type) -> Any:
    cls = type(value)  # JSON's own types first: 10,000 songs read at once
    if cls is kind:
        return value
    if cls is bool or not isinstance(value, (int, float)):
        return None
    return kind(value)


@dataclass
class Take:
    """One rendered variation of a song: its files on the node's machine and its facts."""

    n: int  # 1-based
    audio: str  # path on the node's machine
    sidecar: str = ""
    format: str = ""
    seed: int | None = None
    duration: float | None = None
    sample_rate: int | None = None
    channels: int | None = None
    bytes: int | None = None
    bpm: float | None = None
    key: str | None = None
    time_signature: int | None = None
    facts_from: dict[str, str] = field(default_factory=dict)
    """Where each musical fact came from: ``"asked"``, ``"lm"``, ``"source"`` (an edit
    keeps its source's) or ``"measured"``."""
    check: dict[str, Any] = field(default_factory=dict)
    """What was asked or chosen beside what the take measures (:mod:`.take_check`)."""

    @property
    def file_name(self) -> str:
        return self.audio.replace("\\", "/").rsplit("/", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], n: int = 1) -> "Take":
        """A take from the node's JSON (also the first release's ``files`` entries, whose
        number was ``take``)."""
        if not isinstance(data, Mapping):
            raise ValueError("a take must be an object")
        audio = data.get("audio")
        if not isinstance(audio, str) or not audio:
            raise ValueError("a take needs its audio file")
        seed = _number(data.get("seed"), int)
        return cls(
            n=_number(data.get("n", data.get("take")), int) or n,
            audio=audio,
            sidecar=str(data.get("sidecar") or ""),
            format=str(data.get("format") or ""),
            seed=seed if seed is not None and seed >= 0 else None,
            duration=_number(data.get("duration"), float),
            sample_rate=_number(data.get("sample_rate"), int),
            channels=_number(data.get("channels"), int),
            bytes=_number(data.get("bytes"), int),
            bpm=_number(data.get("bpm"), float),
            key=data.get("key") if isinstance(data.get("key"), str) else None,
            time_signature=_number(data.get("time_signature"), int),
            facts_from={str(k): str(v) for k, v in (data.get("facts_from") or {}).items()}
            if isinstance(data.get("facts_from"), Mapping)
            else {},
            check=take_check.sanitised(data.get("check")),
        )


@dataclass
class Song:
    """One song request and everything that happened to it."""

    id: str
    request: dict[str, Any]
    state: SongState = SongState.QUEUED
    stage: Stage | None = None
    progress: float = 0.0  # 0..1, never goes back while running
    eta: float | None = None  # seconds left, when known
    error: str | None = None  # a failed song's reason, in the engine's words
    takes: list[Take] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None  # when it ended (a timestamp)
    engine: dict[str, Any] | None = None  # backend, version, model files that made it
    attempts: int = 0
    position: int | None = None  # place in the queue while queued (0 = next)
    title: str = ""  # the musician's name for it ("" = the caption)
    favourite: bool = False
    node: dict[str, Any] | None = None
    """In a pool: the member that made it, or makes it now (``id``, ``name``, and
    ``shared``: its takes are on the folder every member shares, else on that member)."""
    waiting: str | None = None  # in a pool: why no member takes this queued song now
    seq: int = 0  # submission order (the node's; not sent)

    PRIVATE = ("seq",)

    # -- what it is ------------------------------------------------------------------------
    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED

    @property
    def caption(self) -> str:
        return str(self.request.get("caption") or "")

    @property
    def name(self) -> str:
        """What a musician calls it: the title given, else the caption."""
        return self.title or self.caption

    @property
    def model(self) -> str:
        return str(self.request.get("model") or "")

    @property
    def path(self) -> str | None:
        """Take 1's audio on the node's machine."""
        return self.takes[0].audio if self.takes else None

    def take(self, n: int) -> Take | None:
        return next((t for t in self.takes if t.n == n), None)

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self, *, private: bool = False) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["takes"] = [t.to_json() for t in self.takes]
        data["state"] = str(self.state)
        data["stage"] = None if self.stage is None else str(self.stage)
        if not private:
            for name in self.PRIVATE:
                data.pop(name)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Song":
        """The record from the node's JSON (and from queue files of the first release, whose
        takes were called ``files``). Raises ValueError on what is not a song."""
        if not isinstance(data, Mapping):
            raise ValueError("a song must be an object")
        request = data.get("request")
        raw_takes = data.get("takes", data.get("files")) or []
        try:
            state = SongState(data.get("state") or SongState.QUEUED)
            stage = Stage(data["stage"]) if data.get("stage") else None
        except ValueError as exc:
            raise ValueError(f"song {data.get('id')!r}: {exc}") from None
        return cls(
            id=check_song_id(data.get("id")),
            request=dict(request) if isinstance(request, Mapping) else {},
            state=state,
            stage=stage,
            progress=float(_number(data.get("progress"), float) or 0.0),
            eta=_number(data.get("eta"), float),
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            takes=[Take.from_json(t, i + 1) for i, t in enumerate(raw_takes)],
            created=float(_number(data.get("created"), float) or 0.0),
            started=_number(data.get("started"), float),
            finished=_number(data.get("finished"), float),
            engine=dict(data["engine"]) if isinstance(data.get("engine"), Mapping) else None,
            attempts=int(_number(data.get("attempts"), int) or 0),
            position=_number(data.get("position"), int),
            title=str(data.get("title") or ""),
            favourite=bool(data.get("favourite")),
            node=dict(data["node"]) if isinstance(data.get("node"), Mapping) else None,
            waiting=data.get("waiting") if isinstance(data.get("waiting"), str) else None,
            seq=int(_number(data.get("seq"), int) or 0),
        )

    # -- change ----------------------------------------------------------------------------
    def apply(self, event: "SongEvent") -> None:
        """Fold one event of this song into the record (the client's copy)."""
        if event.kind == "queued":
            self.state, self.position = SongState.QUEUED, event.position
        elif event.kind == "stage":
            self.state, self.position = SongState.RUNNING, None
            if event.stage is not None and event.stage != self.stage:
                self.stage, self.progress = event.stage, max(self.progress, event.progress or 0.0)
        elif event.kind == "progress":
            self.state, self.position = SongState.RUNNING, None
            if event.stage is not None:
                self.stage = event.stage
            if event.progress is not None:
                self.progress = max(self.progress, event.progress)
            self.eta = event.eta
        elif event.kind in ("done", "failed", "cancelled", "changed") and event.song is not None:
            fresh = event.song
            for f in fields(self):
                setattr(self, f.name, getattr(fresh, f.name))
        elif event.kind == "done":
            self.state, self.progress, self.eta = SongState.DONE, 1.0, None
        elif event.kind == "failed":
            self.state, self.error, self.eta = SongState.FAILED, event.error or "failed", None
        elif event.kind == "cancelled":
            self.state, self.eta = SongState.CANCELLED, None


EVENT_KINDS = (
    "queued",
    "stage",
    "progress",
    "done",
    "failed",
    "cancelled",
    "added",
    "changed",
    "removed",
)
FINAL_EVENTS = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class SongEvent:
    """One change of one song, as the node publishes it and a client reads it.

    ``queued`` (position), ``stage`` (stage), ``progress`` (stage, progress, eta), ``done``,
    ``failed``, ``cancelled`` (the song as it ended); node-wide also ``added`` and
    ``changed`` (the whole song) and ``removed`` (its id only)."""

    kind: str
    song_id: str
    stage: Stage | None = None
    progress: float | None = None
    eta: float | None = None
    position: int | None = None
    error: str | None = None
    song: Song | None = None

    @property
    def is_final(self) -> bool:
        return self.kind in FINAL_EVENTS

    def to_sse(self) -> tuple[str, dict[str, Any]]:
        data: dict[str, Any] = {"id": self.song_id}
        if self.stage is not None or self.kind == "progress":
            data["stage"] = None if self.stage is None else str(self.stage)
        if self.progress is not None:
            data["progress"] = round(self.progress, 4)
        if self.kind == "progress":
            data["eta"] = None if self.eta is None else round(self.eta, 2)
        if self.position is not None:
            data["position"] = self.position
        if self.error is not None:
            data["error"] = self.error
        if self.song is not None:
            data["song"] = self.song.to_json()
        return self.kind, data

    @classmethod
    def from_sse(cls, kind: str, data: Any, song_id: str | None = None) -> "SongEvent":
        """The event from one SSE message; ValueError when it is not one of ours."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"not a song event: {kind!r}")
        data = data if isinstance(data, Mapping) else {}
        raw_song = data.get("song")
        song = Song.from_json(raw_song) if isinstance(raw_song, Mapping) else None
        sid = data.get("id") or (song.id if song else None) or song_id
        stage = data.get("stage")
        return cls(
            kind=kind,
            song_id=check_song_id(sid),
            stage=Stage(stage) if stage else None,
            progress=_number(data.get("progress"), float),
            eta=_number(data.get("eta"), float),
            position=_number(data.get("position"), int),
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            song=song,
        )
