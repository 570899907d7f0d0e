"""Sketch engine speed: seconds of audio rendered per second of CPU for a 60-s song.

Baseline: real time (1.0x: one second of CPU per second of audio). Goal: 30x on one core.
Measures what a /synth job does after parsing: plan, 8 render steps, mix, master, latent,
WAV encoding. CPU time with time.process_time (numpy is single-threaded here).

    .venv/bin/python bench/sketch.py [--runs 5] [--duration 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cantor_desktop.sketch import encode, render  # noqa: E402
from cantor_desktop.sketch.engine import song_from_request  # noqa: E402
from cantor_desktop.sketch.request import normalise  # noqa: E402

GOAL = 30.0
LYRICS = "\n".join(["[Verse]", "Walking down the river where the city lights are low",
                    "Every little window has a story we don't know",
                    "[Chorus]", "Hold on, hold on, the morning's coming home",
                    "Hold on, hold on, you will never be alone"] * 3)


def render_once(req: dict, seed: int) -> float:
    t0 = time.process_time()
    song = song_from_request(req, seed)
    r = render.Renderer(song, 8)
    for k in range(8):
        r.step(k)
    audio = render.master(r.finish(), normalise=True)
    render.latent(audio)
    encode.wav_bytes(audio, req["output_format"])
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=60.0)
    args = ap.parse_args()
    baseline = 1.0      # real time: one CPU-second per audio-second
    render_once(normalise({"caption": "warm-up", "duration": 5, "output_format": "wav16"}), 0)
    print(f"sketch render, {args.duration:.0f}-s song, 48 kHz stereo, median of {args.runs} "
          f"runs (CPU seconds, time.process_time)")
    print(f"{'case':<28}{'cpu s':>8}{'audio s / cpu s':>18}{'vs real time':>14}"
          f"{'vs goal 30x':>13}")
    for name, lyrics, fmt in (("instrumental, wav16", "[Instrumental]", "wav16"),
                              ("with lyrics (lead), wav24", LYRICS, "wav24")):
        req = normalise({"caption": "pop song", "lyrics": lyrics, "bpm": 120,
                         "keyscale": "A minor", "duration": args.duration,
                         "output_format": fmt})
        times = [render_once(req, seed) for seed in range(1, args.runs + 1)]
        cpu = statistics.median(times)
        speed = args.duration / cpu
        print(f"{name:<28}{cpu:>8.3f}{speed:>17.1f}x{speed / baseline:>13.1f}x"
              f"{speed / GOAL:>12.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
