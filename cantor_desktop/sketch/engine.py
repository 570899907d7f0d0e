"""The sketch engine's core: model registry, job store, the single FIFO worker."""

from __future__ import annotations

import os
import queue
import random
import secrets
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .. import gguf
from . import SKETCH_DATE, SKETCH_VERSION, lm, music
from .log import EngineLog
from .options import Options
from .request import (LM_MODES, MAX_TRACKS, SYNTH_DEFAULT_DURATION, is_instrumental,
                      time_signature)

KEEP_JOBS = 32
RESULT_BUDGET = 1 << 30         # bytes of finished results kept (the newest always is)
LABEL = {"lm": "LM", "text-enc": "Text-Enc", "dit": "DiT", "vae": "VAE"}
SKETCH_STEPS = 8                # the sketch behaves like a turbo model: 8 steps by default


class Fatal(SystemExit):
    """The whole process must end (ace-server exits on a missing device)."""


class JobFailed(Exception):
    """The job ends ``failed``; the reason has already been logged."""


class Cancelled(Exception):
    pass


# ---------------------------------------------------------------- registry

class Registry:
    """The *.gguf files directly in the models folder, by kind, sorted by name."""

    def __init__(self, directory: Path, log: EngineLog):
        self.directory = directory
        self.by_kind: dict[str, list[str]] = {k: [] for k in LABEL}
        self.adapters: list[str] = []       # --adapters: noted, never applied
        log(f"[Server] Scanning models in {directory}")
        try:
            files = sorted(p for p in directory.iterdir()
                           if p.suffix == ".gguf" and p.is_file())
        except OSError:
            files = []
        for p in files:
            try:
                arch = gguf.read_architecture(p)
            except gguf.GGUFError as e:
                log(f"[Registry] WARNING: skipping {p.name}: {e}")
                continue
            kind = gguf.KIND_BY_ARCH.get(arch)
            if kind is None:
                log(f"[Registry] WARNING: skipping {p.name}: unknown architecture '{arch}'")
                continue
            self.by_kind[kind].append(p.name)
            log(f"[Registry] {p.name} -> {LABEL[kind]}")

    @property
    def empty(self) -> bool:
        return not any(self.by_kind.values())

    @property
    def has_synth(self) -> bool:
        return all(self.by_kind[k] for k in ("dit", "text-enc", "vae"))

    @property
    def has_lm(self) -> bool:
        return bool(self.by_kind["lm"])

    def pick(self, kind: str, name: str) -> str | None:
        names = self.by_kind[kind]
        if not name:
            return names[0] if names else None
        return name if name in names else None

    def summary(self) -> str:
        b = self.by_kind
        return (f"{len(b['lm'])} LM, {len(b['text-enc'])} Text-Enc, {len(b['dit'])} DiT, "
                f"{len(b['vae'])} VAE, {len(self.adapters)} Adapter")


# ---------------------------------------------------------------- jobs

@dataclass
class Job:
    id: str
    kind: str                               # "lm" or "synth"
    requests: list[dict]
    status: str = "running"                 # queued jobs say running too, like ace-server
    result: list[bytes] = field(default_factory=list)     # the body, in pieces
    content_type: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def result_size(self) -> int:
        return sum(len(p) for p in self.result)


class Engine:
    def __init__(self, opts: Options, registry: Registry, log: EngineLog):
        self.opts, self.registry, self.log = opts, registry, log
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.queue: queue.Queue[Job] = queue.Queue()
        self.loaded: dict[str, str] = {}        # label -> file name
        self.stopping = threading.Event()
        self.worker = threading.Thread(target=self._work, name="sketch-worker", daemon=True)

    # ------------------------------------------------------------ the store

    def submit(self, kind: str, requests: list[dict]) -> Job:
        """Create a job (requests already validated) and log its creation line. The caller
        answers the request, then :meth:`enqueue` s it — so the id is out before the worker
        can touch it (a fatal device error must not swallow the answer)."""
        with self.lock:
            job_id = secrets.token_hex(8)
            while job_id in self.jobs:
                job_id = secrets.token_hex(8)
            job = self.jobs[job_id] = Job(job_id, kind, requests)
            self._evict()
        if kind == "lm":
            mode = LM_MODES[requests[0]["lm_mode"]]
            self.log(f"[Server] Job {job_id} created (LM, mode={mode})")
        else:
            self.log(f"[Server] Job {job_id} created ({len(requests)} requests)")
        return job

    def enqueue(self, job: Job) -> None:
        self.queue.put(job)

    def _evict(self, keep: str = "") -> None:
        """Keep the last 32 jobs, evicting finished ones oldest first; also evict old results
        while they hold more than RESULT_BUDGET bytes (long songs are large), never ``keep``."""
        finished = [j for j in self.jobs.values() if j.status != "running" and j.id != keep]
        over = len(self.jobs) - KEEP_JOBS
        held = sum(j.result_size for j in self.jobs.values())
        for job in finished:
            if over <= 0 and held <= RESULT_BUDGET:
                break
            del self.jobs[job.id]
            over -= 1
            held -= job.result_size

    def get(self, job_id: str) -> Job | None:
        with self.lock:
            return self.jobs.get(job_id)

    def cancel(self, job: Job) -> str:
        with self.lock:
            if job.status != "running":
                return job.status
            job.status = "cancelled"
            job.cancel.set()
        self.log(f"[Server] Cancel requested for job {job.id}")
        return "cancelled"

    # ------------------------------------------------------------ the worker

    def start(self) -> None:
        self.worker.start()

    def stop(self) -> None:
        """Let the running job finish; queued jobs are discarded."""
        self.stopping.set()
        self.worker.join()

    def _work(self) -> None:
        while not self.stopping.is_set():
            try:
                job = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if self.stopping.is_set():
                break
            if job.cancel.is_set():
                continue
            try:
                if job.kind == "lm":
                    body, ctype, n = self._run_lm(job)
                    done = f"[Server] Job {job.id} done (LM, {n} results)"
                else:
                    body, ctype, n = self._run_synth(job)
                    done = f"[Server] Job {job.id} done ({n} tracks)"
                with self.lock:
                    if job.status == "running":
                        job.result, job.content_type, job.status = body, ctype, "done"
                        self._evict(keep=job.id)
                self.log(done)
            except Cancelled:
                pass
            except JobFailed:
                self._fail(job)
            except Fatal as e:
                os._exit(int(e.code or 1))
            except Exception as e:          # a bug must not take the server down
                self.log(f"[Server] ERROR: job {job.id}: {type(e).__name__}: {e}")
                self._fail(job)
            finally:
                if not self.opts.keep_loaded:
                    self._unload_all()

    def _fail(self, job: Job) -> None:
        with self.lock:
            if job.status == "running":
                job.status = "failed"

    # ------------------------------------------------------------ loading

    def _backend(self, label: str) -> None:
        want = os.environ.get("GGML_BACKEND", "").strip()
        if want and want.upper() != "CPU":
            self.log(f"[Load] FATAL: GGML_BACKEND={want} not found. Available: CPU")
            raise Fatal(1)
        self.log(f"[Load] {label} backend: CPU (CPU threads: 1)")

    def _load(self, label: str, name: str) -> None:
        if self.loaded.get(label) == name:
            return
        if label in self.loaded:
            self._unload(label)
        t0 = time.perf_counter()
        path = self.registry.directory / name
        if label == "LM":
            self.log(f"[Ace-LM] Ready: path={path}, max_seq={self.opts.max_seq}, "
                     f"max_batch={self.opts.max_batch}, fa=yes, fsm=yes")
        if label in ("LM", "DiT"):
            self._backend(label)
        try:
            meta = gguf.read_metadata(path)
        except gguf.GGUFError as e:
            self.log(f"[{label}-Load] FATAL: cannot load {name}: {e}")
            raise JobFailed from None
        if label == "LM" and meta.get("general.architecture") != "acestep-lm":
            self.log(f"[LM-Load] FATAL: cannot load {name}")
            raise JobFailed
        self.loaded[label] = name
        self.log(f"[Store] Load {label}: {(time.perf_counter() - t0) * 1000:.0f} ms")

    def _unload(self, label: str) -> None:
        name = self.loaded.pop(label, None)
        if name is None:
            return
        try:
            size = (self.registry.directory / name).stat().st_size / 1e6
        except OSError:
            size = 0.0
        self.log(f"[Store] Unload {label} ({size:.1f} MB)")

    def _unload_all(self) -> None:
        for label in list(self.loaded):
            self._unload(label)

    # ------------------------------------------------------------ /lm

    def _run_lm(self, job: Job) -> tuple[bytes, str, int]:
        import json

        req = job.requests[0]
        name = self.registry.pick("lm", req["lm_model"])
        if name is None:
            self.log(f"[LM-Load] FATAL: cannot load {req['lm_model']}")
            raise JobFailed
        self._load("LM", name)
        seed = req["lm_seed"] if req["lm_seed"] >= 0 else (
            req["seed"] if req["seed"] >= 0 else random.randrange(2**31))
        results = lm.run_lm(req, seed)
        if not is_instrumental(req["lyrics"]) or req["lm_mode"] == "inspire":
            self.log(f"[LM-Phase1] Step 1, {len(results)} active, 0.0 tok/s")
        codes = sum(r.get("audio_codes", "").count("<|audio_code_") for r in results)
        if codes:
            from .log import lm_request_dump
            for line in lm_request_dump(results[0], len(results)):
                self.log(line)
            self.log(f"[LM-Phase2] max_tokens: {codes}, CFG: {req['lm_cfg_scale']:.2f}, "
                     f"seeds: {seed}..{seed + len(results) - 1}")
            for step in range(50, codes, 50):
                if job.cancel.is_set():
                    raise Cancelled
                self.log(f"[LM-Phase2] Step {step}, {len(results)} active, "
                         f"{step} total codes, 0.0 tok/s")
            self.log(f"[LM-Phase2] Step {codes}, 0 active, {codes} total codes, 0.0 tok/s")
        return [json.dumps(results).encode()], "application/json", len(results)

    # ------------------------------------------------------------ /synth

    def _run_synth(self, job: Job) -> tuple[bytes, str, int]:
        from . import encode, render
        from .log import vae_lines

        first = job.requests[0]
        dit = self.registry.pick("dit", first["synth_model"])
        if dit is None:
            self.log(f"[Server] DiT not found: {first['synth_model']}")
            raise JobFailed
        vae = self.registry.pick("vae", first["vae"])
        if first["vae"] and vae is None:
            self.log(f"[Server] VAE not found: {first['vae']}")
            raise JobFailed
        text_enc = self.registry.pick("text-enc", "")
        if vae is None or text_enc is None:
            self.log("[Server] Missing Text-Enc or VAE in registry")
            raise JobFailed
        adapter = str(first.get("adapter") or "")
        if adapter and adapter not in self.registry.adapters:
            self.log(f"[Server] Adapter not found: {adapter}")
            raise JobFailed
        self.log(f"[Server] Loading synth: DiT={dit} VAE={vae}"
                 + (f" Adapter={adapter}" if adapter else ""))
        if adapter:
            scale = first.get("adapter_scale", 1.0)
            scale = float(scale) if isinstance(scale, (int, float)) else 1.0
            self.log(f"[Adapter] {adapter}: scale={scale:.2f} noted (the sketch plays its own "
                     f"arrangement; adapters change nothing)")
        self._load("DiT", dit)
        self._load("Text-Enc", text_enc)
        self._load("VAE", vae)

        tracks = expand_tracks(job.requests)
        steps = first["inference_steps"] if first["inference_steps"] > 0 else SKETCH_STEPS
        steps = max(1, min(200, steps))
        guidance = first["guidance_scale"] or 1.0
        shift = first["shift"] or 3.0
        renderers = []
        for req, seed in tracks:
            song = song_from_request(req, seed)
            self.log(f"[Resolve-T] seed={seed}, steps={steps}, guidance={guidance:.1f}, "
                     f"shift={shift:.1f}, duration={song.duration:.1f}s")
            renderers.append(render.Renderer(song, steps))
        for k in range(steps):
            if job.cancel.is_set():
                self.log(f"[DiT] Cancelled at step {k + 1}/{steps}")
                raise Cancelled
            s = 1.0 - k / steps
            t = shift * s / (1 + (shift - 1) * s)
            for r in renderers:
                r.step(k)
            self.log(f"[DiT] Step {k + 1}/{steps} t={t:.3f}")
        parts = []
        for (req, _), r in zip(tracks, renderers):
            if job.cancel.is_set():
                raise Cancelled
            before, after = vae_lines(r.total)
            for line in before:
                self.log(line)
            fmt = req["output_format"]
            audio = render.master(r.finish(), normalise=fmt != "wav32")
            latent = render.latent(audio)
            for line in after:
                self.log(line)
            if fmt == "mp3":
                self.log(f"[MP3] Encoding {len(audio) / render.SR:.1f}s at "
                         f"{req['mp3_bitrate']} kbps")
                try:
                    data = encode.mp3_bytes(audio, req["mp3_bitrate"])
                except encode.EncodeError as e:
                    self.log(f"[MP3] ERROR: {e}")
                    raise JobFailed from None
                ctype = "audio/mpeg"
            else:
                data, ctype = encode.wav_pieces(audio, fmt), "audio/wav"
            parts.append((data, ctype, latent.astype("<f4").tobytes()))
            r.buf = audio = None                        # free the render buffer now
        return (encode.multipart_pieces(parts), f"multipart/mixed; boundary={encode.BOUNDARY}",
                len(parts))

    def props(self) -> dict:
        from .request import DEFAULTS
        b = self.registry.by_kind
        return {
            "version": f"{SKETCH_VERSION} ({SKETCH_DATE})",
            "models": {"lm": b["lm"], "embedding": b["text-enc"], "dit": b["dit"],
                       "vae": b["vae"]},
            "adapters": list(self.registry.adapters),
            "cli": {"max_batch": self.opts.max_batch},
            "default": dict(DEFAULTS),
            "presets": {"turbo": {"inference_steps": 8, "guidance_scale": 1.0, "shift": 3.0},
                        "sft": {"inference_steps": 50, "guidance_scale": 1.0, "shift": 1.0}},
        }


# ---------------------------------------------------------------- requests -> songs

def expand_tracks(requests: list[dict]) -> list[tuple[dict, int]]:
    """(request, seed) per track: an array is one track per element; ``synth_batch_size``
    > 1 gives that many tracks with seeds seed, seed+1, …; at most 9 tracks."""
    out = []
    for req in requests:
        base = req["seed"] if req["seed"] >= 0 else random.randrange(2**31)
        for i in range(max(1, req["synth_batch_size"])):
            out.append((req, base + i))
    return out[:MAX_TRACKS]


def song_from_request(req: dict, seed: int):
    """What the request asks for; the caption fills what is unset, then the seed."""
    from .render import Song

    rng = random.Random(seed)
    caption = req["caption"]
    bpm = req["bpm"] if req["bpm"] > 0 else (lm.caption_bpm(caption) or rng.randrange(84, 133, 4))
    ts = time_signature(req["timesignature"] or lm.caption_time_signature(caption) or "4")
    key = music.parse_key(req["keyscale"]) or music.find_key(caption)
    if key is None:
        key = (rng.randrange(12), rng.random() < 0.4)
    duration = req["duration"] if req["duration"] > 0 else SYNTH_DEFAULT_DURATION
    lyrics = "" if is_instrumental(req["lyrics"]) else req["lyrics"]
    codes = req.get("audio_codes") or ""
    return Song(bpm=max(30, min(300, int(bpm))), beats_per_bar=ts, tonic=key[0], minor=key[1],
                duration=float(max(1.0, min(600.0, duration))), seed=seed, lyrics=lyrics,
                melody_seed=zlib.crc32(codes.encode()) if codes else None, caption=caption)
