"""Record every line format the real ace-server prints with header-only models into
tests/fixtures/ace_server_recorded.txt (the parser's tests read it; see test_engine_lines.py).

    CANTOR_REAL_ACE_SERVER=/tmp/ace/build/ace-server .venv/bin/python tests/real_engine/record_lines.py

Each scenario is driven until one run's stderr arrived whole (the real engine loses its last
lines at an exit in 10-35 % of runs: a run is kept only when it ends the way the scenario
must end). Temp folders become ``/models`` and ports ``8080`` so the file stays stable;
everything else is the engine's own text. Lines that need real weights (DiT steps, the LM's
request dump, VAE decode) cannot be recorded this way: they are in ace_server_formats.txt.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

from real_engine import real_build  # noqa: E402

from cantor_desktop.models import gguf  # noqa: E402
from cantor_desktop.system.net import free_port  # noqa: E402

OUT = HERE.parent / "fixtures" / "ace_server_recorded.txt"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"
DIT = "acestep-v15-turbo-Q8_0.gguf"
TEXT_ENC = "Qwen3-Embedding-0.6B-Q8_0.gguf"
VAE = "vae-BF16.gguf"


def models(folder: Path, *, full: bool, junk: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    gguf.write_header_only(folder / LM, gguf.ARCH_LM)
    if full:
        gguf.write_header_only(folder / DIT, gguf.ARCH_DIT)
        gguf.write_header_only(folder / TEXT_ENC, gguf.ARCH_TEXT_ENC)
        gguf.write_header_only(folder / VAE, gguf.ARCH_VAE)
    if junk:
        gguf.write_header_only(folder / "notes.gguf", "llama")
    return folder


def http(method: str, url: str, body=None, timeout: float = 5.0) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"} if data else {}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def wait_health(url: str, proc: subprocess.Popen, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            if http("GET", url + "/health", timeout=1)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.03)
    return False


class Run:
    """One engine process; stderr to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], folder: Path):
        self.err = folder / f"stderr-{time.monotonic_ns()}.txt"
        with open(self.err, "wb") as fh:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=fh, env=env)

    def finish(self, timeout: float = 10.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def text(self) -> str:
        return self.err.read_text("utf-8", "replace")


def normalise(text: str, folder: Path, port: int | None) -> list[str]:
    text = text.replace(str(folder), "/models").replace(str(real_build.binary()), "ace-server")
    if port:
        text = text.replace(f":{port}", ":8080")
    return text.splitlines()


def scenario(name: str, attempt, done, tries: int = 60) -> tuple[str, list[str]]:
    """Run ``attempt()`` → (text, folder, port) until ``done(text)``."""
    for _ in range(tries):
        text, folder, port = attempt()
        if done(text):
            return name, normalise(text, folder, port)
    raise SystemExit(f"{name}: no whole run in {tries} tries")


def main() -> int:
    exe = real_build.binary()
    if exe is None or not exe.is_file():
        print(f"set {real_build.BINARY_ENV} to the real ace-server", file=sys.stderr)
        return 2
    env = real_build.library_env()
    tmp = Path(tempfile.mkdtemp(prefix="cantor-record-"))
    sections: list[tuple[str, list[str]]] = []

    def plain(args: list[str], folder: Path):
        def attempt():
            run = Run([str(exe)] + args, env, tmp)
            run.finish()
            return run.text(), folder, None

        return attempt

    sections.append(
        scenario(
            "unknown option (exit 1)",
            plain(["--bogus"], tmp),
            lambda t: "Usage" in t or "usage" in t,
        )
    )
    sections.append(
        scenario(
            "no --models (exit 1)",
            plain(["--port", "8080"], tmp),
            lambda t: "--models is required" in t,
        )
    )
    empty = tmp / "empty"
    empty.mkdir()
    sections.append(
        scenario(
            "empty models folder (exit 1)",
            plain(["--models", str(empty)], empty),
            lambda t: "no GGUF models found" in t,
        )
    )

    def job(folder: Path, path: str, body: dict, *, backend: str = "CPU", then=None):
        def attempt():
            port = free_port()
            run = Run(
                [str(exe), "--models", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                {**env, "GGML_BACKEND": backend},
                tmp,
            )
            url = f"http://127.0.0.1:{port}"
            if wait_health(url, run.proc):
                try:
                    status, answer = http("POST", url + path, body)
                    if then is not None and status == 200:
                        then(url, json.loads(answer)["id"], run)
                except OSError:
                    pass
            run.finish(5.0)
            return run.text(), folder, port

        return attempt

    lm_only = models(tmp / "lm-only", full=False)
    full = models(tmp / "full", full=True, junk=True)
    sections.append(
        scenario(
            "trial probe on the CPU: header-only LM (exit 1)",
            job(lm_only, "/lm", {"caption": "probe", "lm_mode": "generate"}),
            lambda t: t.endswith("'model.embed_tokens.weight' not found\n"),
        )
    )
    sections.append(
        scenario(
            "GGML_BACKEND=CUDA0 on a CPU-only build (exit 1)",
            job(lm_only, "/lm", {"caption": "probe", "lm_mode": "generate"}, backend="CUDA0"),
            lambda t: t.endswith("Available: CPU\n"),
        )
    )
    sections.append(
        scenario(
            "a vocal song's /lm on a full header-only set, with a file of another architecture",
            job(
                full,
                "/lm",
                {
                    "caption": "dreamy synthwave, ERROR not found",
                    "lyrics": "la la",
                    "duration": 10,
                    "lm_model": LM,
                    "lm_mode": "generate",
                },
            ),
            lambda t: t.endswith("'model.embed_tokens.weight' not found\n"),
        )
    )
    sections.append(
        scenario(
            "an instrumental /synth on header-only DiT, text encoder and VAE (exit 1)",
            job(
                full,
                "/synth",
                {
                    "caption": "lofi piano",
                    "lyrics": "[Instrumental]",
                    "duration": 10,
                    "synth_model": DIT,
                    "vae": VAE,
                    "output_format": "wav16",
                },
            ),
            lambda t: "synth load failed" in t and t.endswith("\n"),
        )
    )

    def stop(url: str, job_id: str, run: Run) -> None:
        time.sleep(0.3)
        http("GET", f"{url}/job?id={job_id}")
        http("POST", f"{url}/job?id={job_id}&cancel=1")
        run.proc.send_signal(signal.SIGTERM)

    sections.append(
        scenario(
            "a /synth naming a DiT that is not there (the job fails, the engine stays), then SIGTERM",
            job(
                full,
                "/synth",
                {"caption": "x", "lyrics": "[Instrumental]", "synth_model": "nope.gguf"},
                then=stop,
            ),
            lambda t: "DiT not found: nope.gguf" in t and t.endswith("[Server] Done\n"),
        )
    )

    def taken():
        port = free_port()
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen()
        try:
            run = Run(
                [str(exe), "--models", str(lm_only), "--host", "127.0.0.1", "--port", str(port)],
                env,
                tmp,
            )
            code = run.finish()
        finally:
            holder.close()
        return run.text() + f"(exit code {code})\n", lm_only, port

    sections.append(
        scenario(
            "a port already in use",
            taken,
            lambda t: "cannot bind" in t and t.endswith("(exit code 0)\n"),
        )
    )

    bare = real_build.unpack_beside(tmp / "release", leave_out=("libggml-base.so.0",))

    def missing():
        clean = {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"}
        run = Run([str(bare), "--models", str(lm_only)], clean, tmp)
        code = run.finish()
        return run.text() + f"(exit code {code})\n", bare.parent, None

    sections.append(
        scenario(
            "a release build whose library is missing",
            missing,
            lambda t: "error while loading shared libraries" in t,
        )
    )

    header = (
        "# Recorded from the real ace-server (upstream acestep.cpp fa33775, CPU-only "
        "build) with header-only models,\n# by tests/real_engine/record_lines.py. "
        "Temp folders are /models, ports 8080; the rest is verbatim.\n"
        "# Sections start with '## '. '(exit code N)' lines are the recorder's notes.\n"
    )
    body = "".join(f"\n## {name}\n" + "\n".join(lines) + "\n" for name, lines in sections)
    OUT.write_text(header + body, "utf-8")
    print(f"wrote {OUT} ({sum(len(lines) for _, lines in sections)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
