"""Helpers for the sketch engine tests (no tests here): start the real engine process, parse
its answers."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from cantor_desktop.system.selfexec import self_argv
from support.procs import stop


class EngineProcess:
    def __init__(
        self,
        models: Path,
        port: int,
        log_path: Path,
        env: dict | None = None,
        extra: list[str] | None = None,
        via_cli: bool = False,
    ):
        argv = (
            self_argv("sketch-server")
            if via_cli
            else [sys.executable, "-m", "cantor_desktop.sketch"]
        )
        argv += ["--models", str(models), "--host", "127.0.0.1", "--port", str(port)]
        argv += extra or []
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        full_env = dict(os.environ)
        full_env.pop("GGML_BACKEND", None)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=self._log, env=full_env
        )
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"engine exited {self.proc.returncode}: {self.log()}")
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"engine not ready: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_log(self, text: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log()
            if text in log:
                return log
            time.sleep(0.02)
        raise AssertionError(f"{text!r} never logged:\n{self.log()}")

    def submit(self, path: str, body, **kw) -> str:
        r = self.client.post(path, json=body, **kw)
        assert r.status_code == 200, r.text
        job_id = r.json()["id"]
        assert len(job_id) == 16 and all(c in "0123456789abcdef" for c in job_id)
        return job_id

    def wait_job(self, job_id: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.client.get("/job", params={"id": job_id}).json()["status"]
            if status != "running":
                return status
            time.sleep(0.03)
        raise AssertionError(f"job {job_id} still running")

    def result(self, job_id: str) -> httpx.Response:
        assert self.wait_job(job_id) == "done", self.log()
        r = self.client.get("/job", params={"id": job_id, "result": 1})
        assert r.status_code == 200
        return r

    def stop(self) -> int:
        self.client.close()
        stop(self.proc)
        self._log.close()
        return self.proc.returncode


def parse_multipart(content_type: str, body: bytes) -> list[tuple[dict[str, str], bytes]]:
    """(headers, payload) per part of a multipart body, boundary taken from the header."""
    params = dict(p.strip().split("=", 1) for p in content_type.split(";")[1:])
    boundary = params["boundary"].strip('"').encode()
    assert body.endswith(b"--" + boundary + b"--\r\n")
    parts = []
    for chunk in body.split(b"--" + boundary)[1:-1]:
        assert chunk.startswith(b"\r\n") and chunk.endswith(b"\r\n")
        head, _, payload = chunk[2:-2].partition(b"\r\n\r\n")
        headers = {}
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        parts.append((headers, payload))
    return parts


def read_wav(data: bytes) -> tuple[dict, np.ndarray]:
    """The 44-byte header's fields and the samples as float in [-1, 1], shape (n, channels)."""
    (
        riff,
        size,
        wave,
        fmt_id,
        fmt_len,
        tag,
        channels,
        rate,
        byte_rate,
        block,
        bits,
        data_id,
        data_len,
    ) = struct.unpack_from("<4sI4s4sIHHIIHH4sI", data)
    assert (riff, wave, fmt_id, data_id, fmt_len) == (b"RIFF", b"WAVE", b"fmt ", b"data", 16)
    assert size == len(data) - 8 and data_len == len(data) - 44
    assert block == channels * bits // 8 and byte_rate == rate * block
    raw = data[44:]
    if tag == 3:
        x = np.frombuffer(raw, "<f4").astype(np.float64)
    elif bits == 16:
        x = np.frombuffer(raw, "<i2") / 32768.0
    elif bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = np.where(v >= 1 << 23, v - (1 << 24), v) / float(1 << 23)
    else:
        raise AssertionError(f"unexpected WAV: tag {tag}, {bits} bits")
    info = {"tag": tag, "channels": channels, "rate": rate, "bits": bits}
    return info, x.reshape(-1, channels)


def onset_times(
    audio: np.ndarray, rate: int, threshold: float = 0.3, min_gap: float = 0.06
) -> np.ndarray:
    """Times (s) of the strongest attacks: rises of a 20-ms trailing RMS envelope, the
    largest first, at least ``min_gap`` apart, down to ``threshold`` × the largest."""
    mono = (audio.mean(axis=1) if audio.ndim == 2 else audio).astype(np.float64)
    hop, win = rate // 400, rate // 50
    c = np.concatenate([[0.0], np.cumsum(mono**2)])
    idx = np.arange(win, len(mono), hop)
    env = np.sqrt((c[idx] - c[idx - win]) / win)
    rise = np.maximum(0.0, np.diff(env))
    order = np.argsort(rise)[::-1]
    gap = int(min_gap * rate / hop)
    taken = np.zeros(len(rise), bool)
    times = []
    for i in order:
        if rise[i] < threshold * rise[order[0]]:
            break
        if not taken[max(0, i - gap) : i + gap].any():
            taken[i] = True
            times.append(idx[i] / rate)
    return np.sort(np.array(times))


def grid_fit(times: np.ndarray, bpm: float, tol: float = 0.012) -> float:
    """The share of ``times`` within ``tol`` s of the half-beat grid of ``bpm`` (from 0)."""
    grid = 30.0 / bpm
    d = np.abs(times / grid - np.round(times / grid)) * grid
    return float(np.mean(d < tol))


def assert_on_the_beat(audio: np.ndarray, rate: int, bpm: float) -> None:
    """The attacks fall on the bpm's half-beat grid, and not on a grid 6 % off."""
    times = onset_times(audio, rate)
    assert len(times) >= 8, times
    assert grid_fit(times, bpm) >= 0.7, (bpm, times)
    assert grid_fit(times, bpm * 1.06) <= 0.3 and grid_fit(times, bpm * 0.94) <= 0.3


def started_engine(folder: Path) -> EngineProcess:
    """A Sketch engine on a free port with its models under ``folder``, ready."""
    from cantor_desktop.sketch import ensure_sketch_models
    from support.procs import free_port

    models = folder / "models"
    ensure_sketch_models(models)
    engine = EngineProcess(models, free_port(), folder / "engine.log")
    engine.wait_ready()
    return engine
