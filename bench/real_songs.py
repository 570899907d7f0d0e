"""The node on the real ace-server with the fabricated models (tests/real_engine/fabricated.py):
the same song through the node and sent to the engine alone.

1. Node overhead per song: a short vocal song (``/lm`` then ``/synth``; the fabricated LM
   ends its codes early, the seed fixes how many) through the node (POST /v1/songs → SSE
   ``done``: the take written and its sidecar) against the same two jobs sent to the same
   engine build started alone with the same flags, polled every 10 ms (the best a bare
   client can do). Rotated, the first of each a warm-up. Ratio node / alone.
2. Progress latency: each ``[DiT] Step`` line of the song's own synth job as a client of
   the engine's ``/logs`` reads it → the node's SSE progress event for it (bench/node.py's
   measure); baseline: a second ``/logs`` client. p95.
3. Generate → playable take (POST → the take on disk), the second of two songs in a row,
   with ``keep_loaded`` off and on (the engine keeps its models between songs). Ratio on / off.
4. Cancel during the DiT's steps (100 steps of the base model, a 10-s instrumental, the
   cancel after the third step, as tests/real_engine/test_real_cancel.py does): seconds
   from the cancel to the song's ``cancelled`` event. The test asserts what a cancel does;
   how long it takes is this figure.
5. With ``--vae-tiles SECONDS`` only: the engine's CPU time for a whole instrumental song
   with ace-server's own VAE tiling against smaller tiles (which let a cancel land inside
   the VAE): what they cost every song.

CPU-bound: every figure is on this machine's one engine thread (ace-server uses cores / 2).

    CANTOR_REAL_ACE_SERVER=build/real-engine/ace-server \
        .venv/bin/python bench/real_songs.py [--runs 3]

Without ``CANTOR_REAL_ACE_SERVER`` it prints why and exits 3 (bench/run_all.py: skipped).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from common import add_json_option, free_port, write_json  # noqa: E402

SKIPPED = 3
SONG = {
    "caption": "bench dreamy synthwave",
    "lyrics": "la la la",
    "bpm": 96,
    "key": "A minor",
    "time_signature": 4,
    "duration": 10,
    "seed": 10,  # two audio codes from the fabricated LM (fabricated.SHORT_SEEDS)
    "format": "wav16",
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def home_for(engine: Path, models, keep_loaded: bool) -> Path:
    """A throw-away CANTOR_HOME set up as a user would: the engine in node.toml, the
    fabricated set imported."""
    import atexit
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="cantor-bench-real-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["CANTOR_HOME"] = str(home)
    from real_engine.real_node import set_up

    set_up(home, engine, models, keep_loaded=keep_loaded)
    return home


async def through_node(client, request: dict) -> float:
    """Seconds from the POST to the SSE ``done`` (the take is on disk then)."""
    t0 = time.perf_counter()
    sid = await client.submit_song(request)
    async for event, data in client.events(sid):
        if event in ("done", "failed", "cancelled"):
            if event != "done":
                raise RuntimeError(f"song {event}: {data}")
            break
    took = time.perf_counter() - t0
    song = await client.song(sid)
    take = Path(song["takes"][0]["audio"])
    if not take.is_file() or take.read_bytes()[:4] != b"RIFF":
        raise RuntimeError(f"the take {take} is not a WAV file")
    return took


async def alone(engine, request: dict, files: dict) -> float:
    """The same two jobs the node sends, to the engine alone, polled every 10 ms."""
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song.request import validate

    body = engine_request(
        validate(request),
        synth_model=files["dit"],
        lm_model=files["lm"],
        output_format=request["format"],
    )

    async def job(path: str, payload) -> object:
        job_id = await engine.submit(path, payload)
        while (state := await engine.status(job_id)) == "running":
            await asyncio.sleep(0.01)
        if state != "done":
            raise RuntimeError(f"{path} ended {state}")
        return await engine.result(job_id, path)

    t0 = time.perf_counter()
    enriched = await job("/lm", {**body, "lm_mode": "generate"})
    tracks = await job("/synth", enriched)
    took = time.perf_counter() - t0
    if not tracks or tracks[0].audio[:4] != b"RIFF":
        raise RuntimeError("the engine alone returned no WAV")
    return took


async def progress_latency(client, engine_url: str, request: dict, songs: int) -> dict:
    """bench/node.py's measure for a vocal song (two engine jobs: the steps are the synth
    job's): each step line at a client of the engine's /logs → the node's progress event;
    a second /logs client is the baseline."""
    from node import LogReader

    latencies: list[float] = []
    baseline: list[float] = []
    steps = lost = 0
    for _ in range(songs):
        readers = [LogReader(engine_url), LogReader(engine_url)]
        for r in readers:
            r.start()
        await asyncio.wait_for(asyncio.gather(*(r.replayed() for r in readers)), 30)
        known = set(readers[0].jobs)
        events: dict[float, float] = {}
        sid = await client.submit_song(request)
        async for event, data in client.events(sid):
            if event == "progress" and data.get("stage") == "synth":
                events.setdefault(round(data["progress"], 4), time.perf_counter())
            if event in ("done", "failed", "cancelled"):
                break
        ours = [j for j in readers[0].jobs if j not in known]
        if len(ours) != 2:
            raise RuntimeError(f"expected the song's /lm and /synth jobs, saw {ours}")
        synth = ours[-1]
        deadline = time.monotonic() + 30
        while not all(synth in r.done for r in readers) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for r in readers:
            await r.stop()
        a, b = readers
        for (job, key), t_line in a.steps.items():
            if job != synth:
                continue
            steps += 1
            if key not in events:
                lost += 1
                continue
            latencies.append(events[key] - t_line)
            if (job, key) in b.steps:
                baseline.append(b.steps[(job, key)] - t_line)
    return {"latency_s": latencies, "baseline_s": baseline, "steps": steps, "lost": lost}


async def overhead_and_latency(engine_path: Path, models, runs: int) -> dict:
    from cantor_desktop.engine.supervisor import EngineSupervisor
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient
    from real_engine.fabricated import LM, TURBO

    home = home_for(engine_path, models, keep_loaded=False)
    node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
    await node.start()
    sup = EngineSupervisor(
        "acestep", [str(engine_path)], {}, models.folder, log_path=home / "logs" / "alone.log"
    )
    await sup.start()
    engine = sup.client()
    files = {"dit": TURBO, "lm": LM}
    node_s: list[float] = []
    alone_s: list[float] = []
    try:
        async with NodeClient(node.url) as client:
            await through_node(client, SONG)  # warm-up: engine start, first loads
            await alone(engine, SONG, files)
            for i in range(runs):
                if i % 2 == 0:
                    node_s.append(await through_node(client, SONG))
                    alone_s.append(await alone(engine, SONG, files))
                else:
                    alone_s.append(await alone(engine, SONG, files))
                    node_s.append(await through_node(client, SONG))
            system = await client.system()
            url = next(e["url"] for e in system["loaded"] if e["engine"] == "acestep")
            latency = await progress_latency(client, url, SONG, max(1, runs))
    finally:
        await engine.aclose()
        await sup.aclose()
        await node.stop()
    return {"node_s": node_s, "alone_s": alone_s, **latency}


async def keep_loaded_times(engine_path: Path, models, runs: int) -> dict:
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient

    out: dict[str, list[float]] = {"off_s": [], "on_s": []}
    for keep in (False, True):
        home = home_for(engine_path, models, keep_loaded=keep)
        node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
        await node.start()
        try:
            async with NodeClient(node.url) as client:
                await through_node(client, SONG)  # the first song starts the engine
                for _ in range(runs):
                    out["on_s" if keep else "off_s"].append(await through_node(client, SONG))
        finally:
            await node.stop()
    return out


CANCEL = {"caption": "bench lofi piano", "duration": 10, "steps": 100, "format": "wav16"}


async def cancel_times(engine_path: Path, models, runs: int) -> list[float]:
    """Seconds from the cancel (DELETE, sent once the DiT's third step is logged) to the
    song's ``cancelled`` event, read on a stream opened before the cancel."""
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient
    from real_engine.fabricated import BASE_MODEL
    from real_engine.real_node import EngineLog

    home = home_for(engine_path, models, keep_loaded=True)
    node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
    await node.start()
    took: list[float] = []
    try:
        async with NodeClient(node.url) as client:
            for i in range(runs):
                log = EngineLog(home)
                sid = await client.submit_song({**CANCEL, "model": BASE_MODEL, "seed": 2 + i})

                async def ended(sid: str = sid) -> tuple[str, float]:
                    async for event, _data in client.events(sid):
                        if event in ("done", "failed", "cancelled"):
                            return event, time.perf_counter()
                    return "stream ended", time.perf_counter()

                end = asyncio.ensure_future(ended())
                await log.wait_for(r"^\[DiT\] Step 3/100", timeout=600)
                t0 = time.perf_counter()
                await client.cancel(sid)
                event, t1 = await asyncio.wait_for(end, 600)
                if event != "cancelled":
                    raise RuntimeError(f"the cancelled song ended {event}")
                took.append(t1 - t0)
    finally:
        await node.stop()
    return took


VAE_TILES = {
    "ace-server's own (--vae-chunk 1024 --vae-overlap 64)": [],
    "--vae-chunk 64 --vae-overlap 8": ["--vae-chunk", "64", "--vae-overlap", "8"],
    "--vae-chunk 32 --vae-overlap 4": ["--vae-chunk", "32", "--vae-overlap", "4"],
    "--vae-chunk 16 --vae-overlap 4": ["--vae-chunk", "16", "--vae-overlap", "4"],
}


async def vae_tile_costs(engine_path: Path, models, runs: int, seconds: float) -> dict:
    """The engine's CPU time for a whole ``seconds``-long instrumental ``/synth`` job, with
    each VAE tiling: what smaller tiles (a cancel that lands inside the VAE) cost a song.
    The engines run side by side with their models kept loaded, so only the job is timed;
    the tilings take turns."""
    import psutil

    from cantor_desktop.engine.supervisor import EngineSupervisor
    from real_engine.fabricated import TURBO

    body = {
        "caption": "bench lofi piano",
        "lyrics": "[Instrumental]",
        "duration": seconds,
        "seed": 3,
        "output_format": "wav16",
        "synth_model": TURBO,
    }
    sups = {}
    for name, flags in VAE_TILES.items():
        sup = EngineSupervisor(
            "acestep",
            [str(engine_path), *flags],
            {},
            models.folder,
            keep_loaded=True,
            log_path=Path(os.environ["CANTOR_HOME"]) / "logs" / f"tiles-{len(sups)}.log",
        )
        await sup.start()
        sups[name] = sup
    cpu: dict[str, list[float]] = {name: [] for name in VAE_TILES}
    try:
        for i in range(runs + 1):  # the first round loads the models
            for name, sup in sups.items():
                client = sup.client()
                proc = psutil.Process(sup.pid)
                before = sum(proc.cpu_times()[:2])
                job = await client.submit("/synth", body)
                while await client.status(job) == "running":
                    await asyncio.sleep(0.05)
                if i:
                    cpu[name].append(sum(proc.cpu_times()[:2]) - before)
                await client.aclose()
    finally:
        for sup in sups.values():
            await sup.aclose()
    return cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--vae-tiles",
        type=float,
        metavar="SECONDS",
        help="only measure what smaller VAE tiles cost a SECONDS-long instrumental song",
    )
    add_json_option(parser)
    args = parser.parse_args()
    from real_engine.real_build import binary

    engine = binary()
    if engine is None or not engine.is_file():
        print("skipped: CANTOR_REAL_ACE_SERVER does not name a real ace-server build")
        return SKIPPED
    from real_engine.fabricated import model_set

    models = model_set()
    if args.vae_tiles:
        home_for(engine, models, keep_loaded=True)
        cpu = asyncio.run(vae_tile_costs(engine, models, args.runs, args.vae_tiles))
        base = statistics.median(next(iter(cpu.values())))
        for name, values in cpu.items():
            m = statistics.median(values)
            print(
                f"{name}: {m:.1f} CPU-s for a {args.vae_tiles:g}-s song, {m / base:.2f}x "
                f"({', '.join(f'{v:.1f}' for v in values)})"
            )
        write_json(args.json, "bench/real_songs.py", {"vae_tiles_cpu_s": cpu})
        return 0
    a = asyncio.run(overhead_and_latency(engine, models, args.runs))
    node_m, alone_m = statistics.median(a["node_s"]), statistics.median(a["alone_s"])
    lat = [x * 1000 for x in a["latency_s"]]
    base = [x * 1000 for x in a["baseline_s"]]
    print(
        f"song through the node {node_m:.2f} s, engine alone {alone_m:.2f} s: "
        f"{node_m / alone_m:.3f}x ({(node_m - alone_m) * 1000:+.0f} ms)",
        flush=True,
    )
    if lat:
        print(
            f"progress latency p95 {p95(lat):.1f} ms (second /logs client {p95(base):.1f} ms), "
            f"{a['steps']} steps, {a['lost']} lost",
            flush=True,
        )
    k = asyncio.run(keep_loaded_times(engine, models, args.runs))
    off, on = statistics.median(k["off_s"]), statistics.median(k["on_s"])
    print(
        f"Generate → take, second song: keep_loaded off {off:.2f} s, on {on:.2f} s: {on / off:.3f}x"
    )
    c = asyncio.run(cancel_times(engine, models, args.runs))
    print(f"cancel during the DiT's steps → cancelled: {statistics.median(c):.2f} s")
    write_json(
        args.json,
        "bench/real_songs.py",
        {
            "cancel_s": c,
            "overhead": {"node_s": a["node_s"], "alone_s": a["alone_s"]},
            "progress": {
                "latency_ms": lat,
                "baseline_ms": base,
                "steps": a["steps"],
                "lost": a["lost"],
            },
            "keep_loaded": k,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
