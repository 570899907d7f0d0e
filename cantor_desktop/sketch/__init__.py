"""The built-in sketch engine: a small procedural music engine speaking ace-server's protocol.

It renders a procedural arrangement with numpy — the caption's instruments and genre, the
lyrics' sections, a melody, a wordless voice on the lyrics' syllables (render.py) — so
Cantor works on a fresh machine with no model download and no GPU, and the test suite can
drive the whole song path end to end. It is never presented as ACE-Step.

Run it with ``python -m cantor_desktop.sketch --models DIR [--port P] …`` or
``cantor sketch-server …`` (the same command line as ace-server). This module stays light:
nothing here imports numpy, so the node can call :func:`ensure_sketch_models` cheaply.
"""

from __future__ import annotations

from pathlib import Path

SKETCH_DISPLAY_NAME = "Sketch — built-in, no AI model"
SKETCH_VERSION = "sketch-0.1.0"
SKETCH_DATE = "2026-11-30"

# kind -> (file name, architecture); the files are header-only GGUFs, no weights
SKETCH_MODEL_FILES: dict[str, tuple[str, str]] = {
    "lm": ("sketch-lm.gguf", "acestep-lm"),
    "dit": ("sketch-dit.gguf", "acestep-dit"),
    "text-enc": ("sketch-text-enc.gguf", "acestep-text-enc"),
    "vae": ("sketch-vae.gguf", "acestep-vae"),
}


def ensure_sketch_models(directory: str | Path) -> dict[str, str]:
    """Create (if missing or not right) the header-only GGUFs of the sketch model in
    ``directory`` and return ``{kind: file name}`` for lm, dit, text-enc and vae."""
    from ..models import gguf

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    for kind, (name, arch) in SKETCH_MODEL_FILES.items():
        path = directory / name
        try:
            ok = gguf.read_architecture(path) == arch
        except gguf.GGUFError:
            ok = False
        if not ok:
            gguf.write_header_only(
                path,
                arch,
                {"general.name": f"sketch-{kind}", "general.description": SKETCH_DISPLAY_NAME},
            )
        out[kind] = name
    return out
