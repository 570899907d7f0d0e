"""A scriptable stand-in for ace-server, run as a real process on a real port (stdlib only).

It takes ace-server's command line, classifies ``*.gguf`` files by their header, answers the
job protocol (``/health``, ``/props``, ``/lm``, ``/synth``, ``/job``, ``/logs``) with a FIFO
worker, and prints ace-server's log lines (in the formats of
``tests/fixtures/ace_server_recorded.txt``) to stderr. Tests steer it with
``SCRIPTED_ENGINE`` — JSON text, or a path to a JSON file:

    boundary      multipart boundary of /synth results (default "ace-batch-boundary")
    synth_body    "multipart" (default) | "multipart-no-latent" | "raw" (old servers: one track
                  as a raw audio/wav body)
    error         {"/synth": [status, "message"]}: answer that endpoint with an error body
    fail          {"/synth": ["line", ...]}: the job prints these lines, then ends "failed"
    fatal         {"/lm": {"lines": [...], "code": 1}}: the job prints lines, the process exits
    exit_at_start {"lines": [...], "code": 1}: print and exit before listening
    never_ready   true: print the start-up lines but never answer HTTP
    dit_steps     diffusion steps (default 8); step_delay seconds per step (default 0.005)
    lm_delay      seconds per LM progress line (default 0.002)
    lm_result     a fixed /lm result array (default: the request enriched like the real LM)
    submit_delay  seconds between queueing a job and answering its POST
    record        a file: every accepted /lm and /synth body is appended as a JSON line
    fail_lines_after  true: print the fail lines only after the job is already "failed"
    devices       the devices it has (default "CPU"): an LM job asking GGML_BACKEND for
                  another prints "[Load] FATAL: GGML_BACKEND=X not found. Available: …" and
                  the process exits 1, as ace-server does
    header_only   true: the models have no weights, like a trial's probe model: the LM
                  job prints the device line, then "[GGUF] FATAL: tensor … not found", exit 1
    drop_last_lines  N: lines are written N behind, and the last N before an exit are lost
                  (the real engine loses its last lines: its stderr goes through a thread)
    cut_last_line true (with drop_last_lines): half of the first lost line still arrives,
                  without its newline
    drop_runs     only the first K processes lose lines (counted in ``runs_file``)
    skip_entry    true: every synth job prints a "[Resolve-T] ERROR: … skipping" line (the
                  real engine goes on after it) and a "[DiT] WARNING: … not found" line
    dying_404     seconds: a fatal exit first forgets every job and keeps answering (404
                  "Job not found") this long, as the real engine does while it exits

Lines follow the real binary's formats (tests/fixtures/ace_server_*.txt): the LM prints
the request it got back as YAML after "[LM-Phase2] N=1, CoT[0]:"; a song up to 40.96 s
(1024 latent frames) is decoded in one piece ("[VAE] Decoded: …"), a longer one in tiles.

    python scripted_engine.py --models DIR [--host H] [--port P] [--keep-loaded]
                              [--adapters DIR]
"""

from __future__ import annotations

import json
import math
import os
import queue
import secrets
import signal
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

VERSION = "scripted0 (2026-07-21)"
KINDS = {
    "acestep-lm": "LM",
    "acestep-dit": "DiT",
    "acestep-text-enc": "Text-Enc",
    "acestep-vae": "VAE",
}
FORMATS = ("mp3", "wav16", "wav24", "wav32")
LM_MODES = ("generate", "inspire", "format")
SAMPLE_RATE = 48000


def write_gguf(path: Path, architecture: str) -> Path:
    """A header-only GGUF (v3, no tensors, one key: general.architecture)."""
    key = b"general.architecture"
    value = architecture.encode()
    data = (
        b"GGUF"
        + struct.pack("<I", 3)
        + struct.pack("<q", 0)
        + struct.pack("<q", 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<I", 8)
        + struct.pack("<Q", len(value))
        + value
    )
    Path(path).write_bytes(data)
    return Path(path)


def read_architecture(path: Path) -> str | None:
    try:
        data = path.read_bytes()[:4096]
        if data[:4] != b"GGUF":
            return None
        _, _, n_kv = struct.unpack_from("<Iqq", data, 4)
        pos = 24
        for _ in range(n_kv):
            (klen,) = struct.unpack_from("<Q", data, pos)
            key = data[pos + 8 : pos + 8 + klen].decode()
            pos += 8 + klen
            (vtype,) = struct.unpack_from("<I", data, pos)
            pos += 4
            if vtype != 8:
                return None
            (vlen,) = struct.unpack_from("<Q", data, pos)
            value = data[pos + 8 : pos + 8 + vlen].decode()
            pos += 8 + vlen
            if key == "general.architecture":
                return value
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


# -- log ----------------------------------------------------------------------------------------

_LOG: list[str] = []  # the last 512 lines, replayed by /logs
_LOG_TOTAL = [0]  # lines printed so far
_LOG_COND = threading.Condition()
_HELD: list[str] = []  # drop_last_lines: written this many lines behind
_DROP = [0, False]  # [N, cut the first lost line]


def say(line: str) -> None:
    with _LOG_COND:
        _HELD.append(line)
        try:
            while len(_HELD) > _DROP[0]:
                sys.stderr.write(_HELD.pop(0) + "\n")
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):
            # whoever read stderr is gone: the line is lost and the work goes on, as with
            # ace-server (its job runs on after its node died, until it ends or is killed)
            pass
    with _LOG_COND:
        _LOG.append(line)
        del _LOG[:-512]
        _LOG_TOTAL[0] += 1
        _LOG_COND.notify_all()


def exit_now(code: int) -> None:
    """The process ends here; with drop_last_lines its last lines never arrive (one may be
    cut in half)."""
    with _LOG_COND:
        if _HELD and _DROP[1]:
            sys.stderr.write(_HELD[0][: max(1, len(_HELD[0]) // 2)])
        sys.stderr.flush()
        os._exit(code)


def cot_yaml(req: dict) -> list[str]:
    """The request as the LM prints it back (sorted keys; the caption wrapped past column 80,
    continuation lines indented two spaces)."""
    text = ""
    if int(req.get("bpm") or 0) > 0:
        text += f"bpm: {int(req['bpm'])}\n"
    caption = str(req.get("caption") or "")
    if caption:
        text, col = text + "caption:", len("caption:")
        for word in caption.split(" "):
            if col > 80:
                text, col = text + "\n  ", 2
            else:
                text, col = text + " ", col + 1
            text, col = text + word, col + len(word)
        text += "\n"
    if float(req.get("duration") or 0) > 0:
        text += f"duration: {int(float(req['duration']))}\n"
    for key, name in (
        ("keyscale", "keyscale"),
        ("vocal_language", "language"),
        ("timesignature", "timesignature"),
    ):
        if req.get(key):
            text += f"{name}: {req[key]}\n"
    return text.splitlines()


# -- audio --------------------------------------------------------------------------------------


def wav_bytes(fmt: str, seconds: float = 0.05, freq: float = 440.0) -> bytes:
    """A real 48 kHz stereo WAV (44-byte header) in the engine's formats."""
    n = int(SAMPLE_RATE * seconds)
    samples = [0.5 * math.sin(2 * math.pi * freq * i / SAMPLE_RATE) for i in range(n)]
    if fmt == "wav32":
        tag, bits = 3, 32
        frames = b"".join(struct.pack("<ff", s, s) for s in samples)
    elif fmt == "wav24":
        tag, bits = 1, 24
        frames = b"".join(int(s * 8388607).to_bytes(3, "little", signed=True) * 2 for s in samples)
    else:
        tag, bits = 1, 16
        frames = b"".join(struct.pack("<hh", int(s * 32767), int(s * 32767)) for s in samples)
    block = 2 * bits // 8
    header = (
        b"RIFF"
        + struct.pack("<I", 36 + len(frames))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, tag, 2, SAMPLE_RATE, SAMPLE_RATE * block, block, bits)
        + b"data"
        + struct.pack("<I", len(frames))
    )
    return header + frames


# -- the engine ---------------------------------------------------------------------------------


class Engine:
    def __init__(self, script: dict, models: dict[str, list[str]], keep_loaded: bool):
        self.script = script
        self.models = models
        self.keep_loaded = keep_loaded
        self.jobs: dict[str, dict] = {}
        self.order: list[str] = []
        self.lock = threading.Lock()
        self.queue: queue.Queue = queue.Queue()
        self.busy = threading.Event()
        threading.Thread(target=self._worker, daemon=True).start()

    def add_job(self, kind: str, body) -> str:
        job_id = secrets.token_hex(8)
        with self.lock:
            self.jobs[job_id] = {
                "status": "running",
                "kind": kind,
                "body": body,
                "cancel": False,
                "result": None,
                "type": None,
            }
            self.order.append(job_id)
            finished = [j for j in self.order if self.jobs[j]["status"] != "running"]
            while len(self.order) > 32 and finished:
                old = finished.pop(0)
                self.order.remove(old)
                del self.jobs[old]
        if kind == "lm":
            say(
                f"[Server] Job {job_id} created (LM, mode={LM_MODES.index(body.get('lm_mode', 'generate'))})"
            )
        else:
            say(f"[Server] Job {job_id} created ({len(body)} requests)")
        self.queue.put(job_id)
        return job_id

    def _worker(self) -> None:
        while True:
            job_id = self.queue.get()
            with self.lock:
                job = self.jobs.get(job_id)
                if job is None or job["status"] != "running":
                    continue
                if job["cancel"]:  # cancelled while queued: ends when its turn comes
                    job["status"] = "cancelled"
                    continue
            self.busy.set()
            try:
                self._run(job_id, job)
            finally:
                self.busy.clear()
                with self.lock:  # the cancel lands when the job notices it
                    if job["cancel"] and job["status"] == "running":
                        job["status"] = "cancelled"

    def _finish(self, job: dict, status: str, result=None, ctype=None) -> None:
        with self.lock:
            if job["status"] == "running":
                # a cancel that came during the job's last stretch still ends it cancelled
                job["status"] = "cancelled" if job["cancel"] else status
                job["result"], job["type"] = result, ctype

    def _scripted_failure(self, job: dict, endpoint: str) -> bool:
        fatal = self.script.get("fatal", {}).get(endpoint)
        if fatal:
            for line in fatal.get("lines", []):
                say(line)
            if self.script.get("dying_404"):
                with self.lock:
                    self.jobs.clear()
                time.sleep(float(self.script["dying_404"]))
            exit_now(int(fatal.get("code", 1)))
        lines = self.script.get("fail", {}).get(endpoint)
        if lines is None:
            return False
        if self.script.get("fail_lines_after"):
            self._finish(job, "failed")
            time.sleep(0.1)
            for line in lines:
                say(line)
        else:
            for line in lines:
                say(line)
            self._finish(job, "failed")
        return True

    def _run(self, job_id: str, job: dict) -> None:
        if job["kind"] == "lm":
            self._run_lm(job_id, job)
        else:
            self._run_synth(job_id, job)

    def _run_lm(self, job_id: str, job: dict) -> None:
        req = job["body"]
        say(
            "[Ace-LM] Ready: path=" + self.models["LM"][0] + ", max_seq=8192, max_batch=1, "
            "fa=yes, fsm=yes"
        )
        devices = str(self.script.get("devices", "CPU")).split(",")
        want = os.environ.get("GGML_BACKEND") or devices[0]
        if want not in devices:
            say(f"[Load] FATAL: GGML_BACKEND={want} not found. Available: {', '.join(devices)}")
            exit_now(1)
        say(f"[Load] LM backend: {want} (CPU threads: 1)")
        if self.script.get("header_only"):
            say(f"[GGUF] {self.models['LM'][0]}: 0 tensors, data at offset 74")
            say("[LM-Config] No acestep.config_json, using 0.6B defaults")
            say("[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found")
            exit_now(1)
        say("[Store] Load LM: 12 ms")
        if self._scripted_failure(job, "/lm"):
            return
        delay = float(self.script.get("lm_delay", 0.002))
        for step in (100, 200):
            time.sleep(delay)
            say(f"[LM-Phase1] Step {step}, 1 active, 55.0 tok/s")
        duration = float(req.get("duration") or 30.0)
        codes = int(duration * 5)
        seed = int(req.get("lm_seed", -1))
        seed = seed if seed >= 0 else 1234
        say("[LM-Phase2] N=1, CoT[0]:")
        for line in cot_yaml({**req, "duration": duration}):
            say(line)
        say(f"[LM-Phase2] max_tokens: {codes + 100}, CFG: 2.00, seeds: {seed}..{seed}")
        for step in range(50, codes + 1, 50):
            if job["cancel"]:
                return
            time.sleep(delay)
            say(f"[LM-Phase2] Step {step}, 1 active, {step} total codes, 80.0 tok/s")
        say("[LM-Phase2] Decode 9ms")
        say(f"[LM-Phase2 Batch0] seed={seed}, {codes} codes")
        if not self.keep_loaded:
            say("[Store] Unload LM (700.0 MB)")
        result = self.script.get("lm_result")
        if result is None:
            enriched = dict(req)
            enriched.update(
                {
                    "audio_codes": ",".join(str(i % 64000) for i in range(codes)),
                    "bpm": req.get("bpm") or 120,
                    "duration": duration,
                    "keyscale": req.get("keyscale") or "A minor",
                    "timesignature": req.get("timesignature") or "4",
                    "vocal_language": req.get("vocal_language") or "en",
                    "caption": req.get("caption", "") + ", enriched by the LM",
                }
            )
            result = [enriched]
        say(f"[Server] Job {job_id} done (LM, {len(result)} results)")
        self._finish(job, "done", json.dumps(result).encode(), "application/json")

    def _run_synth(self, job_id: str, job: dict) -> None:
        requests = job["body"]
        say("[Store] Load DiT: 15 ms")
        if self._scripted_failure(job, "/synth"):
            return
        steps = int(self.script.get("dit_steps", 8))
        delay = float(self.script.get("step_delay", 0.005))
        tracks = []
        for req in requests:
            seed = int(req.get("seed", -1))
            seed = seed if seed >= 0 else 42
            duration = float(req.get("duration") or 30.0)
            if self.script.get("skip_entry"):
                say(
                    f"[Resolve-T] ERROR: T={int(duration * 25) + 15000} exceeds silence_latent "
                    f"max 15000, skipping"
                )
                say(
                    "[DiT] WARNING: guidance_scale=7.0 but null_condition_emb not found. "
                    "Disabling CFG."
                )
            say(
                f"[Resolve-T] seed={seed}, steps={steps}, guidance=1.0, shift=3.0, "
                f"duration={duration:.1f}s"
            )
            for k in range(1, steps + 1):
                if job["cancel"]:
                    say(f"[DiT] Cancelled at step {k}/{steps}")
                    return
                time.sleep(delay)
                say(f"[DiT] Step {k}/{steps} t={1 - (k - 1) / steps:.3f}")
            frames = int(round(duration * 25))
            if frames <= 1024:  # the --vae-chunk default: one piece
                say(
                    f"[VAE] Decoded: T_latent={frames} -> T_audio={frames * 1920} "
                    f"({frames * 1920 / 48000:.2f}s @ 48kHz)"
                )
            else:
                tiles = -(-frames // 896)
                say(f"[VAE] Tiled decode: {tiles} tiles (chunk=1024, overlap=64, stride=896)")
                say(
                    f"[VAE] Tiled decode done: {tiles} tiles -> T_audio={frames * 1920} "
                    f"({frames * 1920 / 48000:.2f}s @ 48kHz)"
                )
            fmt = req.get("output_format", "mp3")
            for _ in range(max(1, min(int(req.get("synth_batch_size", 1)), 9))):
                tracks.append(
                    wav_bytes(fmt if fmt != "mp3" else "wav16", freq=220 + 110 * len(tracks))
                )
        if not self.keep_loaded:
            say("[Store] Unload DiT (2550.0 MB)")
        mode = self.script.get("synth_body", "multipart")
        if mode == "raw":
            body, ctype = tracks[0], "audio/wav"
        else:
            boundary = self.script.get("boundary", "ace-batch-boundary")
            chunks = []
            for audio in tracks:
                chunks.append(
                    f"--{boundary}\r\nContent-Type: audio/wav\r\n\r\n".encode() + audio + b"\r\n"
                )
                if mode != "multipart-no-latent":
                    latent = struct.pack("<" + "f" * 64 * 4, *([0.25] * 64 * 4))
                    chunks.append(
                        f"--{boundary}\r\nContent-Type: application/octet-stream\r\n"
                        'Content-Disposition: form-data; name="latent"\r\n\r\n'.encode()
                        + latent
                        + b"\r\n"
                    )
            chunks.append(f"--{boundary}--\r\n".encode())
            body, ctype = b"".join(chunks), f"multipart/mixed; boundary={boundary}"
        say(f"[Server] Job {job_id} done ({len(tracks)} tracks)")
        self._finish(job, "done", body, ctype)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Engine

    def log_message(self, *args) -> None:  # ace-server logs no requests
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data).encode())

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if url.path == "/health":
            return self._json(200, {"status": "ok"})
        if url.path == "/props":
            e = self.engine
            return self._json(
                200,
                {
                    "version": VERSION,
                    "models": {
                        "lm": e.models["LM"],
                        "embedding": e.models["Text-Enc"],
                        "dit": e.models["DiT"],
                        "vae": e.models["VAE"],
                    },
                    "adapters": [],
                    "cli": {"max_batch": 1},
                    "default": {"caption": "", "lyrics": "", "output_format": "mp3"},
                    "presets": {
                        "turbo": {"inference_steps": 8, "guidance_scale": 1.0, "shift": 3.0},
                        "sft": {"inference_steps": 50, "guidance_scale": 1.0, "shift": 1.0},
                    },
                },
            )
        if url.path == "/job":
            return self._job(query, post=False)
        if url.path == "/logs":
            return self._logs()
        self._error(404, "Not found")

    def do_POST(self) -> None:
        url = urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if url.path == "/job":
            return self._job(parse_qs(url.query), post=True)
        if url.path not in ("/lm", "/synth"):
            return self._error(404, "Not found")
        e = self.engine
        if url.path == "/synth" and not (
            e.models["DiT"] and e.models["Text-Enc"] and e.models["VAE"]
        ):
            return self._error(501, "No synth models in registry (need dit + text-encoder + vae)")
        if url.path == "/lm" and not e.models["LM"]:
            return self._error(501, "No LM models in registry")
        scripted = e.script.get("error", {}).get(url.path)
        if scripted:
            return self._error(int(scripted[0]), str(scripted[1]))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return self._error(400, "Invalid JSON")
        requests = body if isinstance(body, list) else [body]
        if not requests or not all(isinstance(r, dict) for r in requests):
            return self._error(400, "Invalid JSON")
        if url.path == "/lm" and isinstance(body, list):
            return self._error(400, "Invalid JSON")
        for req in requests:
            if not str(req.get("caption", "")).strip():
                return self._error(400, "Caption is required")
            if req.get("lm_mode", "generate") not in LM_MODES:
                return self._error(400, "Invalid lm_mode (use: generate, inspire, format)")
            if req.get("output_format", "mp3") not in FORMATS:
                return self._error(400, "Invalid output_format (use: mp3, wav16, wav24, wav32)")
        record = e.script.get("record")
        if record:
            with open(record, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"path": url.path, "body": body}) + "\n")
        job_id = e.add_job(
            "lm" if url.path == "/lm" else "synth", body if url.path == "/lm" else requests
        )
        time.sleep(float(e.script.get("submit_delay", 0)))  # a slow answer to the POST
        self._json(200, {"id": job_id})

    def _job(self, query: dict, *, post: bool) -> None:
        job_id = (query.get("id") or [""])[0]
        if not job_id:
            return self._error(400, "Missing id parameter")
        e = self.engine
        with e.lock:
            job = e.jobs.get(job_id)
            if job is None:
                return self._error(404, "Job not found")
            if post:
                if query.get("cancel") != ["1"]:
                    return self._error(400, "Unknown action")
                if job["status"] == "running":
                    # as ace-server: the answer says cancelled, the job reads running until
                    # its worker notices (between LM tokens, DiT steps, VAE tiles)
                    say(f"[Server] Cancel requested for job {job_id}")
                    job["cancel"] = True
                    return self._json(200, {"status": "cancelled"})
                return self._json(200, {"status": job["status"]})
            if query.get("result") == ["1"]:
                if job["status"] != "done":
                    return self._error(404, "Result not ready")
                return self._send(200, job["result"], job["type"])
            return self._json(200, {"status": job["status"]})

    def _logs(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with _LOG_COND:
            sent = _LOG_TOTAL[0]
            backlog = list(_LOG)
        try:
            for line in backlog:
                self.wfile.write(f"data: {line}\n\n".encode())
            self.wfile.flush()
            while True:
                with _LOG_COND:
                    _LOG_COND.wait(1.0)
                    new = min(_LOG_TOTAL[0] - sent, len(_LOG))
                    fresh = _LOG[len(_LOG) - new :] if new > 0 else []
                    sent = _LOG_TOTAL[0]
                for line in fresh:
                    self.wfile.write(f"data: {line}\n\n".encode())
                self.wfile.flush()
        except OSError:
            return


# -- helpers for tests (import this module; it also runs as the engine) ------------------------


def engine_argv() -> list[str]:
    """The command that runs this stand-in; the supervisor appends ace-server's options."""
    return [sys.executable, str(Path(__file__).resolve())]


def make_models(folder: Path, kinds=("lm", "dit", "text-enc", "vae")) -> Path:
    """A models folder of header-only GGUFs, one per kind."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = {
        "lm": "acestep-5Hz-lm-0.6B-Q8_0.gguf",
        "dit": "acestep-v15-turbo-Q8_0.gguf",
        "text-enc": "Qwen3-Embedding-0.6B-Q8_0.gguf",
        "vae": "vae-BF16.gguf",
    }
    for kind in kinds:
        write_gguf(folder / names[kind], f"acestep-{kind}")
    return folder


class RunningEngine:
    """The stand-in as a plain child process (for client tests that need no supervisor):
    ``with RunningEngine(models, port, script, stderr_path) as engine: engine.url``."""

    def __init__(
        self,
        models: Path,
        port: int,
        script: dict | None = None,
        stderr_path: Path | None = None,
        ready_timeout: float = 10.0,
    ):
        import subprocess
        import urllib.request

        self.url = f"http://127.0.0.1:{port}"
        self.stderr_path = stderr_path
        env = {**os.environ, "SCRIPTED_ENGINE": json.dumps(script or {})}
        err = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            engine_argv() + ["--models", str(models), "--host", "127.0.0.1", "--port", str(port)],
            stderr=err,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        if stderr_path:
            err.close()
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scripted engine exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("scripted engine did not become ready")
            time.sleep(0.03)

    def stderr_text(self) -> str:
        return Path(self.stderr_path).read_text() if self.stderr_path else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> "RunningEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_script() -> dict:
    raw = os.environ.get("SCRIPTED_ENGINE", "").strip()
    if not raw:
        return {}
    if raw.startswith("{"):
        return json.loads(raw)
    return json.loads(Path(raw).read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    models_dir, host, port, keep_loaded = None, "127.0.0.1", 8080, False
    args = list(argv)
    while args:
        opt = args.pop(0)
        if opt == "--models" and args:
            models_dir = args.pop(0)
        elif opt == "--host" and args:
            host = args.pop(0)
        elif opt == "--port" and args:
            port = int(args.pop(0))
        elif opt == "--keep-loaded":
            keep_loaded = True
        elif opt == "--adapters" and args:
            args.pop(0)  # accepted, as ace-server does; this engine has none
        else:
            say(f"Unknown option: {opt}")
            say(
                "Usage: ace-server --models DIR [--keep-loaded] [--host H] [--port P] "
                "[--adapters DIR]"
            )
            return 1
    if not models_dir:
        say("[Server] ERROR: --models is required")
        return 1
    script = load_script()
    _DROP[1] = bool(script.get("cut_last_line"))
    if script.get("drop_last_lines"):
        runs = 1
        if script.get("runs_file"):
            counter = Path(script["runs_file"])
            runs = int(counter.read_text() or 0) + 1 if counter.exists() else 1
            counter.write_text(str(runs))
        if runs <= int(script.get("drop_runs", 10**9)):
            _DROP[0] = int(script["drop_last_lines"])
    start = script.get("exit_at_start")
    if start:
        for line in start.get("lines", []):
            say(line)
        exit_now(int(start.get("code", 1)))

    say(f"[Server] Scanning models in {models_dir}")
    models: dict[str, list[str]] = {"LM": [], "DiT": [], "Text-Enc": [], "VAE": []}
    for path in sorted(Path(models_dir).glob("*.gguf")):
        kind = KINDS.get(read_architecture(path) or "")
        if kind is None:
            say(f"[Registry] WARNING: skipping {path.name} (unknown architecture)")
            continue
        say(f"[Registry] {path.name} -> {kind}")
        models[kind].append(path.name)
    has_synth = models["DiT"] and models["Text-Enc"] and models["VAE"]
    if not models["LM"] and not has_synth:
        say(f"[Server] ERROR: no GGUF models found in {models_dir}")
        return 1
    say(f"[Store] Created (policy={'NEVER' if keep_loaded else 'STRICT'})")
    say(f"[Server] acestep.cpp {VERSION}")
    say(f"[Server] Listening on {host}:{port}")
    if script.get("never_ready"):
        while True:
            time.sleep(3600)
    Handler.engine = Engine(script, models, keep_loaded)
    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError:
        say(f"[Server] FATAL: cannot bind {host}:{port}")
        say("[Server] Shutting down...")
        say("[Server] Done")
        return 0
    server.daemon_threads = True
    say("[Server] Pipelines: /lm /synth /understand")
    say(
        f"[Server] Models: {len(models['LM'])} LM, {len(models['Text-Enc'])} Text-Enc, "
        f"{len(models['DiT'])} DiT, {len(models['VAE'])} VAE, 0 Adapter"
    )

    def on_term(signum, frame):
        say("[Server] Shutting down...")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.serve_forever(poll_interval=0.05)
    server.server_close()
    while Handler.engine.busy.is_set():  # let the running job finish
        time.sleep(0.02)
    say("[Server] Done")
    with _LOG_COND:  # an orderly exit writes everything
        for line in _HELD:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
