"""The node's cost: overhead per song, progress latency, idle memory.

1. Overhead per song: the same song request (a) sent through the node (POST /v1/songs, then
   its SSE events until ``done``, file written and queue saved), (b) sent straight to a
   sketch engine with the engine client (submit, poll with its 50 ms → 1 s back-off, fetch)
   and (c) straight, polling every 10 ms (the best a bare client can do). Rotated in one run;
   all are the real sketch engine. The node learns "done" from the engine's log line, so (c)
   is the fair baseline. Goal: node − direct ≤ 50 ms (Lemonade's one-second poll costs up
   to 1000 ms).
   Every song counts only with its file checked: the node's take (and the direct path's
   audio) decodes to the asked duration and is not silent.
2. Progress latency: each ``[DiT] Step`` line of the song's own engine job, as a client of
   the engine's ``/logs`` stream reads it → the node's SSE progress event for that step at
   a node client, p95, signed (an event that arrives first is a negative figure, not 0).
   Baseline, measured in the same run: a second client of the engine's ``/logs`` reading
   the same lines (what relaying a line costs with no node at all). A step line with no
   matching progress event is a lost event: it is counted, and any loss fails the figure.
   Goal ≤ 100 ms.
3. Node idle RSS (VmRSS) fresh, and idle after songs. Goal ≤ 80 MB.

    .venv/bin/python bench/node.py [--songs 10] [--duration 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import (
    add_json_option,
    direct_sketch_engine,
    follow_new_song,
    free_port,
    sketch_home,  # noqa: E402
    song_to_the_end,
    write_json,
)

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


def audio_problem(audio, seconds: float) -> str | None:
    """Why audio (a path or WAV bytes) is not the song asked for; None when it is."""
    import io

    import numpy as np
    import soundfile as sf

    try:
        data, rate = sf.read(
            io.BytesIO(audio) if isinstance(audio, bytes) else audio, dtype="float32"
        )
    except (RuntimeError, OSError) as exc:
        return f"not audio: {exc}"
    if abs(len(data) / rate - seconds) > 0.5:
        return f"{len(data) / rate:.1f} s, not {seconds:g} s"
    if not np.any(np.abs(data) > 1e-3):
        return "silent"
    return None


async def through_node(client, request: dict) -> tuple[float, str | None]:
    """Seconds from POST to the SSE ``done``; then (not timed) the take's file checked."""
    t0 = time.perf_counter()
    sid, event, data = await song_to_the_end(client, request)
    if event != "done":
        raise RuntimeError(f"song {event}: {data}")
    took = time.perf_counter() - t0
    song = await client.song(sid)
    return took, audio_problem(song["takes"][0]["audio"], request["duration"])


async def straight(engine, request: dict) -> tuple[float, str | None]:
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song.request import validate

    body = engine_request(
        validate(request),
        synth_model="sketch-dit.gguf",
        lm_model="sketch-lm.gguf",
        output_format=request["format"],
    )
    t0 = time.perf_counter()
    tracks = await engine.song(body)
    assert tracks and tracks[0].audio[:4] == b"RIFF"
    took = time.perf_counter() - t0
    return took, audio_problem(tracks[0].audio, request["duration"])


async def straight_tight(engine, request: dict) -> tuple[float, str | None]:
    """The best a client of the bare engine can do: poll /job every 10 ms (no back-off)."""
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song.request import validate

    body = engine_request(
        validate(request),
        synth_model="sketch-dit.gguf",
        lm_model="sketch-lm.gguf",
        output_format=request["format"],
    )
    t0 = time.perf_counter()
    job = await engine.submit("/synth", body)
    while await engine.status(job) != "done":
        await asyncio.sleep(0.01)
    tracks = await engine.result(job)
    assert tracks and tracks[0].audio[:4] == b"RIFF"
    took = time.perf_counter() - t0
    return took, audio_problem(tracks[0].audio, request["duration"])


class LogReader:
    """A client of the engine's ``/logs`` stream: when each step line of each job arrived."""

    def __init__(self, engine_url: str):
        self.url = engine_url + "/logs"
        self.steps: dict[tuple[str | None, float], float] = {}  # (job, node progress) → t
        self.jobs: list[str] = []  # in "created" order
        self.done: set[str] = set()
        self.connected = asyncio.Event()
        self.last_line = self.connected_at = 0.0
        self.task: asyncio.Task | None = None

    async def replayed(self, quiet: float = 0.3) -> None:
        """Connected, and the replay of older lines over (/logs marks no end to it: the
        engine is idle between songs, so the replay is over when the lines stop)."""
        await self.connected.wait()
        while time.perf_counter() - max(self.last_line, self.connected_at) < quiet:
            await asyncio.sleep(quiet / 3)

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _read(self) -> None:
        import httpx

        from cantor_desktop.engine.progress import ProgressParser
        from cantor_desktop.node.song_progress import SAVING_FROM
        from cantor_desktop.client.nodeclient import parse_sse

        parser = ProgressParser()
        async with httpx.AsyncClient(timeout=None, trust_env=False) as http:
            async with http.stream("GET", self.url) as response:
                self.connected_at = time.perf_counter()
                self.connected.set()
                async for _event, data in parse_sse(response.aiter_lines()):
                    now = self.last_line = time.perf_counter()
                    line = data if isinstance(data, str) else str(data)
                    ev = parser.feed(line)
                    if line.startswith("[Server] Job ") and " created" in line:
                        self.jobs.append(line.split()[2])
                    if line.startswith("[Server] Job ") and " done" in line:
                        self.done.add(line.split()[2])
                    if line.startswith("[DiT] Step") and ev is not None:
                        key = (ev.job_id, round(min(ev.fraction, 1.0) * SAVING_FROM, 4))
                        self.steps.setdefault(key, now)


async def progress_latency(client, engine_url: str, request: dict, songs: int) -> dict:
    """Each step line of the song's own engine job (older jobs replayed by /logs have other
    ids) → the node's progress event for it; and the same line at a second log client."""
    latencies: list[float] = []
    baseline: list[float] = []
    steps = lost = 0
    for _ in range(songs):
        readers = [LogReader(engine_url), LogReader(engine_url)]
        for r in readers:
            r.start()
        await asyncio.wait_for(asyncio.gather(*(r.replayed() for r in readers)), 30)
        known = set(readers[0].jobs)  # the replayed jobs: none of them the song's
        events: dict[float, float] = {}
        # listening before the song is queued: its first step cannot pass unseen
        async for event, data in follow_new_song(client, request):
            if event == "progress" and data.get("stage") == "synth":
                events.setdefault(round(data["progress"], 4), time.perf_counter())
        ours = [j for j in readers[0].jobs if j not in known]
        if len(ours) != 1:
            raise RuntimeError(f"expected one new engine job for the song, saw {ours}")
        # both log clients have read to the job's own "done" line
        deadline = time.monotonic() + 30
        while not all(ours[0] in r.done for r in readers) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for r in readers:
            await r.stop()
        a, b = readers
        for (job, key), t_line in a.steps.items():
            if job != ours[0]:
                continue
            steps += 1
            if key not in events:
                lost += 1
                continue
            latencies.append(events[key] - t_line)
            if (job, key) in b.steps:
                baseline.append(b.steps[(job, key)] - t_line)
    return {"latency_s": latencies, "baseline_s": baseline, "steps": steps, "lost": lost}


async def main_async(args) -> int:
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient

    home = sketch_home("cantor-bench-node-", "wav16")
    node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
    t0 = time.perf_counter()
    await node.start()
    ready_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    idle_fresh = rss_mb(node.pid)

    sup = await direct_sketch_engine(home)
    engine = sup.client()
    request = {
        "caption": "bench lofi piano",
        "duration": args.duration,
        "seed": 11,
        "model": "sketch",
        "format": "wav16",
        "lyrics": "[Instrumental]",
    }
    try:
        async with NodeClient(node.url) as client:
            # warm both paths (engine start, imports, first-job costs)
            await through_node(client, request)
            await straight(engine, request)
            await straight_tight(engine, request)
            node_t, direct_t, tight_t = [], [], []
            bad: list[str] = []

            def count(into: list, result: tuple[float, str | None], what: str) -> None:
                took, problem = result
                if problem:
                    bad.append(f"{what}: {problem}")  # not counted
                else:
                    into.append(took)

            for i in range(args.songs):
                order = [(0, 1, 2), (1, 2, 0), (2, 0, 1)][i % 3]
                for which in order:
                    if which == 0:
                        count(node_t, await through_node(client, request), "through the node")
                    elif which == 1:
                        count(direct_t, await straight(engine, request), "direct")
                    else:
                        count(tight_t, await straight_tight(engine, request), "direct, tight")
            if bad:
                raise RuntimeError(f"{len(bad)} songs failed their check: {bad[:3]}")
            diffs = [(a - b) * 1000 for a, b in zip(node_t, direct_t)]
            tight_diffs = [(a - b) * 1000 for a, b in zip(node_t, tight_t)]

            system = await client.system()
            engine_url = next(e["url"] for e in system["loaded"] if e["engine"] == "sketch")
            progress = await progress_latency(client, engine_url, request, args.latency_songs)
            await asyncio.sleep(1.0)
            idle_after = rss_mb(node.pid)
    finally:
        await engine.aclose()
        await sup.aclose()
        await node.stop()

    lat = [x * 1000 for x in progress["latency_s"]]
    base = [x * 1000 for x in progress["baseline_s"]]
    med_node, med_direct = statistics.median(node_t), statistics.median(direct_t)
    overhead = statistics.median(diffs)
    print(f"node ready in {ready_s * 1000:.0f} ms")
    print(
        f"overhead per song ({args.songs} rotated rounds, {args.duration:g}-s instrumental, "
        f"sketch; every file decoded and checked):"
    )
    print(f"  direct to engine (baseline): median {med_direct * 1000:.0f} ms")
    print(
        f"  through the node           : median {med_node * 1000:.0f} ms "
        f"(ratio {med_node / med_direct:.3f})"
    )
    tight = statistics.median(tight_diffs)
    print(f"  direct, polling every 10 ms: median {statistics.median(tight_t) * 1000:.0f} ms")
    print(
        f"  node − direct (tight polling), median of triples: {tight:+.1f} ms "
        f"(mean {statistics.mean(tight_diffs):+.1f})  goal ≤ {OVERHEAD_GOAL_MS:.0f} ms  "
        f"{'OK' if tight <= OVERHEAD_GOAL_MS else 'MISSED'}"
    )
    print(
        f"  node − direct (engine client), median of pairs: {overhead:+.1f} ms "
        f"(mean {statistics.mean(diffs):+.1f}, min {min(diffs):+.1f}, max {max(diffs):+.1f})"
        f"  goal ≤ {OVERHEAD_GOAL_MS:.0f} ms  {'OK' if overhead <= OVERHEAD_GOAL_MS else 'MISSED'}"
    )
    steps, lost = progress["steps"], progress["lost"]
    if lat:
        ok = p95(lat) <= LATENCY_GOAL_MS and not lost
        print(
            f"progress latency, engine log line → node SSE event ({len(lat)} of {steps} step "
            f"lines matched, {lost} lost): median {statistics.median(lat):+.1f} ms, p95 "
            f"{p95(lat):+.1f} ms, min {min(lat):+.1f}, max {max(lat):+.1f} ms  goal p95 ≤ "
            f"{LATENCY_GOAL_MS:.0f} ms and none lost  {'OK' if ok else 'MISSED'}"
        )
    else:
        print(f"progress latency: no step line matched ({steps} lines, {lost} lost)")
    if base:
        print(
            f"  baseline, the same line at a second client of the engine's /logs: median "
            f"{statistics.median(base):+.1f} ms, p95 {p95(base):+.1f} ms"
        )
    print(
        f"node idle RSS: fresh {idle_fresh:.1f} MB, after {args.songs + 1 + args.latency_songs} "
        f"songs {idle_after:.1f} MB  goal ≤ {RSS_GOAL_MB:.0f} MB  "
        f"{'OK' if max(idle_fresh, idle_after) <= RSS_GOAL_MB else 'MISSED'}"
    )
    write_json(
        args.json,
        "node",
        {
            "duration_s": args.duration,
            "songs": args.songs,
            "overhead": {
                "node_ms": [x * 1000 for x in node_t],
                "direct_ms": [x * 1000 for x in direct_t],
                "tight_ms": [x * 1000 for x in tight_t],
                "diff_ms": diffs,
                "tight_diff_ms": tight_diffs,
                "files_checked": True,
            },
            "progress": {
                "latency_ms": lat,
                "baseline_ms": base,
                "steps": steps,
                "lost": lost,
                "songs": args.latency_songs,
            },
            "rss_mib": {"fresh": idle_fresh, "after_songs": idle_after},
            "ready_ms": ready_s * 1000,
        },
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--songs", type=int, default=10, help="rounds of node / direct / direct-tight songs"
    )
    ap.add_argument("--latency-songs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    add_json_option(ap)
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
