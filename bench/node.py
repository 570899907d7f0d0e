"""The node's cost: overhead per song, progress latency, idle memory.

1. Overhead per song: the same song request (a) sent through the node (POST /v1/songs, then
   its SSE events until ``done``, file written and queue saved), (b) sent straight to a
   sketch engine with the engine client (submit, poll with its 50 ms → 1 s back-off, fetch)
   and (c) straight, polling every 10 ms (the best a bare client can do). Rotated in one run;
   all are the real sketch engine. The node learns "done" from the engine's log line, so (c)
   is the fair baseline. Goal: node − direct ≤ 50 ms (Lemonade's one-second poll costs up
   to 1000 ms).
2. Progress latency: the engine's log line (read from its own ``/logs`` stream) → the SSE
   progress event for it at a node client, p95. Goal ≤ 100 ms.
3. Node idle RSS (VmRSS) fresh, and idle after songs. Goal ≤ 80 MB.

    .venv/bin/python bench/node.py [--songs 10] [--duration 10]
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

OVERHEAD_GOAL_MS = 50.0
LATENCY_GOAL_MS = 100.0
RSS_GOAL_MB = 80.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


async def through_node(client, request: dict) -> float:
    t0 = time.perf_counter()
    sid = await client.submit_song(request)
    async for event, _data in client.events(sid):
        if event in ("done", "failed", "cancelled"):
            if event != "done":
                raise RuntimeError(f"song {event}: {_data}")
            break
    return time.perf_counter() - t0


async def straight(engine, request: dict) -> float:
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song_request import validate

    body = engine_request(validate(request), synth_model="sketch-dit.gguf",
                          lm_model="sketch-lm.gguf", output_format=request["format"])
    t0 = time.perf_counter()
    tracks = await engine.song(body)
    assert tracks and tracks[0].audio[:4] == b"RIFF"
    return time.perf_counter() - t0


async def straight_tight(engine, request: dict) -> float:
    """The best a client of the bare engine can do: poll /job every 10 ms (no back-off)."""
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song_request import validate

    body = engine_request(validate(request), synth_model="sketch-dit.gguf",
                          lm_model="sketch-lm.gguf", output_format=request["format"])
    t0 = time.perf_counter()
    job = await engine.submit("/synth", body)
    while await engine.status(job) != "done":
        await asyncio.sleep(0.01)
    tracks = await engine.result(job)
    assert tracks and tracks[0].audio[:4] == b"RIFF"
    return time.perf_counter() - t0


async def progress_latency(client, engine_url: str, request: dict, songs: int) -> list[float]:
    """Match each ``[DiT] Step k/n`` line seen on the engine's /logs with the node's progress
    event for the same step (the value the node derives from it)."""
    import httpx

    from cantor_desktop.engine.progress import ProgressParser
    from cantor_desktop.node.runner import SAVING_FROM
    from cantor_desktop.nodeclient import parse_sse

    latencies: list[float] = []
    for _ in range(songs):
        line_times: dict[float, float] = {}      # expected node progress → time line seen
        event_times: dict[float, float] = {}
        parser = ProgressParser()
        ready = asyncio.Event()

        async def read_logs():
            async with httpx.AsyncClient(timeout=None) as http:
                async with http.stream("GET", engine_url + "/logs") as response:
                    replaying = True
                    async for event, data in parse_sse(response.aiter_lines()):
                        if replaying and not ready.is_set():
                            ready.set()
                        line = data if isinstance(data, str) else str(data)
                        ev = parser.feed(line)
                        if line.startswith("[DiT] Step") and ev is not None:
                            key = round(min(ev.fraction, 1.0) * SAVING_FROM, 4)
                            line_times.setdefault(key, time.perf_counter())
                        if "done (" in line and line.startswith("[Server] Job"):
                            replaying = False

        logs = asyncio.create_task(read_logs())
        await asyncio.wait_for(ready.wait(), 5)
        await asyncio.sleep(0.2)                 # let the replay of old lines pass
        line_times.clear()
        sid = await client.submit_song(request)
        async for event, data in client.events(sid):
            if event == "progress" and data.get("stage") == "synth":
                event_times.setdefault(round(data["progress"], 4), time.perf_counter())
            if event in ("done", "failed", "cancelled"):
                break
        logs.cancel()
        for key, t_line in line_times.items():
            t_event = event_times.get(key)
            if t_event is not None:
                latencies.append(max(t_event - t_line, 0.0))
    return latencies


async def main_async(args) -> int:
    from cantor_desktop.engine.supervisor import EngineSupervisor
    from cantor_desktop.node.launcher import NodeProcess
    from cantor_desktop.nodeclient import NodeClient
    from cantor_desktop.selfexec import self_argv
    from cantor_desktop.sketch import ensure_sketch_models

    home = Path(tempfile.mkdtemp(prefix="cantor-bench-node-"))
    os.environ["CANTOR_HOME"] = str(home)
    (home / "node.toml").write_text(f'[models]\ndefault = "sketch"\n[songs]\ndir = "{home / "songs"}"\n'
                                    f'format = "wav16"\n')
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = NodeProcess("127.0.0.1", port, env={"CANTOR_HOME": str(home)})
    t0 = time.perf_counter()
    await node.start()
    ready_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    idle_fresh = rss_mb(node.pid)

    direct_dir = home / "direct-models"
    ensure_sketch_models(direct_dir)
    sup = EngineSupervisor("sketch", self_argv("sketch-server"), {}, direct_dir,
                           log_path=home / "logs" / "direct-engine.log")
    await sup.start()
    engine = sup.client()
    request = {"caption": "bench lofi piano", "duration": args.duration, "seed": 11,
               "model": "sketch", "format": "wav16", "lyrics": "[Instrumental]"}
    try:
        async with NodeClient(node.url) as client:
            # warm both paths (engine start, imports, first-job costs)
            await through_node(client, request)
            await straight(engine, request)
            await straight_tight(engine, request)
            node_t, direct_t, tight_t = [], [], []
            for i in range(args.songs):
                order = [(0, 1, 2), (1, 2, 0), (2, 0, 1)][i % 3]
                for which in order:
                    if which == 0:
                        node_t.append(await through_node(client, request))
                    elif which == 1:
                        direct_t.append(await straight(engine, request))
                    else:
                        tight_t.append(await straight_tight(engine, request))
            diffs = [(a - b) * 1000 for a, b in zip(node_t, direct_t)]
            tight_diffs = [(a - b) * 1000 for a, b in zip(node_t, tight_t)]

            system = await client.system()
            engine_url = next(e["url"] for e in system["loaded"] if e["engine"] == "sketch")
            lat = [x * 1000 for x in await progress_latency(client, engine_url, request,
                                                             args.latency_songs)]
            await asyncio.sleep(1.0)
            idle_after = rss_mb(node.pid)
    finally:
        await engine.aclose()
        await sup.aclose()
        await node.stop()

    med_node, med_direct = statistics.median(node_t), statistics.median(direct_t)
    overhead = statistics.median(diffs)
    print(f"node ready in {ready_s * 1000:.0f} ms")
    print(f"overhead per song ({args.songs} rotated rounds, {args.duration:g}-s instrumental, sketch):")
    print(f"  direct to engine (baseline): median {med_direct * 1000:.0f} ms")
    print(f"  through the node           : median {med_node * 1000:.0f} ms "
          f"(ratio {med_node / med_direct:.3f})")
    tight = statistics.median(tight_diffs)
    print(f"  direct, polling every 10 ms: median {statistics.median(tight_t) * 1000:.0f} ms")
    print(f"  node − direct (tight polling), median of triples: {tight:+.1f} ms "
          f"(mean {statistics.mean(tight_diffs):+.1f})  goal ≤ {OVERHEAD_GOAL_MS:.0f} ms  "
          f"{'OK' if tight <= OVERHEAD_GOAL_MS else 'MISSED'}")
    print(f"  node − direct (engine client), median of pairs: {overhead:+.1f} ms "
          f"(mean {statistics.mean(diffs):+.1f}, min {min(diffs):+.1f}, max {max(diffs):+.1f})"
          f"  goal ≤ {OVERHEAD_GOAL_MS:.0f} ms  {'OK' if overhead <= OVERHEAD_GOAL_MS else 'MISSED'}")
    if lat:
        print(f"progress latency, engine log line → node SSE event ({len(lat)} events): "
              f"median {statistics.median(lat):.1f} ms, p95 {p95(lat):.1f} ms, max {max(lat):.1f} ms"
              f"  goal p95 ≤ {LATENCY_GOAL_MS:.0f} ms  {'OK' if p95(lat) <= LATENCY_GOAL_MS else 'MISSED'}"
              f"  (baseline: Lemonade's 1000 ms poll → ratio {p95(lat) / 1000:.3f})")
    else:
        print("progress latency: no matched events")
    print(f"node idle RSS: fresh {idle_fresh:.1f} MB, after {args.songs * 1 + 1 + args.latency_songs} "
          f"songs {idle_after:.1f} MB  goal ≤ {RSS_GOAL_MB:.0f} MB  "
          f"{'OK' if max(idle_fresh, idle_after) <= RSS_GOAL_MB else 'MISSED'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--songs", type=int, default=10, help="rounds of node / direct / direct-tight songs")
    ap.add_argument("--latency-songs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
