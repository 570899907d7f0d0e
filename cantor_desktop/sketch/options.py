"""ace-server's command line, accepted exactly (unknown option: message, usage, exit 1)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

USAGE = """\
Usage: sketch-server --models DIR [options]
The built-in sketch engine (no AI model) with ace-server's command line.

  --models DIR       folder of *.gguf files (classified by general.architecture)
  --keep-loaded      keep models loaded between jobs
  --host ADDR        address to listen on (default 127.0.0.1)
  --port N           port (default 8080)
  --max-batch N      largest batch (default 1)
  --adapters DIR     folder of LoRA adapters (listed and noted, never applied)
  --vae-chunk N      accepted, unused by the sketch
  --vae-overlap N    accepted, unused by the sketch
  --max-seq N        accepted, unused by the sketch
  --no-fsm --no-fa --no-batch-cfg --clamp-fp16   accepted, unused by the sketch
  --test-synth-seconds S   tests and benches only: every synth job takes at least S
                     seconds of wall time (its steps paced evenly), so several engines on
                     a small machine behave like engines on machines of their own
  --help             this text
Device: GGML_BACKEND (the sketch has only CPU)."""

_VALUE = {
    "--models": "models",
    "--host": "host",
    "--port": "port",
    "--max-batch": "max_batch",
    "--adapters": "adapters",
    "--vae-chunk": "vae_chunk",
    "--vae-overlap": "vae_overlap",
    "--max-seq": "max_seq",
    "--test-synth-seconds": "test_synth_seconds",
}
_INT = {"port", "max_batch", "vae_chunk", "vae_overlap", "max_seq"}
_FLAG = {
    "--keep-loaded": "keep_loaded",
    "--no-fsm": "no_fsm",
    "--no-fa": "no_fa",
    "--no-batch-cfg": "no_batch_cfg",
    "--clamp-fp16": "clamp_fp16",
}


@dataclass
class Options:
    models: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    max_batch: int = 1
    keep_loaded: bool = False
    adapters: str = ""
    vae_chunk: int = 0
    vae_overlap: int = 0
    max_seq: int = 8192
    no_fsm: bool = False
    no_fa: bool = False
    no_batch_cfg: bool = False
    clamp_fp16: bool = False
    test_synth_seconds: float = 0.0


def parse(argv: list[str], err=None) -> Options | int:
    """Options, or an exit code (0 for --help, 1 for a bad command line) after printing."""
    err = err or sys.stderr
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--help", "-h"):
            print(USAGE, file=err)
            return 0
        if arg in _FLAG:
            setattr(opts, _FLAG[arg], True)
        elif arg in _VALUE:
            if i + 1 >= len(argv):
                print(f"Missing value for {arg}", file=err)
                print(USAGE, file=err)
                return 1
            i += 1
            name, text = _VALUE[arg], argv[i]
            value: str | int | float = text
            if name == "test_synth_seconds":
                try:
                    value = float(text)
                except ValueError:
                    value = -1.0
                if not 0 <= value <= 3600:
                    print(f"Invalid value for {arg}: {argv[i]}", file=err)
                    print(USAGE, file=err)
                    return 1
            elif name in _INT:
                try:
                    value = int(text)
                except ValueError:
                    print(f"Invalid value for {arg}: {argv[i]}", file=err)
                    print(USAGE, file=err)
                    return 1
            setattr(opts, name, value)
        else:
            print(f"Unknown option: {arg}", file=err)
            print(USAGE, file=err)
            return 1
        i += 1
    if not opts.models:
        print("[Server] ERROR: --models is required", file=err)
        return 1
    if not 0 <= opts.port <= 65535:
        print(f"Invalid value for --port: {opts.port}", file=err)
        return 1
    opts.max_batch = max(1, opts.max_batch)
    return opts
