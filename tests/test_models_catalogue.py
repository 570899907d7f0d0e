"""The catalogue: names, companions, sizes, the live tree from a hub on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import pytest

from cantor_desktop import config
from cantor_desktop.models import catalogue as cat
from support.hub import ModelHub


def test_builtin_lists_every_variant_and_companion():
    c = cat.builtin()
    assert c.source == "builtin"
    variants = {f.variant for f in c.dits()}
    assert variants == {
        "turbo",
        "sft",
        "base",
        "turbo-shift1",
        "turbo-shift3",
        "turbo-continuous",
        "xl-turbo",
        "xl-sft",
        "xl-base",
    }
    turbo = {f.quant for f in c.dits() if f.variant == "turbo"}
    assert turbo == {"BF16", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"}
    assert {f.quant for f in c.lms("4B")} == {"BF16", "Q5_K_M", "Q6_K", "Q8_0"}
    assert {f.quant for f in c.lms("0.6B")} == {"BF16", "Q8_0"}
    assert [f.name for f in c.vaes()] == ["vae-BF16.gguf"]
    assert {f.name for f in c.of_kind("text_enc")} == {
        "Qwen3-Embedding-0.6B-Q8_0.gguf",
        "Qwen3-Embedding-0.6B-BF16.gguf",
    }
    q8 = c.get("acestep-v15-turbo-Q8_0.gguf")
    assert q8.approximate and q8.sha256 is None and 2.4e9 < q8.size < 2.7e9
    assert 5.2e9 < c.get("acestep-v15-xl-turbo-Q8_0.gguf").size < 5.4e9


def test_names():
    assert cat.canonical_name("acestep-v15-turbo") == "acestep-v15-turbo-Q8_0"
    assert cat.canonical_name("acestep-v15-turbo-shift3-Q6_K") == "acestep-v15-turbo-shift3-Q6_K"
    assert cat.parse_model_name("acestep-v15-xl-sft.gguf") == ("xl-sft", "Q8_0")
    assert cat.canonical_name("sketch") == "sketch"
    with pytest.raises(cat.UnknownModel):
        cat.canonical_name("llama-3")
    c = cat.builtin()
    assert c.dit_for("acestep-v15-xl-base").name == "acestep-v15-xl-base-Q8_0.gguf"
    with pytest.raises(cat.UnknownModel, match="comes in"):
        c.dit_for("acestep-v15-xl-base-Q4_K_M")
    assert cat.display_name("xl-turbo", "Q8_0") == "ACE-Step 1.5 XL Turbo (Q8_0)"
    assert cat.display_name("turbo-shift1", "BF16") == "ACE-Step 1.5 Turbo shift 1 (BF16)"


def test_companions():
    c = cat.builtin()
    bf16 = c.dit_for("acestep-v15-sft-BF16")
    assert c.text_encoder_for(bf16)[0].quant == "BF16"
    assert c.text_encoder_for(c.dit_for("acestep-v15-sft"))[0].quant == "Q8_0"
    assert c.lms("1.7B")[0].name == "acestep-5Hz-lm-1.7B-Q8_0.gguf"


def test_lm_size_by_ram_and_config():
    gib = cat.GIB
    assert cat.lm_size_for_ram(8 * gib) == "0.6B"
    assert cat.lm_size_for_ram(16 * gib) == "1.7B"
    assert cat.lm_size_for_ram(64 * gib) == "4B"
    assert cat.total_ram() > 0
    size, explicit = cat.configured_lm_size()
    assert not explicit and size == cat.lm_size_for_ram(cat.total_ram())
    config.update({"models.lm": "4B"})
    assert cat.configured_lm_size() == ("4B", True)


def test_live_tree_replaces_builtin_and_is_cached(monkeypatch):
    with ModelHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.base_url)
        sha = hub.add("acestep-v15-xl-turbo-Q4_K_M.gguf", 5000)
        hub.add("vae-BF16.gguf", 3000)
        live = asyncio.run(cat.refresh())
        assert live.source == "hub"
        entry = live.get("acestep-v15-xl-turbo-Q4_K_M.gguf")
        assert (entry.size, entry.sha256, entry.approximate) == (5000, sha, False)
        assert live.get("README.md") is None
        again = cat.load()
        assert again.source == "cache" and again.get("vae-BF16.gguf").size == 3000
        # unreachable hub: the saved tree answers
        hub.server.fail(f"/api/models/{hub.repo}/tree/main", 503, times=None)
        assert asyncio.run(cat.refresh()).source == "cache"
    # another endpoint: the cache is not for it
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert cat.load().source == "builtin"
    assert asyncio.run(cat.refresh(timeout=1)).source == "builtin"


def test_bad_endpoint_refused(monkeypatch):
    from cantor_desktop.models import hub

    monkeypatch.setenv("HF_ENDPOINT", "http://example.com")
    with pytest.raises(hub.HubError, match="HF_ENDPOINT"):
        hub.endpoint()
    assert json.loads(json.dumps(cat.builtin().to_json()))["files"]


XL = (
    "acestep-v15-xl-turbo-Q8_0.gguf",
    "acestep-v15-xl-sft-Q8_0.gguf",
    "acestep-v15-xl-base-Q8_0.gguf",
)


def test_the_listing_catalogue_shows_what_the_hub_lists_and_asks_again_when_old(monkeypatch):
    """XL DiTs appear where the hub lists them, with the hub's sizes; the tree is asked once
    an hour, and a hub that does not answer is not asked again at every listing."""
    monkeypatch.setattr(cat, "_failed_at", {})
    with ModelHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.base_url)
        tree = f"/api/models/{hub.repo}/tree/main"
        for name in XL + ("acestep-v15-turbo-Q8_0.gguf",):
            hub.add(name, 4096)
            hub.advertise(name, size=5_310_000_000 if "xl" in name else 2_550_000_000)
        first = asyncio.run(cat.fresh())
        assert first.source == "hub"
        assert {f.variant for f in first.dits()} == {"xl-turbo", "xl-sft", "xl-base", "turbo"}
        assert all(first.get(n).size == 5_310_000_000 and not first.get(n).approximate for n in XL)
        assert asyncio.run(cat.fresh()).source == "cache"  # young: not asked
        assert len(hub.server.requests_for(tree)) == 1
        assert asyncio.run(cat.fresh(max_age=0)).source == "hub"  # old: asked again
        assert len(hub.server.requests_for(tree)) == 2
        hub.server.fail(tree, 503, times=None)
        for _ in range(3):
            assert asyncio.run(cat.fresh(max_age=0)).source == "cache"
        assert len(hub.server.requests_for(tree)) == 3  # once, then left alone
    # a hub without XL: the listing has none (nothing offered that cannot be pulled)
    monkeypatch.setattr(cat, "_failed_at", {})
    with ModelHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.base_url)
        hub.add_set()
        live = asyncio.run(cat.fresh(max_age=0))
        assert live.source == "hub" and not [f for f in live.dits() if "xl" in f.variant]


def test_the_builtin_xl_sizes_are_the_published_ones():
    c = cat.builtin()
    for name in XL:
        assert c.get(name).size == 5_310_000_000, name
        assert c.get(name.replace("Q8_0", "BF16")).size == 9_980_000_000, name
