"""What each model is for, and the model recommended for a machine (no Qt, no node)."""

from __future__ import annotations

import pytest

from cantor_desktop.models import catalogue as cat
from cantor_desktop.models.advice import (
    Machine,
    describe,
    family_sentence,
    family_words,
    quant_sentence,
    recommend,
)

GIB = 2**30
ALL = [f.stem for f in cat.builtin().dits()]


def _system(ram_gib=None, vram_mib=None, backend=None, pinned=None) -> dict:
    """A ``GET /v1/system`` answer in the node's shape."""
    gpus = [] if vram_mib is None else [{"name": "GPU", "vendor": "x", "vram_mib": vram_mib}]
    return {
        "hardware": {"ram_bytes": int(ram_gib * GIB) if ram_gib else None, "gpus": gpus},
        "families": {"acestep": {"pinned": pinned, "default": backend}},
    }


@pytest.mark.parametrize(
    "profile, expected, words",
    [
        # CPU machines: Turbo Q8_0 by default, Q4_K_M when small; never XL on the CPU
        (_system(32, None, "cpu"), "acestep-v15-turbo-Q8_0", "CPU with 32 GiB"),
        (_system(8, None, "cpu"), "acestep-v15-turbo-Q8_0", "XL needs a GPU"),
        (_system(4, None, "cpu"), "acestep-v15-turbo-Q4_K_M", "smallest"),
        (_system(128, None, "cpu"), "acestep-v15-turbo-Q8_0", "CPU"),
        # GPUs: their own memory counts, not the RAM
        (_system(64, 24576, "cuda12"), "acestep-v15-xl-turbo-Q8_0", "24 GiB (CUDA)"),
        (_system(16, 12288, "vulkan"), "acestep-v15-xl-turbo-Q8_0", "XL model"),
        (_system(64, 8192, "cuda12"), "acestep-v15-turbo-Q8_0", "XL needs 12 GiB"),
        (_system(64, 4096, "vulkan"), "acestep-v15-turbo-Q4_K_M", "4.0 GiB (Vulkan)"),
        (_system(64, None, "vulkan"), "acestep-v15-turbo-Q8_0", "how much memory its GPU has"),
        # a GPU the node does not use (auto chose the CPU): the CPU rule
        (_system(32, 24576, "cpu"), "acestep-v15-turbo-Q8_0", "CPU"),
        # the pinned backend wins over the default
        (_system(32, 24576, "cpu", pinned="cuda12"), "acestep-v15-xl-turbo-Q8_0", "CUDA"),
        # Apple silicon shares its memory with the GPU
        (_system(32, None, "metal"), "acestep-v15-xl-turbo-Q8_0", "Mac shares 32 GiB"),
        (_system(16, None, "metal"), "acestep-v15-turbo-Q8_0", "Turbo at Q8_0"),
        (_system(8, None, "metal"), "acestep-v15-turbo-Q4_K_M", "smallest"),
        # nothing known yet (the node has not answered)
        ({}, "acestep-v15-turbo-Q8_0", "safe choice"),
    ],
)
def test_the_recommendation_per_machine(profile, expected, words):
    rec = recommend(Machine.from_system(profile), ALL)
    assert rec.name == expected and rec.name in ALL
    assert words in rec.reason and rec.reason.endswith(".")
    assert f"{rec.variant}-{rec.quant}" in rec.name


def test_a_choice_the_catalogue_lacks_falls_back_and_says_so():
    big = Machine.from_system(_system(64, 24576, "cuda12"))
    rec = recommend(big, ["acestep-v15-turbo-Q8_0", "acestep-v15-sft-Q8_0"])
    assert rec.name == "acestep-v15-turbo-Q8_0" and "no xl-turbo Q8_0" in rec.reason
    small = Machine.from_system(_system(4, None, "cpu"))
    assert recommend(small, ["acestep-v15-turbo-Q8_0"]).name == "acestep-v15-turbo-Q8_0"


def test_every_catalogue_model_is_explained():
    for entry in cat.builtin().dits():
        text = describe(entry.variant, entry.quant)
        assert family_sentence(entry.variant) and quant_sentence(entry.quant), entry.name
        assert 0 < len(family_words(entry.variant)) <= 64, entry.variant  # fits a row
        assert text.count(".") >= 2, text
    assert "8 steps" in family_sentence("turbo") and "usual choice" in family_sentence("turbo")
    assert "50 steps" in family_sentence("sft") and "detail" in family_sentence("sft")
    base = family_sentence("base")
    assert "50 steps" in base and "stems" in base and "extract" in base
    xl = family_sentence("xl-turbo")
    assert "4B" in xl and "twice the memory" in xl and "8 steps" in xl
    assert "default" in quant_sentence("Q8_0") and "smallest" in quant_sentence("Q4_K_M")
    assert "full precision" in quant_sentence("BF16")
