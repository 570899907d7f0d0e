"""A pool of nodes on a real redis-server: songs per minute with 1, 2 and 3 members (goal: 3
members ≥ 2.7× one), the time a song spends in the pool against the embedded queue of a
node alone (goal: ≤ 50 ms more), and how long a song waits after kill -9 of the member
making it until another member runs it (the lease, ``pool.lease``, is the floor).

Every Sketch synth job takes a fixed time (``--synth`` seconds, the engines' steps paced:
``sketch-server --test-synth-seconds``) so the 2 cores of a small machine are not what is
measured; the members join one after another (1, then 2, then 3 members in one pool).

    .venv/bin/python bench/pool.py            # about 4 minutes
    .venv/bin/python bench/pool.py --quick    # fewer songs and one kill

``bench/run_all.py`` runs it as its ``pool`` group and reads the JSON it writes (``--json``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from common import add_json_option, write_json

from support.node import Node, write_config
from support.pool_nodes import TOKEN, PoolNode, all_finished, post, song
from support.redis_server import RedisServer, binary

SONG = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}


async def throughput(members: list[PoolNode], per_member: int) -> float:
    """Songs per minute: ``per_member`` songs per member posted at once, to every member."""
    count = per_member * len(members)
    t0 = time.monotonic()
    ids = [
        await post(members[k % len(members)], {**SONG, "caption": f"rate {count} {k}"})
        for k in range(count)
    ]
    found = await all_finished(members[0], ids, timeout=1200)
    spent = time.monotonic() - t0
    bad = [s["id"] for s in found.values() if s["state"] != "done"]
    if bad:
        raise SystemExit(f"songs not done: {bad}")
    return count / spent * 60


async def one_by_one(http_of, n: int) -> list[float]:
    """Seconds from POST to done of ``n`` songs, each posted when the last is done."""
    out = []
    for k in range(n):
        async with http_of() as h:
            t0 = time.monotonic()
            r = await h.post("/v1/songs", json={**SONG, "caption": f"alone {k}", "seed": k})
            song_id = r.json()["id"]
            while True:
                s = (await h.get(f"/v1/songs/{song_id}")).json()
                if s["state"] in ("done", "failed", "cancelled"):
                    break
                await asyncio.sleep(0.005)
            out.append(time.monotonic() - t0)
    return out


async def takeover(members: list[PoolNode]) -> float:
    """Seconds from kill -9 of the member running a song until another member runs it."""
    song_id = await post(members[0], {**SONG, "caption": "taken over"})
    while True:
        s = await song(members[0], song_id)
        if s["state"] == "running" and s.get("node") and s["progress"] > 0:
            break
        await asyncio.sleep(0.01)
    victim = next(m for m in members if m.name == s["node"]["name"])
    other = next(m for m in members if m is not victim)
    victim.kill9()
    t0 = time.monotonic()
    while True:
        s = await song(other, song_id)
        if s["state"] == "running" and s["node"]["name"] != victim.name:
            spent = time.monotonic() - t0
            break
        await asyncio.sleep(0.01)
    await all_finished(other, [song_id])
    await victim.restart()
    return spent


async def main(args) -> None:
    os.environ["CANTOR_TEST_SKETCH_SYNTH_S"] = str(args.synth)
    base = Path(tempfile.mkdtemp(prefix="cantor-bench-pool-"))
    redis = RedisServer(base / "redis").start()
    members: list[PoolNode] = []
    alone = None
    try:
        # the embedded queue: a node alone, with the same paced engine
        home = base / "alone"
        home.mkdir()
        write_config(home)
        alone = Node(home, token=TOKEN, env={"CANTOR_TEST_SKETCH_SYNTH_S": str(args.synth)})
        await alone.proc.start(timeout=120)
        embedded = await one_by_one(lambda: alone.http(timeout=60), args.alone)
        await alone.stop()
        alone = None

        rates = {}
        for n, name in enumerate(("alpha", "bravo", "charlie"), start=1):
            member = PoolNode(redis, base / name, name, lease=args.lease, synth_seconds=args.synth)
            await member.start()
            members.append(member)
            if n == 1:
                pooled = await one_by_one(member.http, args.alone)
            rates[n] = await throughput(members, args.per_member)
            print(f"{n} member(s): {rates[n]:.1f} songs/min", flush=True)
        kills = [await takeover(members) for _ in range(args.kills)]
    finally:
        for m in members:
            if m.node.proc.proc is not None and m.node.proc.proc.poll() is None:
                await m.stop()
        if alone is not None:
            await alone.stop()
        redis.stop()

    extra_ms = (statistics.median(pooled) - statistics.median(embedded)) * 1000
    print()
    print(f"synth job {args.synth:g} s, {args.per_member} songs per member, lease {args.lease} s")
    print(
        f"songs/min: 1 member {rates[1]:.1f}, 2 members {rates[2]:.1f} "
        f"({rates[2] / rates[1]:.2f}×), 3 members {rates[3]:.1f} "
        f"({rates[3] / rates[1]:.2f}×; goal ≥ 2.7×)"
    )
    print(
        f"POST → done, one song at a time: embedded queue median "
        f"{statistics.median(embedded) * 1000:.0f} ms, pool of one median "
        f"{statistics.median(pooled) * 1000:.0f} ms: {extra_ms:+.0f} ms in the pool "
        f"(goal ≤ 50 ms; n={len(embedded)} each)"
    )
    print(
        f"kill -9 → running on another member: median {statistics.median(kills):.2f} s "
        f"(lease {args.lease} s; {', '.join(f'{k:.2f}' for k in kills)})"
    )
    write_json(
        args.json,
        "pool",
        {
            "synth_s": args.synth,
            "per_member": args.per_member,
            "lease_s": args.lease,
            "songs_per_min": {str(n): rate for n, rate in rates.items()},
            "embedded_s": embedded,
            "pooled_s": pooled,
            "extra_ms": extra_ms,
            "takeover_s": kills,
        },
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--synth", type=float, default=6.0, help="seconds of every synth job")
    p.add_argument("--per-member", type=int, default=4, help="songs per member per rate run")
    p.add_argument("--alone", type=int, default=8, help="songs one at a time (pool overhead)")
    p.add_argument("--kills", type=int, default=3, help="kill -9 trials")
    p.add_argument("--lease", type=int, default=2, help="pool.lease of the members")
    p.add_argument("--quick", action="store_true", help="fewer songs and one kill")
    add_json_option(p)
    a = p.parse_args()
    if a.quick:
        a.per_member, a.alone, a.kills = 2, 4, 1
    if binary() is None:
        raise SystemExit("redis-server is not installed (scripts/bootstrap.sh installs it)")
    asyncio.run(main(a))
