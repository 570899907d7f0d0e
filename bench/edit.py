"""What editing costs through the node: an edit, an upload, a set of stems.

1. Edit overhead: a repaint (20–30 s) of a 60-s Sketch song (a) through the node — POST
   /v1/songs naming the song as its source, SSE until ``done``, the take written (and its
   tempo and key measured) — and (b) the same multipart job (the same engine request, the
   take's kept latent as ``src_latents``) sent straight to a Sketch engine by the engine
   client, woken by the engine's "done" line as the node is (a client polling every 10 ms
   slows the engine it polls). A/B alternated, both the real Sketch; goal: node − direct
   ≤ 50 ms (median of pairs).
2. Upload: a 50 MB WAV POSTed to the node's /v1/uploads on loopback (decoded and checked,
   kept) against the same bytes POSTed to a bare HTTP server that only writes them to a file
   (a subprocess, the same client). Alternated; goal: ≤ 1 s.
3. Stems: all 12 ``extract`` jobs of the same song through the node, one after another,
   against the same 12 jobs straight to the engine, alternated stem by stem (the machine's
   load changes less between the two of a pair); goal: node − direct ≤ 50 ms per stem
   (median of the pairs; the per-set figure is printed too).
4. The set as the Stems dialog and ``cantor stems`` send it: all 12 queued at once, until the
   last is done, against the engine's own 12 jobs back to back, alternated set by set; goal:
   node − direct ≤ 50 ms per stem (the node writes a stem's take while the engine makes
   the next).

Every result is checked (the take is done and as long as asked, the direct audio is a WAV
of that length, the upload's record says what was sent, the bare server got every byte);
a run that fails a check raises. The figures are printed and, with ``--json PATH``, written
as JSON for bench/run_all.py.

    .venv/bin/python bench/edit.py [--rounds 5] [--stem-rounds 2] [--upload-mb 50]
                                   [--duration 60] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import (
    direct_sketch_engine,
    free_port,
    machine_facts,
    sketch_home,  # noqa: E402
    song_to_the_end,
    wait_http,
)

EDIT_GOAL_MS = 50.0
UPLOAD_GOAL_S = 1.0
STEM_GOAL_MS = 50.0
TRACKS = (
    "vocals",
    "backing_vocals",
    "drums",
    "bass",
    "guitar",
    "keyboard",
    "percussion",
    "strings",
    "synth",
    "fx",
    "brass",
    "woodwinds",
)
SR = 48000
SOURCE = {
    "caption": "bench lofi piano",
    "duration": 60,
    "bpm": 100,
    "key": "A minor",
    "seed": 5,
    "model": "sketch",
    "format": "wav24",
    "lyrics": "[Instrumental]",
}

BARE_SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
OUT = sys.argv[2]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def do_POST(self):
        n = 0
        with open(OUT, "wb") as fh:
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline(); break
                    fh.write(self.rfile.read(size)); n += size; self.rfile.readline()
            else:
                left = int(self.headers.get("Content-Length") or 0)
                while left:
                    chunk = self.rfile.read(min(left, 1 << 20)); fh.write(chunk)
                    left -= len(chunk); n += len(chunk)
        body = ('{"bytes": %d}' % n).encode()
        self.send_response(201); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


OUTSIDE: list[float] = []  # per node song: seconds outside its engine job (its timings)


async def node_song(client, request: dict, expect_seconds: float) -> float:
    """Through the node: POST, SSE until done; the take checked. Seconds taken (and the
    part of them outside the engine job, by the node's own timings, in OUTSIDE)."""
    t0 = time.perf_counter()
    sid, event, data = await song_to_the_end(client, request)
    if event != "done":
        raise RuntimeError(f"song {event}: {data}")
    elapsed = time.perf_counter() - t0
    song = await client.song(sid)
    take = song["takes"][0]
    if abs(take["duration"] - expect_seconds) > 0.05 or not Path(take["audio"]).is_file():
        raise RuntimeError(f"the node's take is not {expect_seconds:g} s: {take}")
    timings = json.loads(Path(take["sidecar"]).read_text("utf-8"))["timings"]
    OUTSIDE.append(elapsed - float(timings["engine_s"]))
    return elapsed


async def node_set(client, requests: list[dict], expect_seconds: float) -> float:
    """Through the node, as the Stems dialog sends a set: every request queued at once
    (the event stream open first), seconds until the last is done; each take checked."""
    import contextlib

    t0 = time.perf_counter()
    async with contextlib.aclosing(client.all_events()) as stream:
        events = stream.__aiter__()
        event, _ = await events.__anext__()
        if event != "hello":
            raise RuntimeError(f"the node's event stream began with {event!r}, not hello")
        ids = [await client.submit_song(r) for r in requests]
        waiting = set(ids)
        async for event, data in events:
            sid = data.get("id") if isinstance(data, dict) else None
            if sid in waiting and event in ("done", "failed", "cancelled"):
                if event != "done":
                    raise RuntimeError(f"stem {sid} {event}: {data}")
                waiting.discard(sid)
                if not waiting:
                    break
    elapsed = time.perf_counter() - t0
    for sid in ids:
        take = (await client.song(sid))["takes"][0]
        if abs(take["duration"] - expect_seconds) > 0.05 or not Path(take["audio"]).is_file():
            raise RuntimeError(f"the node's take is not {expect_seconds:g} s: {take}")
    return elapsed


class Direct:
    """A Sketch engine of its own and the best client for it: the engine client woken by the
    engine's own "Job … done" line (as the node is), so neither side waits on a poll."""

    def __init__(self, sup):
        self.sup, self.engine = sup, sup.client()
        self.wake = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_event(event) -> None:
            if (
                str(getattr(event, "line", "")).startswith("[Server] Job ")
                and " done (" in event.line
            ):
                loop.call_soon_threadsafe(self.wake.set)

        self.unsubscribe = sup.subscribe(on_event)

    async def aclose(self) -> None:
        self.unsubscribe()
        await self.engine.aclose()


async def direct_job(
    direct: Direct, request: dict, parts: dict, source_seconds: float, expect_seconds: float
) -> float:
    """Straight to the engine: the runner's request and parts as one multipart job."""
    from cantor_desktop.engine.client import engine_request
    from cantor_desktop.song.request import validate

    body = engine_request(
        validate(request),
        synth_model="sketch-dit.gguf",
        lm_model=None,
        output_format=request["format"],
        source_duration=source_seconds,
    )
    t0 = time.perf_counter()
    tracks = await direct.engine.song(body, parts=parts, wake=direct.wake)
    elapsed = time.perf_counter() - t0
    audio = tracks[0].audio
    if audio[:4] != b"RIFF" or abs((len(audio) - 44) / 6 / SR - expect_seconds) > 0.05:
        raise RuntimeError("the engine's audio is not the expected WAV")
    return elapsed


def write_wav(path: Path, megabytes: float) -> float:
    """A 16-bit stereo 48 kHz WAV of about ``megabytes`` MB (a tune over noise): seconds."""
    import numpy as np
    import soundfile as sf

    frames = int(megabytes * 1e6 / 4)
    t = np.arange(frames) / SR
    rng = np.random.default_rng(1)
    tone = 0.3 * np.sin(2 * np.pi * 220 * t * (1 + 0.5 * (np.floor(t * 2) % 3)))
    audio = np.stack([tone, tone], axis=1) + rng.standard_normal((frames, 2)) * 0.02
    sf.write(str(path), audio.astype(np.float32), SR, subtype="PCM_16")
    return frames / SR


async def upload_bare(url: str, path: Path) -> float:
    import httpx

    async def body():
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                yield chunk

    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        r = await http.post(
            url + "/upload", content=body(), headers={"Content-Type": "application/octet-stream"}
        )
    elapsed = time.perf_counter() - t0
    if r.status_code != 201 or r.json()["bytes"] != path.stat().st_size:
        raise RuntimeError(f"the bare server did not get the file: {r.text[:200]}")
    return elapsed


async def upload_node(client, path: Path, seconds: float) -> float:
    t0 = time.perf_counter()
    record = await client.upload(path)
    elapsed = time.perf_counter() - t0
    if abs(record["duration"] - seconds) > 0.05:
        raise RuntimeError(f"the node's upload record does not match: {record}")
    return elapsed


async def main_async(args) -> dict:
    from cantor_desktop.engine.client import Part
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient

    home = sketch_home("cantor-bench-edit-", "wav24")
    node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
    await node.start()
    sup = await direct_sketch_engine(home)
    engine = Direct(sup)
    bare_port = free_port()
    bare = subprocess.Popen(
        [sys.executable, "-c", BARE_SERVER, str(bare_port), str(home / "bare-upload.bin")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    figures: dict = {}
    try:
        wait_http(f"http://127.0.0.1:{bare_port}/", 30, bare)
        async with NodeClient(node.url) as client:
            d = float(args.duration)
            sid, event, data = await song_to_the_end(client, {**SOURCE, "duration": d})
            if event != "done":
                raise RuntimeError(f"the source song {event}: {data}")
            latent = (home / "state" / "latents" / f"{sid}_take1.sketch.f32").read_bytes()
            parts = {"src_latents": Part("src_latents.f32", latent)}
            source = {"song": sid, "take": 1}
            repaint = {
                "caption": "jazz trumpet solo",
                "task": "repaint",
                "source": source,
                "region": {"start": d / 3, "end": d / 2},
                "seed": 9,
                "model": "sketch",
                "format": "wav24",
            }
            # 1. one edit: warm both, then alternate
            await node_song(client, repaint, d)
            await direct_job(engine, repaint, parts, d, d)
            via, direct = [], []
            OUTSIDE.clear()
            for i in range(args.rounds):
                for which in (0, 1) if i % 2 == 0 else (1, 0):
                    if which == 0:
                        via.append(await node_song(client, repaint, d))
                    else:
                        direct.append(await direct_job(engine, repaint, parts, d, d))
            diffs = [(a - b) * 1000 for a, b in zip(via, direct)]
            outside_edit = [x * 1000 for x in OUTSIDE]
            figures["edit"] = {
                "name": f"Edit of a {d:.0f}-s song through the node (repaint "
                f"{d / 3:.0f}–{d / 2:.0f} s)",
                "duration_s": d,
                "ours_ms": median(via) * 1000,
                "baseline_ms": median(direct) * 1000,
                "diff_ms": median(diffs),
                "diffs_ms": diffs,
                "goal_ms": EDIT_GOAL_MS,
                "outside_engine_ms": median(outside_edit),
                "ok": median(diffs) <= EDIT_GOAL_MS,
            }
            # 2. the upload
            wav = home / "upload.wav"
            seconds = write_wav(wav, args.upload_mb)
            await upload_node(client, wav, seconds)
            await upload_bare(f"http://127.0.0.1:{bare_port}", wav)
            up_node, up_bare = [], []
            for i in range(args.upload_runs):
                for which in (0, 1) if i % 2 == 0 else (1, 0):
                    if which == 0:
                        up_node.append(await upload_node(client, wav, seconds))
                    else:
                        up_bare.append(await upload_bare(f"http://127.0.0.1:{bare_port}", wav))
            size_mb = wav.stat().st_size / 1e6
            figures["upload"] = {
                "name": f"Upload of a {size_mb:.0f} MB WAV on loopback",
                "ours_s": median(up_node),
                "baseline_s": median(up_bare),
                "ratio": median(up_node) / median(up_bare),
                "runs_s": up_node,
                "goal_s": UPLOAD_GOAL_S,
                "ok": median(up_node) <= UPLOAD_GOAL_S,
                "size_mb": size_mb,
            }
            # 3. all 12 stems, each through the node and straight, alternated stem by stem
            stem_reqs = [
                {
                    "caption": "stem",
                    "task": "extract",
                    "source": source,
                    "track": t,
                    "model": "sketch",
                    "format": "wav24",
                }
                for t in TRACKS
            ]
            node_sets, direct_sets, stem_diffs = [], [], []
            OUTSIDE.clear()
            for i in range(args.stem_rounds):
                node_total = direct_total = 0.0
                for k, req in enumerate(stem_reqs):
                    pair = {}
                    for which in (0, 1) if (i + k) % 2 == 0 else (1, 0):
                        pair[which] = (
                            await node_song(client, req, d)
                            if which == 0
                            else await direct_job(engine, req, parts, d, d)
                        )
                    node_total += pair[0]
                    direct_total += pair[1]
                    stem_diffs.append((pair[0] - pair[1]) * 1000)
                node_sets.append(node_total)
                direct_sets.append(direct_total)
            per_set = [(a - b) / len(TRACKS) * 1000 for a, b in zip(node_sets, direct_sets)]
            # 4. the set as the Stems dialog and `cantor stems` send it: all 12 queued at
            # once, until the last is done, against the engine's own 12 jobs back to back
            queued_node, queued_direct = [], []
            for i in range(args.stem_rounds):
                for which in (0, 1) if i % 2 == 0 else (1, 0):
                    if which == 0:
                        queued_node.append(await node_set(client, stem_reqs, d))
                    else:
                        t0 = time.perf_counter()
                        for req in stem_reqs:
                            await direct_job(engine, req, parts, d, d)
                        queued_direct.append(time.perf_counter() - t0)
            queued_per_stem = [
                (a - b) / len(TRACKS) * 1000 for a, b in zip(queued_node, queued_direct)
            ]
            figures["stems_queued"] = {
                "name": f"12 stems of a {d:.0f}-s song queued at once (as the Stems dialog sends them)",
                "ours_ms": median(queued_node) * 1000,
                "baseline_ms": median(queued_direct) * 1000,
                "per_stem_ms": median(queued_per_stem),
                "sets_per_stem_ms": queued_per_stem,
                "goal_ms": STEM_GOAL_MS,
                "ok": median(queued_per_stem) <= STEM_GOAL_MS,
            }
            figures["stems"] = {
                "name": f"All 12 stems of a {d:.0f}-s song through the node",
                "ours_ms": median(node_sets) * 1000,
                "baseline_ms": median(direct_sets) * 1000,
                "per_stem_ms": median(stem_diffs),
                "stem_diffs_ms": stem_diffs,
                "sets_per_stem_ms": per_set,
                "goal_ms": STEM_GOAL_MS,
                "outside_engine_ms": median([x * 1000 for x in OUTSIDE]),
                "ok": median(stem_diffs) <= STEM_GOAL_MS,
            }
    finally:
        bare.terminate()
        bare.wait(10)
        await engine.aclose()
        await sup.aclose()
        await node.stop()
    return figures


def report(figures: dict) -> None:
    e, u, s = figures["edit"], figures["upload"], figures["stems"]
    print(f"{e['name']}, {len(e['diffs_ms'])} alternated pairs:")
    print(f"  direct to engine (baseline): median {e['baseline_ms']:.0f} ms")
    print(f"  through the node           : median {e['ours_ms']:.0f} ms")
    d = e["diffs_ms"]
    print(
        f"  node − direct, median of pairs: {e['diff_ms']:+.1f} ms (min {min(d):+.1f}, "
        f"max {max(d):+.1f})  goal ≤ {EDIT_GOAL_MS:.0f} ms  {'OK' if e['ok'] else 'MISSED'}"
    )
    print(
        f"  the node's own time outside the engine job (its timings): median "
        f"{e['outside_engine_ms']:.1f} ms"
    )
    print(
        f"upload of a {u['size_mb']:.0f} MB WAV on loopback: node median {u['ours_s']:.3f} s, "
        f"bare server (baseline) {u['baseline_s']:.3f} s, ratio {u['ratio']:.2f}  "
        f"goal ≤ {UPLOAD_GOAL_S:.0f} s  {'OK' if u['ok'] else 'MISSED'}"
    )
    d = s["stem_diffs_ms"]
    print(
        f"{s['name']} ({len(s['sets_per_stem_ms'])} sets, stem by stem "
        f"alternated): node {s['ours_ms']:.0f} ms a set, direct (baseline) "
        f"{s['baseline_ms']:.0f} ms"
    )
    print(
        f"  node − direct per stem, median of {len(d)} pairs: {s['per_stem_ms']:+.1f} ms "
        f"(min {min(d):+.1f}, max {max(d):+.1f}; per set "
        f"{', '.join(f'{x:+.1f}' for x in s['sets_per_stem_ms'])} ms a stem)  "
        f"goal ≤ {STEM_GOAL_MS:.0f} ms  {'OK' if s['ok'] else 'MISSED'}"
    )
    print(
        f"  the node's own time outside each engine job (its timings): median "
        f"{s['outside_engine_ms']:.1f} ms"
    )
    q = figures["stems_queued"]
    print(
        f"{q['name']}: node {q['ours_ms']:.0f} ms a set, the engine's own 12 jobs back to "
        f"back (baseline) {q['baseline_ms']:.0f} ms"
    )
    print(
        f"  node − direct per stem: median {q['per_stem_ms']:+.1f} ms (per set "
        f"{', '.join(f'{x:+.1f}' for x in q['sets_per_stem_ms'])} ms a stem)  "
        f"goal ≤ {STEM_GOAL_MS:.0f} ms  {'OK' if q['ok'] else 'MISSED'}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternated edit pairs")
    ap.add_argument("--duration", type=float, default=60.0, help="the source song's seconds")
    ap.add_argument("--stem-rounds", type=int, default=2, help="alternated rounds of 12 stems")
    ap.add_argument("--upload-mb", type=float, default=50.0)
    ap.add_argument("--upload-runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    figures = asyncio.run(main_async(args))
    report(figures)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {"script": "bench/edit.py", "figures": figures, "machine": machine_facts()},
                indent=2,
            ),
            "utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
