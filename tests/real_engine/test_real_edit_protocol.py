"""The Sketch's multipart /synth, /understand and /vae against the real ace-server: the same
requests, the same answers (status and error text) and the same lines logged for what they
received. Both run on one folder of header-only models, so the real engine can answer every
request but render nothing (its jobs then fail or end the process: only the answers and the
handler's lines are compared)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from support.procs import free_port, stop, wait_until
from real_build import binary, needs_real_engine, libs_dir

from cantor_desktop.system.selfexec import self_argv
from cantor_desktop.sketch import ensure_sketch_models
from cantor_desktop.sketch.encode import wav_bytes

pytestmark = needs_real_engine


class Server:
    def __init__(self, argv: list[str], models: Path, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        env = {**os.environ, "LD_LIBRARY_PATH": str(libs_dir())}
        env.pop("GGML_BACKEND", None)
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            argv + ["--models", str(models), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env=env,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError(f"{argv[0]} did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace")

    def post(self, path: str, req: dict | None = None, raw: str | None = None, **files):
        form = {}
        if req is not None or raw is not None:
            form["request"] = (None, raw if raw is not None else json.dumps(req))
        form.update(files)
        r = httpx.post(
            self.url + path, files=form or None, content=None if form else b"{}", timeout=30
        )
        return r.status_code, r.json()

    def stop(self) -> None:
        stop(self.proc)
        self._log.close()


@pytest.fixture
def models(tmp_path) -> Path:
    folder = tmp_path / "models"
    ensure_sketch_models(folder)  # header-only LM, DiT, Text-Enc and VAE
    return folder


def both(models: Path, tmp_path: Path):
    real = Server([str(binary())], models, tmp_path / "real.log")
    sketch = Server(self_argv("sketch-server"), models, tmp_path / "sketch.log")
    return real, sketch


LATENT = np.zeros((50, 64), dtype="<f4").tobytes()
WAV = wav_bytes(np.zeros((48000 * 2, 2), dtype=np.float32), "wav16")
REPAINT = {
    "caption": "x",
    "task_type": "repaint",
    "repainting_start": 0.5,
    "repainting_end": 1.5,
    "output_format": "wav16",
}


def test_the_same_refusals(models, tmp_path):
    real, sketch = both(models, tmp_path)
    cases = [
        ("/synth", dict(req=None, src_latents=("a.f32", LATENT))),
        ("/synth", dict(raw="{nope", src_latents=("a.f32", LATENT))),
        ("/synth", dict(req=REPAINT, src_latents=("a.f32", b"\0" * 100))),
        ("/synth", dict(req=REPAINT, src_latents=("a.f32", b"\0" * (256 * 15001)))),
        ("/synth", dict(req=REPAINT, ref_latents=("r.f32", b"\0" * 300))),
        ("/synth", dict(req=REPAINT, audio=("a.wav", b""))),
        ("/synth", dict(req=REPAINT, audio=("a.wav", b"MZ\x90\x00" + b"\0" * 500))),
        ("/synth", dict(req={**REPAINT, "caption": ""}, src_latents=("a.f32", LATENT))),
        ("/synth", dict(req={**REPAINT, "output_format": "wav"}, src_latents=("a.f32", LATENT))),
        ("/understand", dict(req={})),
        ("/understand", dict(raw="[1]", audio=("a.wav", WAV))),
        ("/understand", dict(req={}, src_latents=("a.f32", b"\0" * 100))),
        ("/vae", dict(req={})),
        ("/vae", dict(req={}, audio=("a.wav", WAV), src_latents=("a.f32", LATENT))),
        ("/vae", dict(req={}, audio=("a.wav", b"RIFF1234WAVEjunk"))),
        ("/vae", dict(req={"output_format": "flac"}, src_latents=("a.f32", LATENT))),
    ]
    try:
        for path, kw in cases:
            got, want = sketch.post(path, **kw), real.post(path, **kw)
            assert got == want, (path, kw, want)
        for path in ("/understand", "/vae"):  # not multipart
            a = httpx.post(real.url + path, json={}).json()
            b = httpx.post(sketch.url + path, json={}).json()
            assert a == b, path
    finally:
        real.stop()
        sketch.stop()


@pytest.mark.parametrize(
    "path, kw, line",
    [
        (
            "/synth",
            dict(req=REPAINT, src_latents=("a.f32", LATENT), audio=("a.wav", WAV)),
            (
                "[Server] Source latents: 50 frames (2.00s), VAE encode skipped",
                "[Server] Source audio: 2.00s @ 48kHz",
            ),
        ),
        (
            "/synth",
            dict(req=REPAINT, ref_latents=("r.f32", LATENT), ref_audio=("r.wav", b"junk")),
            (
                "[Server] Reference latents: 50 frames (2.00s), VAE encode skipped",
                "[Server] WARNING: failed to decode ref_audio, ignoring",
            ),
        ),
        (
            "/understand",
            dict(req={}, src_latents=("a.f32", LATENT)),
            ("[Server] Understand source: 50 latent frames (2.00s)",),
        ),
        (
            "/understand",
            dict(req=None, audio=("a.wav", WAV)),
            ("[Server] Understand source: 2.00s @ 48kHz",),
        ),
        ("/vae", dict(req=None, audio=("a.wav", WAV)), ("created (vae encode, 2.00s audio)",)),
        (
            "/vae",
            dict(req={"output_format": "wav16"}, src_latents=("a.f32", LATENT)),
            ("created (vae decode, 50 latent frames)",),
        ),
    ],
)
def test_the_same_acceptance_and_lines(models, tmp_path, path, kw, line):
    """Both accept the request and log the same line for it. The real engine's stderr goes
    through a pipe its own thread reads, and that thread sometimes stops passing lines on
    (lines lost in 10-35 % of probes, as cantor_desktop/install/trial.py says), and with
    header-only weights it can crash on the job before it answers: such a real engine is
    started again, up to three times; the Sketch must accept and show its line always."""
    missing = []
    for attempt in range(3):
        run = tmp_path / f"try{attempt}"
        run.mkdir()
        real, sketch = both(models, run)
        try:
            try:
                a = real.post(path, **kw)
            except httpx.TransportError as exc:
                # header-only weights: the real engine's worker can crash on the job before
                # its HTTP thread has sent the answer; a fresh engine is asked again
                missing.append(
                    f"the real engine hung up: {exc}; its log ends: {real.log()[-300:]!r}"
                )
                continue
            b = sketch.post(path, **kw)
            assert a[0] == b[0] == 200 and set(a[1]) == set(b[1]) == {"id"}
            for text in line:
                wait_until(lambda: text in sketch.log(), f"{text!r} in the Sketch's log")
            try:
                for text in line:
                    wait_until(
                        lambda: text in real.log(), f"{text!r} in the real engine's log", timeout=15
                    )
                return
            except AssertionError as exc:
                missing.append(f"{exc}; its log ends: {real.log()[-300:]!r}")
        finally:
            real.stop()
            sketch.stop()
    raise AssertionError("\n".join(missing))
