"""The engine manifest: the builtin copy, validation, fetching from a loopback server."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from cantor_desktop import config, manifest
from support.http_files import FileServer

VULKAN_LINUX = "398520b322058c1a6d7303849354b9d0afffc99b33870a94b50680932e6b2e41"


def test_builtin_has_the_real_lemonade_assets():
    m = manifest.load_builtin()
    cuda = m.best("acestep", "cuda12", "linux", "x86_64")
    assert cuda.url.endswith("/v0.1.1/acestep-cuda-linux-x64.tar.gz")
    assert cuda.sha256 == "1b94e862a09b76583ba314a6f49c7cb599a234d6fbf3950adf67c3965af5e1a8"
    assert cuda.env == {"GGML_BACKEND": "CUDA0"} and cuda.executable == "ace-server"
    vk = m.best("acestep", "vulkan", "linux", "x86_64")
    cpu = m.best("acestep", "cpu", "linux", "x86_64")
    assert vk.sha256 == cpu.sha256 == VULKAN_LINUX and vk.url == cpu.url
    assert cpu.env == {"GGML_BACKEND": "CPU"} and vk.env == {"GGML_BACKEND": "Vulkan0"}
    win = m.best("acestep", "cpu", "windows", "x86_64")
    assert win.archive == "zip" and win.executable == "ace-server.exe"
    assert m.best("acestep", "metal", "macos", "arm64") is None


def _doc():
    return json.loads(json.dumps({"schema": 1, "families": {"acestep": {"builds": [
        {"backend": "cpu", "os": "linux", "arch": "x86_64", "version": "v1",
         "url": "https://example.org/a.tar.gz", "sha256": "a" * 64, "size": 10,
         "archive": "tar.gz", "executable": "ace-server", "env": {"GGML_BACKEND": "CPU"}}]}}}))


def test_build_without_sha256_is_refused_by_name():
    doc = _doc()
    extra = copy.deepcopy(doc["families"]["acestep"]["builds"][0])
    extra.update(backend="metal", os="macos", arch="arm64")
    del extra["sha256"]
    doc["families"]["acestep"]["builds"].append(extra)
    m = manifest.parse(doc, "test")
    assert m.best("acestep", "metal", "macos", "arm64") is None
    why = m.refusal("acestep", "metal", "macos", "arm64")
    assert "metal macos arm64" in why and "no sha256" in why


@pytest.mark.parametrize("change, words", [
    ({"url": "http://example.org/a.tar.gz"}, "not allowed"),
    ({"backend": "rocm"}, "unknown backend"),
    ({"executable": "../ace-server"}, "relative path"),
    ({"size": -1}, "size"),
    ({"archive": "rar"}, "archive"),
])
def test_bad_builds_name_the_problem(change, words):
    doc = _doc()
    doc["families"]["acestep"]["builds"][0].update(change)
    with pytest.raises(manifest.ManifestError, match=words):
        manifest.parse(doc, "test")


def test_wrong_schema():
    with pytest.raises(manifest.ManifestError, match="schema"):
        manifest.parse({"schema": 99, "families": {}}, "test")


def test_newest_version_first():
    doc = _doc()
    b = copy.deepcopy(doc["families"]["acestep"]["builds"][0])
    b["version"] = "v10"
    doc["families"]["acestep"]["builds"].append(b)
    doc["families"]["acestep"]["builds"][0]["version"] = "v9"
    assert manifest.parse(doc, "t").best("acestep", "cpu", "linux", "x86_64").version == "v10"


def test_fetch_from_loopback_and_cache(monkeypatch):
    doc = _doc()
    with FileServer(json_routes={"/m.json": doc}) as srv:
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.url("/m.json"))
        m = asyncio.run(manifest.fetch())
        assert m.source == srv.url("/m.json") and len(m.builds) == 1
        assert manifest.current().source == srv.url("/m.json")   # cached for offline status
    # offline now: fetch_or_fallback uses the cached copy and says so
    m, note = asyncio.run(manifest.fetch_or_fallback())
    assert len(m.builds) == 1 and "copy fetched earlier" in note


def test_manifest_url_from_node_toml(free_port_value=None):
    config.update({"engines.manifest": "http://127.0.0.1:9/x.json"})
    assert manifest.manifest_url() == "http://127.0.0.1:9/x.json"
    m, note = asyncio.run(manifest.fetch_or_fallback())
    assert m.source == "builtin" and "built into Cantor" in note


def test_plain_http_elsewhere_refused():
    with pytest.raises(manifest.ManifestError, match="not allowed"):
        asyncio.run(manifest.fetch("http://example.org/m.json"))


def test_module_builds_for_uses_builtin_offline():
    found = manifest.builds_for("acestep", "vulkan", "windows", "x86_64")
    assert [b.sha256 for b in found] == [
        "a20f11af4d0eca8c906019c62db5074d30132860735404d84cec3cecddc00d4c"]
