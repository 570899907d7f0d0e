"""Export speed: a 3-minute Sketch song to FLAC at -14 LUFS, 44.1 kHz, on one core.

The song is a real Sketch render saved the way the node saves it (24-bit WAV and its sidecar,
node/songs.write_takes, so its tempo and key are measured there as for any instrumental).
Each run exports it with cantor_desktop.export (read, resample 48 -> 44.1 kHz with soxr VHQ,
BS.1770 loudness to -14 LUFS with a -1 dBTP true-peak ceiling, FLAC 24-bit, tags, .part then
rename) and checks the file: it decodes, at 44.1 kHz, the whole length, loudness within
±0.5 LU of -14 (read by pyloudnorm, the test extra's reference, when installed; else by the
export's own meter), true peak at or under -1 dBTP, BPM/KEY/seed tags present. A run whose
file fails a check does not count.

The loudness meter alone (export/bs1770.py, numpy FFT) is timed too on the exported file,
against pyloudnorm (scipy's lfilter) when installed: the readings and the CPU seconds. So is
the measuring of the song's tempo and key (song/analysis.py, what the node does for every
take without asked or LM values): CPU seconds, the tempo and key it found checked against
the render's own; goal at most 3 CPU-s for a 3-minute song.

Baseline, measured in the same run (alternated with the export): the same WAV decoded and
written as FLAC by soundfile alone (no resampling, loudness or tags): the floor of any FLAC
export. Goal: the export at least 20x real time. The process is pinned to one core (Linux)
and numpy/BLAS to one thread; CPU seconds (time.process_time) and wall seconds both shown.

    .venv/bin/python bench/export.py [--runs 5] [--duration 180]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import soundfile as sf  # noqa: E402

from cantor_desktop import export  # noqa: E402
from cantor_desktop.export import loudness as lu  # noqa: E402
from cantor_desktop.node import song_files as songs  # noqa: E402
from cantor_desktop.sketch import encode, render  # noqa: E402
from cantor_desktop.sketch.engine import song_from_request  # noqa: E402
from cantor_desktop.sketch.request import normalise  # noqa: E402

GOAL = 20.0
TARGET, CEILING = -14.0, -1.0


def make_song(folder: Path, duration: float) -> Path:
    req = normalise(
        {
            "caption": "lofi hip hop, dusty piano, vinyl crackle",
            "duration": duration,
            "lyrics": "[Instrumental]",
            "output_format": "wav24",
        }
    )
    song = song_from_request(req, 7)
    r = render.Renderer(song, 8)
    for k in range(8):
        r.step(k)
    audio = render.master(r.finish(), normalise=True)
    wav = encode.wav_bytes(audio, "wav24")
    files = songs.write_takes(
        folder,
        song_id="0123456789abcdef",
        request={
            "caption": req["caption"],
            "lyrics": "[Instrumental]",
            "duration": duration,
            "seed": 7,
            "model": "sketch",
        },
        fmt="wav24",
        audios=[wav],
        seeds=[7],
        meta={"model": {"name": "sketch", "family": "sketch"}},
    )
    return Path(files[0]["audio"])


def check(path: Path, duration: float) -> list[str]:
    """What is wrong with an exported file (empty when it is right)."""
    from mutagen.flac import FLAC

    problems = []
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    if rate != 44100:
        problems.append(f"rate {rate}")
    if abs(len(audio) / rate - duration) > 0.01:
        problems.append(f"length {len(audio) / rate:.3f} s")
    loud = reference_loudness(audio, rate)
    if abs(loud - TARGET) > 0.5:
        problems.append(f"loudness {loud:.2f} LUFS")
    tp = lu.true_peak(audio, rate)
    if tp > CEILING + 1e-6:
        problems.append(f"true peak {tp:.2f} dBTP")
    tags = FLAC(str(path))
    for key in ("BPM", "KEY", "CANTOR_SEED", "TITLE"):
        if not tags.get(key):
            problems.append(f"no {key} tag")
    return problems


def reference_loudness(audio, rate: int) -> float:
    """pyloudnorm's reading with the standard's coefficients, else the export's own."""
    try:
        import pyloudnorm
    except ImportError:
        return lu.integrated_loudness(audio, rate)
    return float(pyloudnorm.Meter(rate, filter_class="DeMan").integrated_loudness(audio))


def time_meters(path: Path, runs: int) -> None:
    """CPU seconds (median) and reading of the export's meter and of pyloudnorm on ``path``."""
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    meters = {"bs1770 (numpy FFT)": lambda: lu.integrated_loudness(audio, rate)}
    try:
        import pyloudnorm

        meters["pyloudnorm (scipy lfilter)"] = lambda: pyloudnorm.Meter(rate).integrated_loudness(
            audio
        )
    except ImportError:
        pass
    for name, meter in meters.items():
        meter()
        cpu, reading = [], 0.0
        for _ in range(runs):
            c0 = time.process_time()
            reading = meter()
            cpu.append(time.process_time() - c0)
        print(
            f"meter {name:<28} {statistics.median(cpu):.3f} s cpu, {reading:.3f} LUFS "
            f"({len(audio) / rate:.0f} s, {audio.shape[1]} ch, {rate} Hz)"
        )


def timed(fn) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def time_analysis(src: Path, runs: int) -> bool:
    """CPU seconds of measuring the song's tempo and key (the render's: 72 BPM, its key)."""
    from cantor_desktop.song import analysis

    audio, rate = sf.read(str(src), dtype="float32", always_2d=True)
    found, cpu = None, []
    for _ in range(runs + 1):
        t0 = time.process_time()
        found = analysis.tempo_key({}, None, audio, rate)
        cpu.append(time.process_time() - t0)
    meta = export.SongMeta.beside(src)
    ok = found is not None and found["bpm"] == round(meta.bpm or 0) and found["key"] == meta.key
    print(
        f"measure: tempo and key of a {len(audio) / rate:.0f}-s song: "
        f"{statistics.median(cpu[1:]):.3f} CPU-s (found {found and found['bpm']} BPM, "
        f"{found and found['key']}; {'as rendered' if ok else 'NOT as rendered'})"
    )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=180.0)
    args = ap.parse_args()
    options = export.ExportOptions(format="flac", rate=44100, loudness=TARGET, peak=CEILING)
    with tempfile.TemporaryDirectory(prefix="cantor-bench-export-") as tmp:
        tmp = Path(tmp)
        src = make_song(tmp / "songs", args.duration)
        meta = export.SongMeta.beside(src)
        print(
            f"song: {src.name}, {args.duration:.0f} s, 48 kHz 24-bit, sidecar bpm "
            f"{meta.bpm:g} ({meta.bpm_source}), key {meta.key} ({meta.key_source})"
        )

        def baseline() -> None:
            audio, rate = sf.read(str(src), dtype="float32", always_2d=True)
            sf.write(str(tmp / "plain.flac"), audio, rate, format="FLAC", subtype="PCM_24")

        results: list = []

        def ours() -> None:
            results.append(export.export_file(src, tmp / "out", options))

        baseline(), ours()  # warm-up (imports, caches)
        base_cpu, base_wall, our_cpu, our_wall, failed = [], [], [], [], 0
        for run in range(args.runs):
            c, w = timed(baseline)
            base_cpu.append(c), base_wall.append(w)
            c, w = timed(ours)
            problems = check(results[-1].path, args.duration)
            if problems:
                failed += 1
                print(f"  run not counted: {results[-1].path.name}: {'; '.join(problems)}")
            else:
                our_cpu.append(c), our_wall.append(w)
            if run < args.runs - 1:  # the last is timed below
                results[-1].path.unlink()
        time_meters(results[-1].path, args.runs)
        if not time_analysis(src, args.runs):
            failed += 1
        if not our_cpu:
            print("no export passed its checks")
            return 1
        last = results[-1]
        bc, bw = statistics.median(base_cpu), statistics.median(base_wall)
        oc, ow = statistics.median(our_cpu), statistics.median(our_wall)
        d = args.duration
        print(
            f"output: {last.loudness:.2f} LUFS, true peak {last.true_peak:.2f} dBTP, "
            f"limiter {last.limited_db:.2f} dB, {last.bytes / 2**20:.1f} MiB; "
            f"{len(our_cpu)} of {args.runs} runs checked good"
        )
        print(
            f"{'case':<44}{'cpu s':>8}{'wall s':>8}{'x real time (cpu)':>19}"
            f"{'x real time (wall)':>20}"
        )
        print(
            f"{'baseline: soundfile WAV -> FLAC, 48 kHz':<44}{bc:>8.3f}{bw:>8.3f}"
            f"{d / bc:>18.1f}x{d / bw:>19.1f}x"
        )
        print(
            f"{'export: FLAC, -14 LUFS, -1 dBTP, 44.1 kHz':<44}{oc:>8.3f}{ow:>8.3f}"
            f"{d / oc:>18.1f}x{d / ow:>19.1f}x"
        )
        print(
            f"export vs baseline: {oc / bc:.2f}x the CPU time; vs goal {GOAL:.0f}x: "
            f"{d / oc / GOAL:.2f} (cpu), {d / ow / GOAL:.2f} (wall)"
        )
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
