"""The sketch engine's core: the job store and the single FIFO worker (the models it
serves are in registry.py, a job and its status in jobs.py).

Jobs are those of ace-server: ``/lm``, ``/synth`` (text to music, and the edits of a source:
edit.py), ``/understand`` (listen.py) and ``/vae`` (encode audio to a latent, decode a latent
to audio: latent.py). Every /synth take comes with its latent, which carries the take's
recipe, so a later edit, stem or decode makes exactly that take again."""

from __future__ import annotations

import os
import queue
import random
import secrets
import threading
import time
import zlib

from ..models import gguf
from . import SKETCH_DATE, SKETCH_VERSION, lm, music
from .jobs import Cancelled, Incoming, Job, JobFailed, JobStatus
from .log import EngineLog
from .options import Options
from .registry import Registry
from .request import (
    LM_MODES,
    MAX_TRACKS,
    SOURCE_TASKS,
    SYNTH_DEFAULT_DURATION,
    TASKS,
    is_instrumental,
    time_signature,
)

KEEP_JOBS = 32
RESULT_BUDGET = 1 << 30  # bytes of finished results kept (the newest always is)
SKETCH_STEPS = 8  # the sketch behaves like a turbo model: 8 steps by default


class Fatal(SystemExit):
    """The whole process must end (ace-server exits on a missing device)."""


class Engine:
    def __init__(self, opts: Options, registry: Registry, log: EngineLog):
        self.opts, self.registry, self.log = opts, registry, log
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.queue: queue.Queue[Job] = queue.Queue()
        self.loaded: dict[str, str] = {}  # label -> file name
        self.stopping = threading.Event()
        self.worker = threading.Thread(target=self._work, name="sketch-worker", daemon=True)
        from .audio_in import Remembered

        self.memory = Remembered()  # the audio /vae and sources brought in

    # ------------------------------------------------------------ the store

    def submit(
        self,
        kind: str,
        requests: list[dict],
        *,
        source: Incoming | None = None,
        reference: Incoming | None = None,
    ) -> Job:
        """Create a job (requests already validated) and log its creation line. The caller
        answers the request, then :meth:`enqueue` s it — so the id is out before the worker
        can touch it (a fatal device error must not swallow the answer)."""
        with self.lock:
            job_id = secrets.token_hex(8)
            while job_id in self.jobs:
                job_id = secrets.token_hex(8)
            job = self.jobs[job_id] = Job(
                job_id, kind, requests, source=source, reference=reference
            )
            self._evict()
        if kind == "lm":
            mode = LM_MODES[requests[0]["lm_mode"]]
            self.log(f"[Server] Job {job_id} created (LM, mode={mode})")
        elif kind == "understand":
            self.log(f"[Server] Job {job_id} created (understand)")
        elif kind == "encode":
            self.log(
                f"[Server] Job {job_id} created (vae encode, "
                f"{len(job.given.audio) / 48000:.2f}s audio)"
            )
        elif kind == "decode":
            self.log(
                f"[Server] Job {job_id} created (vae decode, {len(job.given.latent)} latent frames)"
            )
        else:
            self.log(f"[Server] Job {job_id} created ({len(requests)} requests)")
        return job

    def enqueue(self, job: Job) -> None:
        self.queue.put(job)

    def _evict(self, keep: str = "") -> None:
        """Keep the last 32 jobs, evicting finished ones oldest first; also evict old results
        while they hold more than RESULT_BUDGET bytes (long songs are large), never ``keep``."""
        finished = [j for j in self.jobs.values() if j.status != JobStatus.RUNNING and j.id != keep]
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

    def cancel(self, job: Job) -> JobStatus:
        """Cancel a running job; a job that had ended keeps its status (returned)."""
        with self.lock:
            if not job.end(JobStatus.CANCELLED):
                return job.status
        self.log(f"[Server] Cancel requested for job {job.id}")
        return JobStatus.CANCELLED

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
                elif job.kind == "synth":
                    body, ctype, n = self._run_synth(job)
                    done = f"[Server] Job {job.id} done ({n} tracks)"
                else:
                    body, ctype = getattr(self, f"_run_{job.kind}")(job)
                    done = f"[Server] Job {job.id} done ({job.kind})"
                with self.lock:
                    if job.end(JobStatus.DONE, body, ctype):
                        self._evict(keep=job.id)
                self.log(done)
            except Cancelled:
                pass
            except JobFailed:
                self._fail(job)
            except Fatal as e:
                os._exit(int(e.code or 1))
            except Exception as e:  # a bug must not take the server down
                self.log(f"[Server] ERROR: job {job.id}: {type(e).__name__}: {e}")
                self._fail(job)
            finally:
                job.source = job.reference = None  # the audio is not kept with the job
                if not self.opts.keep_loaded:
                    self._unload_all()

    def _fail(self, job: Job) -> None:
        with self.lock:
            job.end(JobStatus.FAILED)

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
            self.log(
                f"[Ace-LM] Ready: path={path}, max_seq={self.opts.max_seq}, "
                f"max_batch={self.opts.max_batch}, fa=yes, fsm=yes"
            )
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

    def _run_lm(self, job: Job) -> tuple[list[bytes], str, int]:
        import json

        req = job.requests[0]
        name = self.registry.pick("lm", req["lm_model"])
        if name is None:
            self.log(f"[LM-Load] FATAL: cannot load {req['lm_model']}")
            raise JobFailed
        self._load("LM", name)
        seed = (
            req["lm_seed"]
            if req["lm_seed"] >= 0
            else (req["seed"] if req["seed"] >= 0 else random.randrange(2**31))
        )
        self._note_lm(req)
        if req["lm_mode"] == "generate" and req["audio_codes"]:
            self.log("[LM-Generate] audio_codes present, skip LM")
        results = lm.run_lm(req, seed)
        if not is_instrumental(req["lyrics"]) or req["lm_mode"] == "inspire":
            self.log(f"[LM-Phase1] Step 1, {len(results)} active, 0.0 tok/s")
        if req["lm_mode"] != "generate":
            self.log(f"[LM-Generate] {req['lm_mode']} mode, no audio code generation")
        codes = sum(r.get("audio_codes", "").count("<|audio_code_") for r in results)
        if codes:
            from .log import lm_request_dump

            for line in lm_request_dump(results[0], len(results)):
                self.log(line)
            self.log(
                f"[LM-Phase2] max_tokens: {codes}, CFG: {req['lm_cfg_scale']:.2f}, "
                f"seeds: {seed}..{seed + len(results) - 1}"
            )
            for step in range(50, codes, 50):
                if job.cancel.is_set():
                    raise Cancelled
                self.log(
                    f"[LM-Phase2] Step {step}, {len(results)} active, {step} total codes, 0.0 tok/s"
                )
            self.log(f"[LM-Phase2] Step {codes}, 0 active, {codes} total codes, 0.0 tok/s")
        return [json.dumps(results).encode()], "application/json", len(results)

    def _note_lm(self, req: dict) -> None:
        """The language model's sampling fields, as received (the Sketch's LM is rules, not
        sampling: they are noted, not used)."""
        neg = req["lm_negative_prompt"]
        self.log(
            f"[Sketch] LM fields: lm_temperature={req['lm_temperature']!r}, "
            f"lm_cfg_scale={req['lm_cfg_scale']!r}, lm_top_p={req['lm_top_p']!r}, "
            f"lm_top_k={req['lm_top_k']!r}, use_cot_caption="
            f"{'true' if req['use_cot_caption'] else 'false'}, "
            f"negative_prompt={len(neg)} chars (crc32 {zlib.crc32(neg.encode()):08x}) "
            "— noted, the Sketch's LM does not sample"
        )

    def _note_dit(self, req: dict) -> None:
        """The sampler's fields, as received (the Sketch renders notes, not noise: they are
        noted; the steps pace its work)."""
        fields = (
            "inference_steps",
            "guidance_scale",
            "shift",
            "solver",
            "stork_substeps",
            "custom_timesteps",
            "dcw_mode",
            "dcw_scaler",
            "dcw_high_scaler",
            "latent_shift",
            "latent_rescale",
            "peak_clip",
        )
        self.log(
            "[Sketch] DiT fields: " + ", ".join(f"{k}={req[k]!r}" for k in fields) + " — noted"
        )

    # ------------------------------------------------------------ /synth

    def _synth_models(self, first: dict) -> None:
        dit = self.registry.pick("dit", first["synth_model"])
        if dit is None:
            self.log(f"[Server] DiT not found: {first['synth_model']}")
            raise JobFailed
        text_enc = self.registry.pick("text-enc", "")
        if not self.registry.by_kind["vae"] or text_enc is None:
            self.log("[Server] Missing Text-Enc or VAE in registry")
            raise JobFailed
        vae = self.registry.pick("vae", first["vae"])
        if vae is None:
            self.log(f"[Server] VAE not found: {first['vae']}")
            raise JobFailed
        adapter = str(first.get("adapter") or "")
        if adapter and adapter not in self.registry.adapters:
            self.log(f"[Server] Adapter not found: {adapter}")
            raise JobFailed
        self.log(
            f"[Server] Loading synth: DiT={dit} VAE={vae}"
            + (f" Adapter={adapter}" if adapter else "")
        )
        if adapter:
            scale = first.get("adapter_scale", 1.0)
            scale = float(scale) if isinstance(scale, (int, float)) else 1.0
            self.log(
                f"[Adapter] {adapter}: scale={scale:.2f} noted (the sketch plays its own "
                f"arrangement; adapters change nothing)"
            )
        self._load("DiT", dit)
        self._load("Text-Enc", text_enc)
        self._load("VAE", vae)
        if adapter:
            self.log(f"[Synth-Load] Adapter: {adapter} (scale={first['adapter_scale']:.2f})")

    def _run_synth(self, job: Job) -> tuple[list[bytes], str, int]:
        from . import edit, encode, latent, render
        from .log import vae_lines

        first = job.requests[0]
        self._synth_models(first)
        task = first["task_type"]
        if task not in TASKS:
            self.log(f"[Synth-Run] ERROR: unknown task_type '{task}'")
            raise JobFailed
        steps = first["inference_steps"] if first["inference_steps"] > 0 else SKETCH_STEPS
        if steps > 100:
            self.log(f"[Resolve-Params] WARNING: inference_steps {steps} clamped to 100")
        steps = max(1, min(100, steps))
        guidance = first["guidance_scale"] or 1.0
        shift = first["shift"] or 3.0
        self._note_dit(first)
        ctx = edit.Context(self.memory, self.log)
        src = ref = None
        if task in SOURCE_TASKS:
            if job.source is None:
                what = "src_latents" if task in ("repaint", "lego") else "latents"
                self.log(f"[Synth-Run] ERROR: task '{task}' requires source audio or {what}")
                raise JobFailed
            src = self._source(job.source, "src")
        if job.reference is not None:
            ref = self._source(job.reference, "ref")
        tracks = expand_tracks(job.requests)
        if len(tracks) > 1:
            self.log(f"[Server] Batch: {len(tracks)} track(s) from {len(job.requests)} request(s)")
        takes = []
        for b, (req, seed) in enumerate(tracks):
            try:
                recipe = self._recipe(task, req, seed, src, ref, steps)
            except edit.EditFailed:
                raise JobFailed from None
            samples = edit.length_of(recipe)
            self.log(
                f"[Resolve-T] seed={seed}, steps={steps}, guidance={guidance:.1f}, "
                f"shift={shift:.1f}, duration={samples / render.SR:.1f}s"
            )
            self.log(
                f"[Init-Noise Batch{b}] Philox noise seed={seed}, "
                f"[{latent.frames_for(samples)}, 64] solver={req['solver']}"
            )
            takes.append((req, recipe, edit.build(recipe, ctx, steps), samples))
        renderers = [r for _, _, build, _ in takes for r in build.renderers]
        paced = self.opts.test_synth_seconds  # tests and benches only (see options)
        began = time.monotonic()
        for k in range(steps):
            if job.cancel.is_set():
                self.log(f"[DiT] Cancelled at step {k + 1}/{steps}")
                raise Cancelled
            s = 1.0 - k / steps
            t = shift * s / (1 + (shift - 1) * s)
            for r in renderers:
                r.step(k)
            if paced:
                wait = began + paced * (k + 1) / steps - time.monotonic()
                if wait > 0 and job.cancel.wait(wait):
                    self.log(f"[DiT] Cancelled at step {k + 1}/{steps}")
                    raise Cancelled
            self.log(f"[DiT] Step {k + 1}/{steps} t={t:.3f}")
        parts: list[tuple[encode.Audio, str, bytes]] = []
        for req, recipe, build, samples in takes:
            if job.cancel.is_set():
                raise Cancelled
            before, after = vae_lines(samples)
            for line in before:
                self.log(line)
            fmt = req["output_format"]
            audio = build.finish()
            lat = latent.write(recipe, latent.features(audio))
            for line in after:
                self.log(line)
            if fmt == "mp3":
                self.log(
                    f"[MP3] Encoding {len(audio) / render.SR:.1f}s at {req['mp3_bitrate']} kbps"
                )
                try:
                    data: encode.Audio = encode.mp3_bytes(audio, req["mp3_bitrate"])
                except encode.EncodeError as e:
                    self.log(f"[MP3] ERROR: {e}")
                    raise JobFailed from None
                ctype = "audio/mpeg"
            else:
                data, ctype = encode.wav_pieces(audio, fmt), "audio/wav"
            parts.append((data, ctype, latent.to_bytes(lat)))
            del audio  # free the render buffer now
        return (
            encode.multipart_pieces(parts),
            f"multipart/mixed; boundary={encode.BOUNDARY}",
            len(parts),
        )

    def _recipe(self, task: str, req: dict, seed: int, src, ref, steps: int) -> dict:
        """What one take of the job makes (edit.py)."""
        from . import edit

        if task == "text2music":
            song = song_from_request(req, seed, ref.frame.caption if ref else "")
            return edit.text2music(song, req["output_format"])
        if task in ("cover", "cover-nofsq"):
            return edit.cover(
                req,
                seed,
                src,
                ref,
                self.log,
                steps=steps,
                faithful=task == "cover-nofsq",
                fmt=req["output_format"],
            )
        if task == "repaint":
            return edit.repaint(req, seed, src, ref, self.log)
        if task == "extract":
            return edit.extract(req, src, self.log)
        if task == "lego":
            return edit.lego(req, seed, src, ref, self.log)
        return edit.complete(req, seed, src, ref, self.log)

    def _source(self, incoming: Incoming, side: str):
        """What arrived as a source (``side`` "src") or a reference ("ref"), as the Sketch
        knows it: a Sketch take's recipe from its latent, else outside audio (measured;
        a latent without a recipe plays its envelope)."""
        from . import edit, frame, latent
        from .frame import Frame

        if incoming.latent is not None:
            recipe, head = latent.read(incoming.latent)
            if (
                recipe is not None
                and recipe.get("t") == "audio"
                and self.memory.get(str(recipe.get("fp"))) is None
                and side == "src"
            ):
                # outside audio this engine no longer holds: its envelope stands in for it
                self.log(
                    f"[Sketch] WARNING: the audio of src_latents {recipe.get('fp')} is "
                    "not held by this engine (it was encoded before a restart): their "
                    "spectral envelope stands in"
                )
                self.memory.keep(
                    latent.stand_in(incoming.latent, skip=head), key=str(recipe.get("fp"))
                )
            if recipe is not None:
                try:
                    if side == "ref":
                        self.log(
                            f"[Encode-Timbre] Latents in: {len(incoming.latent)} frames "
                            f"({len(incoming.latent) / latent.FPS:.1f}s), VAE encode "
                            "skipped"
                        )
                    return edit.Source(
                        recipe, edit.frame_of(recipe), edit.length_of(recipe), "latents"
                    )
                except (KeyError, TypeError, ValueError) as e:
                    self.log(
                        f"[Sketch] WARNING: a {side} latent's recipe is unreadable "
                        f"({type(e).__name__}): its envelope stands in"
                    )
            else:
                self.log(
                    f"[Sketch] WARNING: {side}_latents carry no Sketch recipe: their "
                    "spectral envelope stands in for the audio"
                )
            audio = latent.stand_in(incoming.latent, skip=head)
            via = "latents"
        else:
            audio = incoming.audio
            via = "audio"
        if side == "ref":
            self.log(
                f"[Encode-Timbre] ref_audio: {latent.frames_for(len(audio))} frames "
                f"({len(audio) / 48000:.1f}s), 0.0 ms"
            )
            self.log(
                "[Sketch] reference: outside audio; the Sketch cannot borrow its sound "
                "(noted, not used)"
            )
            blank = Frame(bpm=120.0, beats=4, tonic=0, minor=False, duration=len(audio) / 48000)
            return edit.Source(
                {"t": "audio", "fp": "", "n": len(audio), "facts": {}}, blank, len(audio), via
            )
        fp = self.memory.keep(audio)
        facts = frame.measure_facts(audio)
        recipe = edit.audio_recipe(fp, len(audio), facts)
        return edit.Source(recipe, frame.measure(None, facts, samples=len(audio)), len(audio), via)

    # ------------------------------------------------------------ /understand

    def _run_understand(self, job: Job) -> tuple[list[bytes], str]:
        from . import latent, listen
        from .encode import BOUNDARY

        req = job.requests[0]
        names = {
            kind: self.registry.pick(kind, req[field])
            for kind, field in (("lm", "lm_model"), ("dit", "synth_model"), ("vae", "vae"))
        }
        lm_file, vae_file = names["lm"], names["vae"]
        if lm_file is None or names["dit"] is None or vae_file is None:
            self.log(
                f"[Server] LM, DiT or VAE not found: lm={req['lm_model']} "
                f"dit={req['synth_model']} vae={req['vae']}"
            )
            raise JobFailed
        self._load("LM", lm_file)
        self._load("VAE", vae_file)
        incoming = job.given
        if incoming.latent is not None:
            lat = incoming.latent
            self.log(
                f"[Understand-VAE] Latents in: {len(lat)} frames "
                f"({len(lat) / latent.FPS:.2f}s), VAE encode skipped"
            )
        source = self._source(incoming, "src")
        if incoming.latent is None:
            lat = latent.write(source.recipe, latent.features(incoming.audio))
            self.log(
                f"[Understand-VAE] Encoded: {len(lat)} latent frames "
                f"({len(lat) / latent.FPS:.2f}s), 0ms"
            )
        heard = listen.understand(source, req, edit_context(self))
        for line in listen.result_lines(heard):
            self.log(line)
        import json

        body = [
            f"--{BOUNDARY}\r\nContent-Type: application/json\r\n\r\n".encode(),
            json.dumps([heard]).encode(),
            b"\r\n",
            (
                f"--{BOUNDARY}\r\nContent-Type: application/octet-stream\r\n"
                'Content-Disposition: form-data; name="latent"\r\n\r\n'
            ).encode(),
            latent.to_bytes(lat),
            b"\r\n",
            f"--{BOUNDARY}--\r\n".encode(),
        ]
        return body, f"multipart/mixed; boundary={BOUNDARY}"

    # ------------------------------------------------------------ /vae

    def _load_vae(self, job: Job, what: str) -> None:
        """The job's VAE, loaded; a job naming one that is not here fails as the engine's."""
        name = job.requests[0]["vae"]
        vae = self.registry.pick("vae", name)
        if vae is None:
            self.log(f"[Server] {what}: VAE not found: {name}")
            raise JobFailed
        self._load("VAE", vae)

    def _run_encode(self, job: Job) -> tuple[list[bytes], str]:
        from . import edit, frame, latent

        self._load_vae(job, "encode")
        t0 = time.perf_counter()
        audio = job.given.audio
        fp = self.memory.keep(audio)
        recipe = edit.audio_recipe(fp, len(audio), frame.measure_facts(audio))
        lat = latent.write(recipe, latent.features(audio))
        self.log(
            f"[Server] encode: {len(audio)} audio samples ({len(audio) / 48000:.2f}s) -> "
            f"{len(lat)} latent frames, {(time.perf_counter() - t0) * 1000:.0f}ms"
        )
        return [latent.to_bytes(lat)], "application/octet-stream"

    def _run_decode(self, job: Job) -> tuple[list[bytes], str]:
        from . import edit, encode, latent, render

        req = job.requests[0]
        self._load_vae(job, "decode")
        t0 = time.perf_counter()
        lat = job.given.latent
        recipe, head = latent.read(lat)
        audio = None
        if (
            recipe is not None
            and recipe.get("t") == "audio"
            and self.memory.get(str(recipe.get("fp"))) is None
        ):
            recipe = None  # outside audio no longer held: the envelope
        if recipe is not None:
            try:
                audio = edit.render_now(recipe, edit_context(self))
            except (KeyError, TypeError, ValueError) as e:
                self.log(
                    f"[Sketch] WARNING: the latent's recipe is unreadable "
                    f"({type(e).__name__}): its envelope stands in"
                )
        if audio is None:
            audio = render.master(
                latent.stand_in(lat, skip=head), normalise=req["output_format"] != "wav32"
            )
        self.log(
            f"[Server] decode: {len(lat)} latent frames -> {len(audio)} audio samples "
            f"({len(audio) / 48000:.2f}s), {(time.perf_counter() - t0) * 1000:.0f}ms"
        )
        fmt = req["output_format"]
        if fmt == "mp3":
            try:
                return [encode.mp3_bytes(audio, req["mp3_bitrate"])], "audio/mpeg"
            except encode.EncodeError as e:
                self.log(f"[MP3] ERROR: {e}")
                raise JobFailed from None
        return encode.wav_pieces(audio, fmt), "audio/wav"

    def props(self) -> dict:
        from .request import DEFAULTS

        b = self.registry.by_kind
        return {
            "version": f"{SKETCH_VERSION} ({SKETCH_DATE})",
            "models": {"lm": b["lm"], "embedding": b["text-enc"], "dit": b["dit"], "vae": b["vae"]},
            "adapters": list(self.registry.adapters),
            "cli": {"max_batch": self.opts.max_batch},
            "default": dict(DEFAULTS),
            "presets": {
                "turbo": {"inference_steps": 8, "guidance_scale": 1.0, "shift": 3.0},
                "sft": {"inference_steps": 50, "guidance_scale": 1.0, "shift": 1.0},
            },
        }


def edit_context(engine: Engine):
    from . import edit

    return edit.Context(engine.memory, engine.log)


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


def song_from_request(req: dict, seed: int, also_caption: str = ""):
    """What the request asks for; Sketch audio codes give the arrangement (and tempo, key,
    metre and length where the request leaves them), the caption fills what is unset, then
    the seed. ``also_caption``: a reference's caption, whose sounds are borrowed."""
    from . import codes as sketch_codes
    from .render import Song

    rng = random.Random(seed)
    caption = req["caption"]
    if also_caption:
        caption = f"{caption}, {also_caption}"
    text = req.get("audio_codes") or ""
    plan = sketch_codes.decode(text) if text else None
    if req["bpm"] > 0:
        bpm = req["bpm"]
    elif plan is not None:
        bpm = plan.bpm
    else:
        bpm = lm.caption_bpm(caption) or rng.randrange(84, 133, 4)
    ts = time_signature(
        req["timesignature"]
        or (str(plan.beats) if plan else "")
        or lm.caption_time_signature(caption)
        or "4"
    )
    key = (
        music.parse_key(req["keyscale"])
        or ((plan.tonic, plan.minor) if plan else None)
        or music.find_key(caption)
    )
    if key is None:
        key = (rng.randrange(12), rng.random() < 0.4)
    duration = (
        req["duration"]
        if req["duration"] > 0
        else (plan.duration if plan else SYNTH_DEFAULT_DURATION)
    )
    lyrics = "" if is_instrumental(req["lyrics"]) else req["lyrics"]
    bpm = max(30, min(300, bpm if isinstance(bpm, float) and bpm != int(bpm) else int(bpm)))
    return Song(
        bpm=bpm,
        beats_per_bar=ts,
        tonic=key[0],
        minor=key[1],
        duration=float(max(1.0, min(600.0, duration))),
        seed=seed,
        lyrics=lyrics,
        melody_seed=zlib.crc32(text.encode()) if text and plan is None else None,
        caption=caption,
        plan_seed=plan.plan_seed if plan else None,
    )
