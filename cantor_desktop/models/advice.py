"""What each ACE-Step model is, in a musician's words, and which one suits a machine.

No Qt and no I/O: the Library page (and anyone else) feeds it the node's ``/v1/system``
answer and the model names the catalogue has. The rule, from the memory the model will run
in (the GPU's own memory on CUDA or Vulkan, most of the shared memory on Metal, the RAM on
the CPU):

- a GPU backend with at least :data:`XL_MEMORY` → XL Turbo at Q8_0 (the 4B model sounds
  better and needs about twice the memory; on the CPU it is too slow to suggest);
- less than :data:`SMALL_GPU` on a GPU, or :data:`SMALL_RAM` of RAM on the CPU → Turbo at
  Q4_K_M (the smallest file);
- otherwise, and whenever the memory is unknown → Turbo at Q8_0, the default.

A choice the catalogue does not have falls back to the next one down that it does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

GIB = 2**30
XL_MEMORY = 12 * GIB
SMALL_GPU = 6 * GIB
SMALL_RAM = 8 * GIB
METAL_SHARE = 2 / 3  # the part of unified memory macOS lets the GPU use (by default)
GPU_BACKENDS = ("cuda12", "vulkan", "metal")
BACKEND_NAMES = {"cuda12": "CUDA", "vulkan": "Vulkan", "metal": "Metal", "cpu": "the CPU"}

FAMILIES = {
    "turbo": "Turbo: 8 steps, the fastest — the usual choice.",
    "sft": "SFT: 50 steps, slower, with more detail.",
    "base": "Base: for editing tasks (stems, extract, add a layer, complete); 50 steps.",
    "turbo-shift1": "Turbo tuned for shift 1 (the sampler's time schedule): 8 steps, "
    "an alternative to try after Turbo.",
    "turbo-shift3": "Turbo tuned for shift 3 (the sampler's time schedule): 8 steps, "
    "an alternative to try after Turbo.",
    "turbo-continuous": "Turbo tuned for any shift: 8 steps, an alternative to try after Turbo.",
}
XL = "XL, the 4B model: better quality, needs about twice the memory."
SHORT = {
    "turbo": "8 steps, fastest — the usual choice",
    "sft": "50 steps, more detail",
    "base": "for editing (stems, layers) · 50 steps",
    "turbo-shift1": "a Turbo variant (shift 1) to try",
    "turbo-shift3": "a Turbo variant (shift 3) to try",
    "turbo-continuous": "a Turbo variant (any shift) to try",
}
"""The same, in a few words (a table row's second line)."""
QUANTS = {
    "BF16": "BF16: full precision — the largest file, nothing lost.",
    "F16": "F16: full precision — the largest file, nothing lost.",
    "Q8_0": "Q8_0: half the size of BF16 and sounds the same — the default.",
    "Q6_K": "Q6_K: a little smaller than Q8_0, very close in sound.",
    "Q5_K_M": "Q5_K_M: smaller again, a slight loss of detail.",
    "Q4_K_M": "Q4_K_M: the smallest, for machines short of memory; some loss of detail.",
}


def family_sentence(variant: str | None) -> str:
    """One or two sentences on a DiT variant ("turbo", "xl-sft", …); "" when unknown."""
    if not variant:
        return ""
    if variant.startswith("xl-"):
        rest = FAMILIES.get(variant[3:], "")
        return f"{XL} {rest}".strip()
    return FAMILIES.get(variant, "")


def family_words(variant: str | None) -> str:
    """A few words on a DiT variant, for a row: "8 steps, fastest — the usual choice"."""
    if not variant:
        return ""
    if variant.startswith("xl-"):
        rest = SHORT.get(variant[3:], "")
        return f"4B: better, 2× memory · {rest}" if rest else "4B: better, 2× memory"
    return SHORT.get(variant, "")


def quant_sentence(quant: str | None) -> str:
    return QUANTS.get(quant or "", "")


def describe(variant: str | None, quant: str | None) -> str:
    """What a model is, for its row in the Library."""
    return " ".join(s for s in (family_sentence(variant), quant_sentence(quant)) if s)


@dataclass(frozen=True)
class Machine:
    """What the recommendation needs to know about the node's machine."""

    ram_bytes: int | None = None
    vram_bytes: int | None = None  # the largest GPU's own memory (None: unknown / none)
    backend: str | None = None  # where songs run: the pinned backend, else the default

    @classmethod
    def from_system(cls, system: Mapping[str, Any]) -> "Machine":
        """From the node's ``GET /v1/system`` answer (missing parts stay unknown)."""
        hw = system.get("hardware")
        if not isinstance(hw, Mapping):
            hw = {}
        ram = hw.get("ram_bytes")
        vram_mib = [
            g["vram_mib"]
            for g in hw.get("gpus") or ()
            if isinstance(g, Mapping) and isinstance(g.get("vram_mib"), int)
        ]
        families = system.get("families")
        if not isinstance(families, Mapping):
            families = {}
        fam = families.get("acestep")
        if not isinstance(fam, Mapping):
            fam = {}
        backend = fam.get("pinned") or fam.get("default")
        return cls(
            ram_bytes=ram if isinstance(ram, int) and ram > 0 else None,
            vram_bytes=max(vram_mib) * 2**20 if vram_mib else None,
            backend=backend if isinstance(backend, str) else None,
        )

    @property
    def on_gpu(self) -> bool:
        return self.backend in GPU_BACKENDS

    @property
    def model_memory(self) -> int | None:
        """The memory the model will run in (None when unknown)."""
        if self.backend == "metal":
            return int(self.ram_bytes * METAL_SHARE) if self.ram_bytes else None
        if self.on_gpu:
            return self.vram_bytes
        return self.ram_bytes


@dataclass(frozen=True)
class Recommendation:
    name: str  # the model's name, e.g. "acestep-v15-turbo-Q8_0"
    variant: str
    quant: str
    reason: str  # one sentence for the page


def _gib(n: int) -> str:
    return f"{n / GIB:.0f} GiB" if n >= 10 * GIB else f"{n / GIB:.1f} GiB"


def _where(machine: Machine) -> str:
    backend = BACKEND_NAMES.get(machine.backend or "", machine.backend or "")
    memory = machine.model_memory
    if machine.on_gpu and machine.backend != "metal":
        return f"your GPU has {_gib(memory)} ({backend})" if memory else ""
    if machine.backend == "metal":
        return f"your Mac shares {_gib(machine.ram_bytes or 0)} with its GPU" if memory else ""
    return f"songs run on the CPU with {_gib(memory)} of memory" if memory else ""


def _choice(machine: Machine) -> tuple[str, str, str]:
    memory = machine.model_memory
    where = _where(machine)
    if memory is None:
        what = "its GPU has" if machine.on_gpu and machine.backend != "metal" else "it has"
        return (
            "turbo",
            "Q8_0",
            f"the node did not say how much memory {what}: Turbo at Q8_0 is the safe choice",
        )
    if machine.on_gpu and memory >= XL_MEMORY:
        return "xl-turbo", "Q8_0", f"{where}: enough for the 4B XL model, which sounds better"
    small = SMALL_GPU if machine.on_gpu else SMALL_RAM
    if memory < small:
        return ("turbo", "Q4_K_M", f"{where}: the smallest Turbo (Q4_K_M) fits best")
    xl_note = "XL needs a GPU with 12 GiB" if not machine.on_gpu else f"XL needs {_gib(XL_MEMORY)}"
    return "turbo", "Q8_0", f"{where}: Turbo at Q8_0 runs well ({xl_note})"


_FALLBACK = {("xl-turbo", "Q8_0"): ("turbo", "Q8_0"), ("turbo", "Q4_K_M"): ("turbo", "Q8_0")}


def recommend(machine: Machine, available: Iterable[str] | None = None) -> Recommendation:
    """The model to suggest for ``machine``, among the ``available`` model names (all the
    catalogue's when None)."""
    variant, quant, reason = _choice(machine)
    names = set(available) if available is not None else None
    while names is not None and f"acestep-v15-{variant}-{quant}" not in names:
        nxt = _FALLBACK.get((variant, quant))
        if nxt is None:
            break
        missing = f"{variant} {quant}"
        variant, quant = nxt
        reason += f", but the catalogue has no {missing}: Turbo at {quant} instead"
    return Recommendation(
        f"acestep-v15-{variant}-{quant}", variant, quant, reason[:1].upper() + reason[1:] + "."
    )
