"""The models the Sketch engine was started with: the *.gguf files directly in its models
folder, by kind (read from each file's architecture), as ace-server lists them."""

from __future__ import annotations

from pathlib import Path

from ..models import gguf
from .log import EngineLog

LABEL = {"lm": "LM", "text-enc": "Text-Enc", "dit": "DiT", "vae": "VAE"}


class Registry:
    """The *.gguf files directly in the models folder, by kind, sorted by name."""

    def __init__(self, directory: Path, log: EngineLog):
        self.directory = directory
        self.by_kind: dict[str, list[str]] = {k: [] for k in LABEL}
        self.adapters: list[str] = []  # --adapters: noted, never applied
        log(f"[Server] Scanning models in {directory}")
        try:
            files = sorted(p for p in directory.iterdir() if p.suffix == ".gguf" and p.is_file())
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
        return (
            f"{len(b['lm'])} LM, {len(b['text-enc'])} Text-Enc, {len(b['dit'])} DiT, "
            f"{len(b['vae'])} VAE, {len(self.adapters)} Adapter"
        )
