"""Figure: does the node grow over a day of songs? Its memory every 20 songs over 200.

    .venv/bin/python bench/soak.py                  # 200 songs, memory every 20
    .venv/bin/python bench/soak.py --songs 60 --every 20 --json out.json

A real node process (its own CANTOR_HOME, the built-in Sketch engine) makes songs one after
another as a musician's session would: new songs of mixed lengths (10 s to 2 min, with and
without lyrics, several formats), and among them edits of earlier songs (repaint, extend,
cover) and stems (extract one track), each kept on disk as the node keeps it. Every song's
take is checked (done, as long as asked, its file there) or the run stops. After every
``--every`` songs the node's memory is read from /proc: RSS (VmRSS) and PSS (smaps_rollup,
its fair share of shared pages). The figures: the growth from song 20 (the first sample,
after the node has loaded what a song needs) to the last, and the band every sample lies
in, against a goal of 10 MiB (flat); the node's idle memory before the first song is the
baseline. The engine (a separate process)
is sampled too, for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import (
    add_json_option,
    free_port,
    sketch_home,
    song_to_the_end,
    write_json,
)

GOAL_MIB = 10.0
CAPTIONS = [
    "lofi piano, rainy night",
    "dreamy synthwave, 96 bpm",
    "epic orchestral trailer with choir",
    "808 trap beat",
    "acoustic folk guitar and strings",
    "rain ambient pads",
]
LYRICS = "[Verse]\nwalking home under the lights\n[Chorus]\nsing it back to me tonight\n"
FORMATS = ["wav16", "wav24", "flac", "mp3"]
DURATIONS = [10, 30, 60, 120, 20, 45]
TRACKS = ["drums", "bass", "vocals", "strings", "keyboard", "guitar"]


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS of a process in MiB (Linux /proc)."""
    out = {"rss": float("nan"), "pss": float("nan")}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss"] = int(line.split()[1]) / 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["pss"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def plan(n: int) -> list[dict]:
    """The session: what each of ``n`` songs asks for (``source`` names an earlier song by
    its index in this list, resolved when it is sent)."""
    songs: list[dict] = []
    for i in range(n):
        kind = i % 10
        base = {
            "model": "sketch",
            "format": FORMATS[i % len(FORMATS)],
            "seed": 1000 + i,
        }
        originals = [k for k, s in enumerate(songs) if "task" not in s]
        if kind == 3 and originals:  # a repaint of the latest song
            src = originals[-1]
            d = songs[src]["duration"]
            songs.append(
                {
                    **base,
                    "caption": "guitar solo",
                    "task": "repaint",
                    "source": src,
                    "region": {"start": d / 3, "end": d / 2},
                    "duration": d,
                }
            )
        elif kind == 6 and originals:  # an extension
            src = originals[-1]
            d = songs[src]["duration"]
            songs.append(
                {
                    **base,
                    "caption": CAPTIONS[i % len(CAPTIONS)],
                    "task": "extend",
                    "source": src,
                    "extend": {"after": 10},
                    "duration": d + 10,
                }
            )
        elif kind == 8 and originals:  # a stem
            src = originals[-1]
            songs.append(
                {
                    **base,
                    "caption": "stem",
                    "task": "extract",
                    "source": src,
                    "track": TRACKS[i % len(TRACKS)],
                    "duration": songs[src]["duration"],
                }
            )
        elif kind == 9 and originals:  # a cover
            src = originals[-2] if len(originals) > 1 else originals[-1]
            songs.append(
                {
                    **base,
                    "caption": "jazz trio",
                    "task": "cover",
                    "source": src,
                    "duration": songs[src]["duration"],
                }
            )
        else:
            d = DURATIONS[i % len(DURATIONS)]
            lyrics = LYRICS if i % 3 == 0 else "[Instrumental]"
            songs.append(
                {
                    **base,
                    "caption": CAPTIONS[i % len(CAPTIONS)],
                    "lyrics": lyrics,
                    "duration": d,
                }
            )
    return songs


async def soak(args) -> dict:
    from cantor_desktop.client.node_process import NodeProcess
    from cantor_desktop.client.nodeclient import NodeClient

    home = sketch_home("cantor-bench-soak-", "wav24")
    node = NodeProcess("127.0.0.1", free_port(), env={"CANTOR_HOME": str(home)})
    await node.start()
    samples: list[dict] = []
    kinds: dict[str, int] = {}
    try:
        await asyncio.sleep(1.0)
        idle = memory(node.pid)
        print(f"node idle: RSS {idle['rss']:.1f} MiB, PSS {idle['pss']:.1f} MiB", flush=True)
        songs = plan(args.songs)
        ids: list[str] = []
        t0 = time.monotonic()
        async with NodeClient(node.url) as client:
            for i, req in enumerate(songs):
                body = dict(req)
                if "source" in body:
                    body["source"] = {"song": ids[body["source"]], "take": 1}
                expect = float(body.pop("duration"))
                if "task" not in body:
                    body["duration"] = expect
                sid, event, data = await song_to_the_end(client, body)
                if event != "done":
                    raise RuntimeError(f"song {i + 1} ({body.get('task', 'new')}) {event}: {data}")
                song = await client.song(sid)
                take = song["takes"][0]
                if abs(float(take["duration"]) - expect) > 0.1 or not Path(take["audio"]).is_file():
                    raise RuntimeError(f"song {i + 1}: the take is not {expect:g} s: {take}")
                ids.append(sid)
                kind = body.get("task", "new")
                kinds[kind] = kinds.get(kind, 0) + 1
                if (i + 1) % args.every == 0:
                    await asyncio.sleep(args.settle)  # read it idle, as a user leaves it
                    engine_pid = _engine_pid(node.pid)
                    m = memory(node.pid)
                    e = memory(engine_pid) if engine_pid else {"rss": None, "pss": None}
                    samples.append(
                        {
                            "songs": i + 1,
                            "rss": m["rss"],
                            "pss": m["pss"],
                            "engine_rss": e["rss"],
                            "minutes": (time.monotonic() - t0) / 60,
                        }
                    )
                    print(
                        f"  after {i + 1:4d} songs: node RSS {m['rss']:6.1f} MiB, "
                        f"PSS {m['pss']:6.1f} MiB"
                        + (f"; engine RSS {e['rss']:.0f} MiB" if e["rss"] else ""),
                        flush=True,
                    )
    finally:
        await node.stop()
    first, last = samples[0], samples[-1]
    growth_rss = last["rss"] - first["rss"]
    growth_pss = last["pss"] - first["pss"]
    peak_over_first = max(s["rss"] for s in samples) - first["rss"]
    band = max(s["rss"] for s in samples) - min(s["rss"] for s in samples)
    print(
        f"\ngrowth from song {first['songs']} to song {last['songs']}: RSS {growth_rss:+.1f} MiB, "
        f"PSS {growth_pss:+.1f} MiB; highest RSS {peak_over_first:+.1f} MiB over the first "
        f"sample; every sample within {band:.1f} MiB (goal: flat within {GOAL_MIB:.0f} MiB); "
        f"songs: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    )
    return {
        "songs": args.songs,
        "every": args.every,
        "idle": idle,
        "samples": samples,
        "growth_rss_mib": growth_rss,
        "growth_pss_mib": growth_pss,
        "peak_over_first_mib": peak_over_first,
        "band_mib": band,
        "kinds": kinds,
        "goal_mib": GOAL_MIB,
        "ok": band <= GOAL_MIB,  # flat: every sample within the goal of every other
        "takes_checked": True,
    }


def _engine_pid(node_pid: int) -> int | None:
    """The node's engine child (the Sketch engine), if one runs."""
    try:
        import psutil

        for child in psutil.Process(node_pid).children(recursive=True):
            if "sketch-server" in " ".join(child.cmdline()):
                return child.pid
    except Exception:  # noqa: BLE001 - the figure is for reference only
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--songs", type=int, default=200)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--settle", type=float, default=2.0, help="idle seconds before a sample")
    add_json_option(ap)
    args = ap.parse_args()
    if args.songs < 2 * args.every:
        ap.error("--songs must be at least twice --every (a first sample and a later one)")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    figures = asyncio.run(soak(args))
    write_json(args.json, "soak", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
