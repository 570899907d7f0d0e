"""A pool's state as people read it, straight from Redis: its members (alive or gone, what
each can make and is making), its lanes (songs waiting, songs taken and by whom) and its
songs by state. ``GET /v1/pool`` answers with it and ``cantor pool status`` prints it."""

from __future__ import annotations

import json
import time
from typing import Any

from ..song.record import SongState
from . import redis_keys, records

STATES = frozenset(str(s) for s in SongState)


async def gather(r, songs: bool = True, refusals: records.Refusals | None = None) -> dict[str, Any]:
    """The pool's state; ``songs=False`` leaves out the songs by state (reading them is a
    look at every song's record: what an app polling the members does without). Members'
    reports and songs' records are checked (:mod:`.records`): what is refused is counted
    in ``refusals`` (a new count when none is given) and left out."""
    refusals = refusals if refusals is not None else records.Refusals()
    found = await r.hgetall(redis_keys.MEMBERS)
    reports = {}
    for node_id in sorted(found):
        try:
            reports[node_id] = records.member_report(node_id, found[node_id])
        except records.Refused as exc:
            refusals.add("member", str(node_id), str(exc))
    ids = list(reports)
    flags = await r.mget([redis_keys.alive(i) for i in ids]) if ids else []
    members = []
    for node_id, flag in zip(ids, flags):
        members.append({**reports[node_id], "id": node_id, "alive": bool(flag)})

    lanes = []
    for lane in sorted(await r.smembers(redis_keys.LANES)):
        try:
            records.lane(lane)
        except records.Refused as exc:
            refusals.add("entry", str(lane)[:80], str(exc))
            continue
        try:
            length = await r.xlen(lane)
            groups = await r.xinfo_groups(lane)
        except Exception:
            continue
        group: dict[str, Any] = next((g for g in groups if g.get("name") == redis_keys.GROUP), {})
        claimed: dict[str, int] = {}
        if group.get("pending"):
            summary = await r.xpending(lane, redis_keys.GROUP)
            for consumer in summary.get("consumers") or ():
                claimed[consumer["name"]] = int(consumer["pending"])
        waiting = group.get("lag")
        if waiting is None:
            waiting = max(0, length - int(group.get("pending") or 0))
        lanes.append(
            {
                "lane": lane,
                "label": redis_keys.lane_label(lane),
                "entries": length,
                "waiting": int(waiting or 0),
                "claimed": claimed,
            }
        )

    out: dict[str, Any] = {"members": members, "lanes": lanes, "at": time.time()}
    if not songs:
        out["refused_entries"] = refusals.describe()
        return out
    ids = await r.zrange(redis_keys.ORDER, 0, -1)
    pipe = r.pipeline(transaction=False)
    for song_id in ids:
        pipe.hmget(redis_keys.song(song_id), "state", "_owner", "attempts", "_lane")
    counts: dict[str, int] = {}
    taken: list[dict[str, Any]] = []
    for song_id, (state, owner, attempts, lane) in zip(ids, await pipe.execute()):
        if state is None:
            continue
        try:
            state = json.loads(state)
            if state not in STATES:
                raise records.Refused(f"state: {str(state)[:40]!r} is not a song's state")
            owner = records.node_id(owner) if owner else ""
            attempts = records.number("attempts", int(attempts or 0), 0, records.MAX_ATTEMPTS)
            lane = records.lane(lane) if lane else ""
        except (ValueError, TypeError) as exc:  # records.Refused is a ValueError
            refusals.add("song", str(song_id), str(exc))
            continue
        counts[state] = counts.get(state, 0) + 1
        if state == "running":
            taken.append(
                {
                    "id": song_id,
                    "node": owner,
                    "attempt": int(attempts or 0),
                    "lane": redis_keys.lane_label(lane or ""),
                }
            )
    return {**out, "songs": counts, "running": taken, "refused_entries": refusals.describe()}
