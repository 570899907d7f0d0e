"""What a member believes of what it reads from a pool's Redis: nothing unchecked.

Anyone who can write to the pool's Redis can write any record, any member report and any
event, so each is checked here before a node folds it in, with the rules an HTTP request
meets (:func:`cantor_desktop.song.request.validate` for a song's request, the same batch,
sizes and types) and caps on its size and counts. What fails is refused as one entry: the
reader, the heartbeat and the dispatcher go on with the rest, and :class:`Refusals` counts
it, with the reason, for ``GET /v1/pool``, ``cantor pool status`` and the app.

- :func:`song_record` — a song's hash (``HGETALL``) → the song, its lane, its holder;
- :func:`song_json` — a song as an event carries it;
- :func:`member_report` — a member's heartbeat report, cleaned to the fields Cantor reads;
- :func:`event` — one entry of the events stream.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..song.record import EVENT_KINDS, TITLE_MAX, Song, check_song_id
from ..song.request import BATCH_RANGE, RequestError, validate
from . import redis_keys

MAX_RECORD_BYTES = 128 * 1024
"""A song's whole hash: its request at the longest (20,000 characters of lyrics, 4 bytes
each at worst) with its takes and engine facts fits with room to spare."""
MAX_EVENT_BYTES = MAX_RECORD_BYTES + 1024
MAX_REPORT_BYTES = 64 * 1024
MAX_PATH = 4096
MAX_TEXT = 16 * 1024  # an error in the engine's words
MAX_NAME = 64
MAX_MODELS = 256
MAX_ENGINES = 16
MAX_ATTEMPTS = 1000
NODE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Refused(ValueError):
    """An entry read from Redis that Cantor does not use; the message says why."""


def _text(name: str, value: Any, most: int, *, empty: bool = True, line: bool = False) -> str:
    if not isinstance(value, str):
        raise Refused(f"{name}: must be text, not {type(value).__name__}")
    if len(value) > most:
        raise Refused(f"{name}: {len(value)} characters (at most {most})")
    if not empty and not value:
        raise Refused(f"{name}: is empty")
    if line and CONTROL.search(value):
        raise Refused(f"{name}: has control characters")
    return value


def number(name: str, value: Any, lo: float, hi: float, *, optional: bool = True) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"{name}: must be a number")
    if not lo <= value <= hi:
        raise Refused(f"{name}: {value} is out of range ({lo:g} to {hi:g})")
    return value


def node_id(value: Any) -> str:
    if not isinstance(value, str) or not NODE_ID.fullmatch(value):
        raise Refused(f"node id: {str(value)[:40]!r} is not a member's id")
    return value


def lane(value: Any) -> str:
    """A lane's key: one of a model's or of a member's."""
    text = _text("lane", value, 512, line=True)
    if text.startswith(redis_keys.LANE_MODEL):
        _text("lane", text[len(redis_keys.LANE_MODEL) :], 200, empty=False)
    elif text.startswith(redis_keys.LANE_NODE):
        node_id(text[len(redis_keys.LANE_NODE) :])
    else:
        raise Refused(f"lane: {text[:80]!r} is not a lane of the pool")
    return text


def _maker(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Refused("node: must be an object")
    out: dict[str, Any] = {
        "id": node_id(value.get("id")),
        "name": _text("node.name", value.get("name"), MAX_NAME),
    }
    shared = value.get("shared", False)
    if not isinstance(shared, bool):
        raise Refused("node.shared: must be true or false")
    out["shared"] = shared
    return out


def _takes(value: Any) -> None:
    if not isinstance(value, list):
        raise Refused("takes: must be a list")
    if len(value) > BATCH_RANGE[1]:
        raise Refused(f"takes: {len(value)} of them (a song has at most {BATCH_RANGE[1]})")
    for i, take in enumerate(value, 1):
        if not isinstance(take, Mapping):
            raise Refused(f"take {i}: must be an object")
        _text(f"take {i}.audio", take.get("audio"), MAX_PATH, empty=False, line=True)
        if take.get("sidecar") is not None:
            _text(f"take {i}.sidecar", take.get("sidecar"), MAX_PATH, line=True)
        for name in ("format", "key"):
            if take.get(name) is not None:
                _text(f"take {i}.{name}", take.get(name), 64, line=True)
        for name in ("facts_from", "check"):
            small = take.get(name)
            if small is not None and (not isinstance(small, Mapping) or len(small) > 16):
                raise Refused(f"take {i}.{name}: must be a small object")


def song_json(data: Any, song_id: str | None = None) -> Song:
    """A song as a record or an event carries it, checked; :class:`Refused` naming why."""
    if not isinstance(data, Mapping):
        raise Refused("a song must be an object")
    if song_id is not None and data.get("id") != song_id:
        raise Refused(f"the record of song {song_id} names another id")
    request = data.get("request")
    try:
        validate(request if isinstance(request, Mapping) else {})
    except RequestError as exc:
        raise Refused(f"request: {exc}") from None
    if not isinstance(request, Mapping) or not isinstance(request.get("model"), str):
        raise Refused("request.model: must be a model name")
    _takes(data.get("takes") if data.get("takes") is not None else [])
    if data.get("title") is not None:
        _text("title", data.get("title"), TITLE_MAX, line=True)
    if data.get("error") is not None:
        _text("error", data.get("error"), MAX_TEXT)
    if data.get("waiting") is not None:
        _text("waiting", data.get("waiting"), MAX_TEXT)
    number("attempts", data.get("attempts"), 0, MAX_ATTEMPTS)
    number("progress", data.get("progress"), 0.0, 1.0)
    for name in ("created", "started", "finished", "eta"):
        number(name, data.get(name), 0.0, 1e12)
    number("seq", data.get("seq"), 0, 2**53)
    engine = data.get("engine")
    if engine is not None and (
        not isinstance(engine, Mapping) or len(json.dumps(engine)) > MAX_TEXT
    ):
        raise Refused("engine: must be a small object")
    maker = _maker(data.get("node"))
    try:
        song = Song.from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Refused(str(exc)) from None
    song.node = maker
    return song


def song_record(found: Mapping[str, str], song_id: str) -> tuple[Song, str, str]:
    """A song's hash as Redis keeps it → (song, its lane, the member holding it or "")."""
    size = sum(len(k) + len(v) for k, v in found.items())
    if size > MAX_RECORD_BYTES:
        raise Refused(f"the record is {size} bytes (at most {MAX_RECORD_BYTES})")
    data: dict[str, Any] = {}
    for name, value in found.items():
        if name.startswith("_"):
            continue
        try:
            data[name] = json.loads(value)
        except ValueError:
            raise Refused(f"{name}: not JSON") from None
    song = song_json(data, song_id)
    lane_key = found.get("_lane", "")
    owner = found.get("_owner", "")
    if lane_key:
        lane(lane_key)
    if owner:
        node_id(owner)
    return song, lane_key, owner


def member_report(member: str, text: Any) -> dict[str, Any]:
    """A member's heartbeat report (JSON text) → the fields Cantor reads, each checked."""
    node_id(member)
    if not isinstance(text, str) or len(text) > MAX_REPORT_BYTES:
        raise Refused(f"the report is larger than {MAX_REPORT_BYTES} bytes")
    try:
        data = json.loads(text)
    except ValueError:
        raise Refused("the report is not JSON") from None
    if not isinstance(data, dict):
        raise Refused("the report must be an object")
    out: dict[str, Any] = {
        "id": node_id(data.get("id", member)),
        "name": _text("name", data.get("name"), MAX_NAME, empty=False, line=True),
        "url": member_url(data.get("url")),
    }
    if out["id"] != member:
        raise Refused(f"the report of {member} names another member")
    shared = data.get("shared", False)
    if not isinstance(shared, bool):
        raise Refused("shared: must be true or false")
    out["shared"] = shared
    models = data.get("models") or []
    if not isinstance(models, list) or len(models) > MAX_MODELS:
        raise Refused(f"models: must be a list of at most {MAX_MODELS} names")
    out["models"] = [_text("models", m, 200, empty=False, line=True) for m in models]
    backends = data.get("backends") or {}
    if not isinstance(backends, dict) or len(backends) > MAX_MODELS:
        raise Refused("backends: must be an object of engine → backend")
    out["backends"] = {
        _text("backends", k, 200, line=True): _text("backends", v, 64, line=True)
        for k, v in backends.items()
    }
    engines = data.get("engines") or []
    if not isinstance(engines, list) or len(engines) > MAX_ENGINES:
        raise Refused(f"engines: must be a list of at most {MAX_ENGINES}")
    out["engines"] = [_engine(e) for e in engines]
    running = data.get("running") or []
    if not isinstance(running, list) or len(running) > 64:
        raise Refused("running: must be a list of song ids")
    try:
        out["running"] = [check_song_id(s) for s in running]
    except ValueError as exc:
        raise Refused(f"running: {exc}") from None
    for name in ("lease", "started", "seen"):
        out[name] = number(name, data.get(name), 0.0, 1e12)
    if data.get("version") is not None:
        out["version"] = _text("version", data.get("version"), 64, line=True)
    return out


def _engine(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refused("engines: each must be an object")
    out: dict[str, Any] = {}
    for name in ("engine", "backend", "version", "model", "song"):
        if value.get(name) is not None:
            out[name] = _text(f"engines.{name}", value[name], 200, line=True)
    running = value.get("running", False)
    if not isinstance(running, bool):
        raise Refused("engines.running: must be true or false")
    out["running"] = running
    return out


def member_url(value: Any) -> str:
    """Where a member says it is reached: ``http(s)://HOST:PORT``, nothing more."""
    text = _text("url", value, 2048, empty=False, line=True)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise Refused(f"url: {text[:80]!r} is not an address") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise Refused(f"url: {text[:80]!r} is not http(s)://HOST:PORT")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise Refused(f"url: {text[:80]!r} carries more than a host and a port")
    if parts.path not in ("", "/"):
        raise Refused(f"url: {text[:80]!r} has a path")
    return text


@dataclass(frozen=True)
class Event:
    """One entry of the events stream, checked."""

    kind: str
    origin: str
    song_id: str
    lane: str | None
    data: dict[str, Any]  # as the entry carries it (``id``, ``lane``, ``song``, progress …)
    song: Song | None  # the whole song, when the entry carries one


def event(entry_id: Any, fields: Any) -> Event:
    """An entry of ``cantor:events`` (``k`` kind, ``o`` origin, ``d`` JSON) → an Event."""
    if not isinstance(entry_id, str) or not ENTRY_ID.fullmatch(entry_id):
        raise Refused(f"event id {str(entry_id)[:40]!r}")
    if not isinstance(fields, Mapping):
        raise Refused("the event is not a set of fields")
    kind = fields.get("k")
    if kind not in EVENT_KINDS:
        raise Refused(f"kind {str(kind)[:40]!r} is not an event of a song")
    origin = node_id(fields.get("o"))
    body = fields.get("d")
    if not isinstance(body, str) or len(body) > MAX_EVENT_BYTES:
        raise Refused(f"the event's data is missing or larger than {MAX_EVENT_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise Refused("the event's data is not JSON") from None
    if not isinstance(data, dict):
        raise Refused("the event's data must be an object")
    try:
        song_id = check_song_id(data.get("id"))
    except ValueError as exc:
        raise Refused(str(exc)) from None
    lane_key = lane(data["lane"]) if data.get("lane") else None
    for name in ("progress", "eta", "position"):
        number(name, data.get(name), 0.0, 1e12)
    if data.get("error") is not None:
        _text("error", data.get("error"), MAX_TEXT)
    if data.get("stage") is not None:
        _text("stage", data.get("stage"), 16)
    song = song_json(data["song"], song_id) if data.get("song") is not None else None
    return Event(str(kind), origin, song_id, lane_key, data, song)


@dataclass
class Refusal:
    kind: str  # "song", "member", "event", "entry" (a lane or a lane's entry)
    key: str  # the song's id, the member's id, the event's id, the lane or entry
    reason: str


PLURAL = {"song": "songs", "member": "members", "event": "events", "entry": "entries"}


class Refusals:
    """What was refused from Redis, one entry per kind and key (a record read again is
    not counted twice), the newest kept first; counted even past :data:`KEPT`."""

    KEPT = 200

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Refusal] = {}
        self.counts: dict[str, int] = {"song": 0, "member": 0, "event": 0, "entry": 0}

    def add(self, kind: str, key: str, reason: str) -> bool:
        """Count one refusal; True when this entry is new (worth a line in the log)."""
        if (kind, key) in self._seen:
            return False
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self._seen) < self.KEPT:
            self._seen[(kind, key)] = Refusal(kind, key[:80], reason[:300])
        return True

    def reason(self, kind: str, key: str) -> str | None:
        found = self._seen.get((kind, key))
        return found.reason if found is not None else None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self, most: int = 10) -> dict[str, Any]:
        newest = list(self._seen.values())[-most:][::-1]
        return {
            **{PLURAL[k]: n for k, n in self.counts.items()},
            "latest": [{"kind": r.kind, "key": r.key, "reason": r.reason} for r in newest],
        }
