"""The sketch engine's HTTP server and process: ace-server's endpoints, errors and lifecycle."""

from __future__ import annotations

import json
import sys
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from . import SKETCH_DATE, SKETCH_DISPLAY_NAME, SKETCH_VERSION, multipart, options
from .engine import Engine
from .jobs import Incoming, JobStatus
from .registry import Registry
from .log import EngineLog
from .request import BadRequest, check_caption, normalise, parse_json

MAX_BODY = 256 * 1024 * 1024  # ace-server's request body limit
SECONDS_PER_FRAME = 1920 / 48000
_MP3_OK: bool | None = None


def mp3_available() -> bool:
    """Whether this machine's libsndfile can write MP3 (checked once)."""
    global _MP3_OK
    if _MP3_OK is None:
        try:
            import numpy as np

            from .encode import EncodeError, mp3_bytes

            mp3_bytes(np.zeros((1152, 2), dtype=np.float32))
            _MP3_OK = True
        except (EncodeError, ImportError):
            _MP3_OK = False
    return _MP3_OK


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sketch-server"
    engine: Engine  # set on the subclass made by serve()
    server: _Server  # the one that serves it

    def log_message(self, format, *args):  # no access log on stderr (ace-server has none)
        pass

    # ------------------------------------------------------------ answers

    def _send(self, status: int, body: bytes | list[bytes], content_type: str) -> None:
        pieces = [body] if isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        for piece in pieces:
            self.wfile.write(piece)

    def _json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunked_body()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest("Invalid Content-Length") from None
        if n > MAX_BODY:
            self.close_connection = True
            raise BadRequest("Request too large", 413)
        return self.rfile.read(n) if n > 0 else b""

    def _chunked_body(self) -> bytes:
        out = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise BadRequest("Invalid chunked body") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(out)
            if len(out) + size > MAX_BODY:
                self.close_connection = True
                raise BadRequest("Request too large", 413)
            out += self.rfile.read(size)
            self.rfile.readline(8)  # the CRLF after the chunk

    # ------------------------------------------------------------ routes

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_OPTIONS(self):
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Content-Type")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if method == "POST":
                body = self._body()
            route = (method, url.path)
            if route == ("GET", "/health"):
                self._json(200, {"status": "ok"})
            elif route == ("GET", "/props"):
                self._json(200, self.engine.props())
            elif route == ("POST", "/lm"):
                self._lm(body)
            elif route == ("POST", "/synth"):
                self._synth(body)
            elif route == ("POST", "/understand"):
                self._understand(body)
            elif route == ("POST", "/vae"):
                self._vae(body)
            elif url.path == "/job":
                self._job(method, query)
            elif route == ("GET", "/logs"):
                self._logs()
            else:
                self._error(404, "Not found")
        except BadRequest as e:
            self._error(e.status, str(e))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _lm(self, body: bytes) -> None:
        if not self.engine.registry.has_lm:
            raise BadRequest("No LM model in registry", 501)
        obj = parse_json(body)
        if isinstance(obj, list):
            obj = obj[0] if len(obj) == 1 else None
        req = normalise(obj)
        job = self.engine.submit("lm", [req])
        try:
            self._json(200, {"id": job.id})
        finally:
            self.engine.enqueue(job)

    def _synth(self, body: bytes) -> None:
        if not self.engine.registry.has_synth:
            raise BadRequest("No synth models in registry (need dit + text-encoder + vae)", 501)
        source = reference = None
        if self._is_form():
            parts = multipart.parse(body, self.headers.get("Content-Type", ""))
            obj = self._form_request(parts, required=True)
            source = self._latents(parts, "src_latents", "Source")
            audio = self._audio(parts, "audio", "Source audio")
            if source is None and audio is not None:
                source = Incoming(audio=audio)
            reference = self._latents(parts, "ref_latents", "Reference")
            ref_part = multipart.file(parts, "ref_audio")
            if ref_part is not None and ref_part.data:
                from .audio_in import decode

                ref_audio = decode(ref_part.data)
                if ref_audio is None:
                    self.engine.log("[Server] WARNING: failed to decode ref_audio, ignoring")
                else:
                    self.engine.log(
                        f"[Server] Reference audio: {len(ref_audio) / 48000:.2f}s @ 48kHz"
                    )
                    if reference is None:
                        reference = Incoming(audio=ref_audio)
            items = [obj]
        else:
            obj = parse_json(body)
            items = obj if isinstance(obj, list) else [obj]
            if not items:
                raise BadRequest("Invalid JSON")
        reqs = [normalise(item, caption_required=False) for item in items]
        check_caption(reqs[0], synth=True)
        if any(r["output_format"] == "mp3" for r in reqs) and not mp3_available():
            raise BadRequest(
                "MP3 encoding is not available in this sketch engine "
                "(libsndfile without MP3); use output_format wav16, wav24 or "
                "wav32"
            )
        job = self.engine.submit("synth", reqs, source=source, reference=reference)
        try:
            self._json(200, {"id": job.id})
        finally:
            self.engine.enqueue(job)

    def _understand(self, body: bytes) -> None:
        reg = self.engine.registry
        if not (reg.has_lm and reg.by_kind["dit"] and reg.by_kind["vae"]):
            raise BadRequest("Understand requires LM, DiT and VAE models", 501)
        if not self._is_form():
            raise BadRequest("Understand requires multipart/form-data")
        parts = multipart.parse(body, self.headers.get("Content-Type", ""))
        obj = self._form_request(parts, required=False)
        obj = {"lm_temperature": 0.3, "lm_top_p": 1.0, **obj}  # understand's own defaults
        lat = self._latents(parts, "src_latents", "Understand source")
        audio = self._audio(parts, "audio", "Understand source")
        if lat is None and audio is None:
            raise BadRequest("Multipart: missing 'audio' or 'src_latents' part")
        req = normalise(obj, caption_required=False)
        job = self.engine.submit("understand", [req], source=lat or Incoming(audio=audio))
        try:
            self._json(200, {"id": job.id})
        finally:
            self.engine.enqueue(job)

    def _vae(self, body: bytes) -> None:
        if not self.engine.registry.by_kind["vae"]:
            raise BadRequest("VAE endpoint requires a VAE in the registry", 501)
        if not self._is_form():
            raise BadRequest("VAE endpoint requires multipart/form-data")
        parts = multipart.parse(body, self.headers.get("Content-Type", ""))
        obj = self._form_request(parts, required=False)
        has_audio = multipart.file(parts, "audio") is not None
        has_latents = multipart.file(parts, "src_latents") is not None
        if has_audio == has_latents:
            raise BadRequest(
                "Multipart: provide exactly one of 'audio' (encode) or 'src_latents' (decode)"
            )
        if has_audio:
            audio = self._audio(parts, "audio", None)
            if len(audio) // 1920 >= 15000:
                raise BadRequest("audio exceeds max duration (10 min)", 413)
            req = normalise(obj, caption_required=False)
            job = self.engine.submit("encode", [req], source=Incoming(audio=audio))
        else:
            source = self._latents(parts, "src_latents", None)
            req = normalise(obj, caption_required=False)
            if req["output_format"] == "mp3" and not mp3_available():
                raise BadRequest(
                    "MP3 encoding is not available in this sketch engine "
                    "(libsndfile without MP3); use output_format wav16, wav24 "
                    "or wav32"
                )
            job = self.engine.submit("decode", [req], source=source)
        try:
            self._json(200, {"id": job.id})
        finally:
            self.engine.enqueue(job)

    # ------------------------------------------------------------ multipart parts

    def _is_form(self) -> bool:
        return self.headers.get("Content-Type", "").lower().startswith("multipart/form-data")

    @staticmethod
    def _form_request(parts: dict, *, required: bool) -> dict:
        """The ``request`` part (a field or a file) as a JSON object."""
        raw = multipart.field_or_file(parts, "request")
        if raw is None:
            if required:
                raise BadRequest("Multipart: missing 'request' part")
            return {}
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            obj = None
        if not isinstance(obj, dict):
            raise BadRequest("Multipart: invalid JSON in 'request' part")
        return obj

    def _latents(self, parts: dict, name: str, label: str | None) -> Incoming | None:
        """A latent file part, checked as ace-server checks it (and its line logged)."""
        from . import latent

        part = multipart.file(parts, name)
        if part is None:
            return None
        try:
            frames = latent.frames_of(len(part.data), name)
        except latent.LatentError as e:
            raise BadRequest(str(e), e.status) from None
        seconds = frames * SECONDS_PER_FRAME
        if label == "Understand source":
            self.engine.log(f"[Server] Understand source: {frames} latent frames ({seconds:.2f}s)")
        elif label is not None:
            self.engine.log(
                f"[Server] {label} latents: {frames} frames ({seconds:.2f}s), VAE encode skipped"
            )
        return Incoming(latent=latent.from_bytes(part.data))

    def _audio(self, parts: dict, name: str, label: str | None):
        """An audio file part decoded to 48 kHz stereo (WAV or MP3, as ace-server)."""
        from .audio_in import decode

        part = multipart.file(parts, name)
        if part is None:
            return None
        if not part.data:
            raise BadRequest(f"Multipart: empty '{name}' part")
        audio = decode(part.data)
        if audio is None:
            raise BadRequest("Failed to decode audio")
        if label is not None:
            self.engine.log(f"[Server] {label}: {len(audio) / 48000:.2f}s @ 48kHz")
        return audio

    def _job(self, method: str, query: dict) -> None:
        job_id = query.get("id", "")
        if not job_id:
            raise BadRequest("Missing id parameter")
        job = self.engine.get(job_id)
        if job is None:
            raise BadRequest("Job not found", 404)
        if query.get("cancel") == "1":
            self._json(200, {"status": self.engine.cancel(job)})
        elif query.get("result") == "1":
            if job.status != JobStatus.DONE:
                raise BadRequest("Result not ready", 404)
            self._send(200, job.result, job.content_type)
        elif method == "GET" and set(query) == {"id"}:
            self._json(200, {"status": job.status})
        else:
            raise BadRequest("Unknown action")

    def _logs(self) -> None:
        replay, q = self.engine.log.subscribe()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            self.close_connection = True
            self.wfile.write("".join(f"data: {line}\n\n" for line in replay).encode())
            self.wfile.flush()
            while not self.server.stopping.is_set():
                try:
                    line = q.get(timeout=0.5)
                except Exception:
                    continue
                self.wfile.write(f"data: {line}\n\n".encode())
                self.wfile.flush()
        except OSError:
            pass
        finally:
            self.engine.log.unsubscribe(q)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Windows' SO_REUSEADDR would let us bind a port another server is using
    allow_reuse_address = sys.platform != "win32"

    def __init__(self, addr, handler):
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        self.stopping = threading.Event()
        super().__init__(addr, handler)


def scan_adapters(directory: Path, log) -> list[str]:
    """ace-server's ``--adapters`` scan: ``*.safetensors`` files (ComfyUI), then folders
    holding ``adapter_model.safetensors`` (PEFT), each sorted; named as the engine names them."""
    log(f"[Server] Scanning adapters in {directory}")
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    files = [p.name for p in entries if p.is_file() and p.name.endswith(".safetensors")]
    folders = [
        p.name for p in entries if p.is_dir() and (p / "adapter_model.safetensors").is_file()
    ]
    for name in files:
        log(f"[Registry] Adapter: {name} (ComfyUI)")
    for name in folders:
        log(f"[Registry] Adapter: {name} (PEFT)")
    return files + folders


def main(argv: list[str] | None = None) -> int:
    """Run the sketch engine with ace-server's command line; returns the exit code."""
    import sys

    opts = options.parse(sys.argv[1:] if argv is None else argv)
    if isinstance(opts, int):
        return opts
    log = EngineLog()
    directory = Path(opts.models)
    registry = Registry(directory, log)
    if registry.empty:
        log(f"[Server] ERROR: no GGUF models found in {directory}")
        return 1
    if opts.adapters:
        registry.adapters = scan_adapters(Path(opts.adapters), log)
    if not registry.has_lm and not registry.has_synth:
        log(
            f"[Server] ERROR: no usable pipeline in {directory} "
            "(need an LM, or DiT + Text-Enc + VAE)"
        )
        return 1
    log(f"[Store] Created (policy={'NEVER' if opts.keep_loaded else 'STRICT'})")
    log(f"[Server] {SKETCH_DISPLAY_NAME}: {SKETCH_VERSION} ({SKETCH_DATE})")
    log(f"[Server] Listening on {opts.host}:{opts.port}")
    understand = registry.has_lm and registry.by_kind["dit"] and registry.by_kind["vae"]
    pipes = " ".join(
        p
        for p, ok in (
            ("/lm", registry.has_lm),
            ("/synth", registry.has_synth),
            ("/understand", understand),
        )
        if ok
    )
    log(f"[Server] Pipelines: {pipes}")
    log(f"[Server] Models: {registry.summary()}")

    engine = Engine(opts, registry, log)
    handler = type("SketchHandler", (Handler,), {"engine": engine})
    stop = threading.Event()
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        try:
            server = _Server((opts.host, opts.port), handler)
        except (OSError, OverflowError):
            log(f"[Server] FATAL: cannot bind {opts.host}:{opts.port}")
            log("[Server] Shutting down...")
            log("[Server] Done")
            return 0
        engine.start()
        serving = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="sketch-http",
            daemon=True,
        )
        serving.start()
        while not stop.wait(0.2):
            pass
        log("[Server] Shutting down...")
        server.stopping.set()
        server.shutdown()
        server.server_close()
        engine.stop()
        log("[Server] Done")
        return 0
    finally:
        for sig, handler_ in previous.items():
            signal.signal(sig, handler_)
