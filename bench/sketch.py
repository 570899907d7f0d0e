"""Sketch engine speed through the real engine: seconds of audio per second of engine CPU.

Starts the sketch engine as its own process (``cantor sketch-server``, the command the node
runs), then over HTTP on 127.0.0.1: POST /synth for an instrumental (wav16), and POST /lm
then /synth with its answer for a song with lyrics (wav24), polling /job and fetching the
result, the way a client does. Each result is checked before it counts: a multipart answer
whose WAV has the asked length, two channels, 48 kHz, and is not silent (peak near -1 dBFS,
RMS above -40 dBFS). The figure is the audio's length over the engine process's CPU time
for the job (utime + stime from /proc, 1 core: numpy runs single-threaded there); the wall
time from POST to the last byte is printed beside it.

Baseline, measured in the same run on the same core: a plain numpy reference render of the
same length — one sine tone per beat written into a stereo buffer, then the same master,
latent and WAV encoding the engine does. It is the least any render of that length costs
(the fixed per-song work with the simplest possible arrangement), so "vs reference" says
what the arrangement costs on top; real time (1x) would not be a measurement. The goal is
30x real time for a 60-s song on one core.

    .venv/bin/python bench/sketch.py [--runs 5] [--duration 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import free_port, wait_http  # noqa: E402

GOAL = 30.0
SR = 48000
ONE_CORE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
LYRICS = "\n".join(
    [
        "[Verse]",
        "Walking down the river where the city lights are low",
        "Every little window has a story we don't know",
        "[Chorus]",
        "Hold on, hold on, the morning's coming home",
        "Hold on, hold on, you will never be alone",
    ]
    * 3
)
CAPTION = "pop song with piano, strings and a synth lead"


class Engine:
    """The sketch engine as a process, and a client for its HTTP API."""

    def __init__(self, models: Path, log: Path):
        from cantor_desktop.system.selfexec import self_argv

        self.port = free_port()
        argv = self_argv("sketch-server") + [
            "--models",
            str(models),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=self._log, env={**os.environ, **ONE_CORE}
        )
        self.url = f"http://127.0.0.1:{self.port}"
        wait_http(self.url + "/health", 60, self.proc)
        self.http = httpx.Client(base_url=self.url, timeout=120, trust_env=False)

    def cpu(self) -> float:
        """The engine process's CPU seconds so far (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def job(self, path: str, body: dict) -> httpx.Response:
        r = self.http.post(path, json=body)
        r.raise_for_status()
        job = r.json()["id"]
        deadline = time.monotonic() + 600
        while True:
            status = self.http.get("/job", params={"id": job}).json()["status"]
            if status != "running":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} job {job} still running after 600 s")
            time.sleep(0.02)
        if status != "done":
            raise RuntimeError(f"{path} job {job} ended {status}")
        r = self.http.get("/job", params={"id": job, "result": 1})
        r.raise_for_status()
        return r

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def first_wav(r: httpx.Response) -> bytes:
    """The first audio part of a multipart /synth result."""
    ctype = r.headers["content-type"]
    boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
    for chunk in r.content.split(b"--" + boundary)[1:-1]:
        head, _, payload = chunk[2:-2].partition(b"\r\n\r\n")
        if b"audio/wav" in head:
            return payload
    raise RuntimeError(f"no audio/wav part in the result ({ctype})")


def check_audio(wav: bytes, duration: float) -> np.ndarray:
    """The samples of a 44-byte-header PCM WAV, after checking it is the song asked for."""
    (riff, _, wave, _, _, tag, channels, rate, _, _, bits, data_id, data_len) = struct.unpack_from(
        "<4sI4s4sIHHIIHH4sI", wav
    )
    if (riff, wave, data_id) != (b"RIFF", b"WAVE", b"data") or tag != 1:
        raise RuntimeError("the result is not a PCM WAV")
    raw = wav[44 : 44 + data_len]
    if bits == 16:
        x = np.frombuffer(raw, "<i2") / 32768.0
    elif bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = np.where(v >= 1 << 23, v - (1 << 24), v) / float(1 << 23)
    else:
        raise RuntimeError(f"unexpected {bits}-bit WAV")
    x = x.reshape(-1, channels)
    if (channels, rate) != (2, SR) or len(x) != round(duration * SR):
        raise RuntimeError(
            f"asked {duration} s stereo at {SR} Hz, got {len(x) / rate:.3f} s, "
            f"{channels} channels at {rate} Hz"
        )
    peak = float(np.abs(x).max())
    rms_db = 10 * np.log10(float(np.mean(x * x)) + 1e-20)
    if peak < 0.5 or rms_db < -40:
        raise RuntimeError(f"the audio is (nearly) silent: peak {peak:.3f}, RMS {rms_db:.1f} dBFS")
    return x


def instrumental(engine: Engine, duration: float, seed: int) -> tuple[float, float]:
    body = {
        "caption": CAPTION,
        "lyrics": "[Instrumental]",
        "bpm": 120,
        "keyscale": "A minor",
        "duration": duration,
        "seed": seed,
        "output_format": "wav16",
    }
    c0, t0 = engine.cpu(), time.perf_counter()
    r = engine.job("/synth", body)
    wall, cpu = time.perf_counter() - t0, engine.cpu() - c0
    check_audio(first_wav(r), duration)
    return cpu, wall


def with_lyrics(engine: Engine, duration: float, seed: int) -> tuple[float, float]:
    body = {
        "caption": CAPTION,
        "lyrics": LYRICS,
        "bpm": 120,
        "keyscale": "A minor",
        "duration": duration,
        "seed": seed,
        "lm_mode": "generate",
    }
    c0, t0 = engine.cpu(), time.perf_counter()
    [enriched] = json.loads(engine.job("/lm", body).content)
    if not enriched.get("audio_codes") or enriched.get("duration") != duration:
        raise RuntimeError(f"/lm answered without codes or with another length: {enriched}")
    r = engine.job("/synth", dict(enriched, output_format="wav24"))
    wall, cpu = time.perf_counter() - t0, engine.cpu() - c0
    check_audio(first_wav(r), duration)
    return cpu, wall


def reference_render(duration: float, bpm: int = 120) -> float:
    """CPU seconds for the plainest render of the same length: a sine tone per beat, then
    master, latent and WAV (the engine's own functions), in this process on one core."""
    from cantor_desktop.sketch import encode, render

    t0 = time.process_time()
    total = round(duration * SR)
    buf = np.zeros((total, 2), dtype=np.float32)
    beat = 60.0 / bpm
    n = int(0.25 * SR)
    t = np.arange(n, dtype=np.float32) / SR
    tone = np.sin(t * np.float32(2 * np.pi * 440)) * np.exp(t * np.float32(-12))
    for k in range(int(duration / beat) + 1):
        a = round(k * beat * SR)
        b = min(total, a + n)
        if b > a:
            buf[a:b] += tone[: b - a, None]
    audio = render.master(buf, normalise=True)
    render.latent(audio)
    encode.wav_bytes(audio, "wav16")
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=60.0)
    args = ap.parse_args()
    for k, v in ONE_CORE.items():
        os.environ.setdefault(k, v)
    from cantor_desktop.sketch import ensure_sketch_models

    with tempfile.TemporaryDirectory(prefix="cantor-bench-sketch-") as tmp:
        models = Path(tmp) / "models"
        ensure_sketch_models(models)
        engine = Engine(models, Path(tmp) / "engine.log")
        try:
            instrumental(engine, 5.0, 0)  # warm-up (imports, caches)
            reference_render(5.0)
            ref = statistics.median(reference_render(args.duration) for _ in range(args.runs))
            ref_speed = args.duration / ref
            print(
                f"sketch engine through HTTP (cantor sketch-server, pid {engine.proc.pid}), "
                f"{args.duration:.0f}-s song, 48 kHz stereo, median of {args.runs} runs; "
                f"engine CPU seconds per job"
            )
            print(
                f"reference numpy render (baseline, same length, this process): "
                f"cpu {ref:.3f} s, {ref_speed:.1f}x real time"
            )
            print(
                f"{'case':<28}{'cpu s':>8}{'audio s / cpu s':>18}{'wall s':>9}"
                f"{'audio s / wall s':>18}{'vs reference':>14}{'vs goal 30x':>13}"
            )
            for name, case in (
                ("instrumental, wav16", instrumental),
                ("with lyrics (lead), wav24", with_lyrics),
            ):
                runs = [case(engine, args.duration, seed) for seed in range(1, args.runs + 1)]
                cpu = statistics.median(c for c, _ in runs)
                wall = statistics.median(w for _, w in runs)
                speed = args.duration / cpu
                print(
                    f"{name:<28}{cpu:>8.3f}{speed:>17.1f}x{wall:>9.3f}"
                    f"{args.duration / wall:>17.1f}x{speed / ref_speed:>13.2f}x"
                    f"{speed / GOAL:>12.2f}x"
                )
        finally:
            engine.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
