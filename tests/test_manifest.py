"""The engine manifest: the builtin copy, validation, and fetching a signed one from real
servers on 127.0.0.1 (signed, unsigned, tampered, wrongly keyed, redirected, oversize)."""

from __future__ import annotations

import asyncio
import copy
import json
import tracemalloc

import httpx
import pytest

from cantor_desktop import config
from cantor_desktop.install import manifest, signing_keys
from support.hostile_http import HostileServer
from support.http_files import FileServer
from support.signed_manifests import TEST_KEY, manifest_bytes, serve_signed

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
    return json.loads(
        json.dumps(
            {
                "schema": 1,
                "families": {
                    "acestep": {
                        "builds": [
                            {
                                "backend": "cpu",
                                "os": "linux",
                                "arch": "x86_64",
                                "version": "v1",
                                "url": "https://github.com/pwilkin/acestep.cpp/releases/download/v1/a.tar.gz",
                                "sha256": "a" * 64,
                                "size": 10,
                                "archive": "tar.gz",
                                "executable": "ace-server",
                                "env": {"GGML_BACKEND": "CPU"},
                            }
                        ]
                    }
                },
            }
        )
    )


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


@pytest.mark.parametrize(
    "change, words",
    [
        ({"url": "http://example.org/a.tar.gz"}, "not allowed"),
        ({"url": "https://evil.example/a.tar.gz"}, "only from github.com .* not evil.example"),
        ({"url": "https://github.com.evil.example/a.tar.gz"}, "not github.com.evil.example"),
        ({"backend": "rocm"}, "unknown backend"),
        ({"executable": "../ace-server"}, "relative path"),
        ({"size": -1}, "size"),
        ({"archive": "rar"}, "archive"),
    ],
)
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


def test_a_release_candidate_is_older_than_its_release():
    doc = _doc()
    builds = doc["families"]["acestep"]["builds"]
    for version in ("v0.2.0", "v0.2.0-rc1", "v0.1.10", "v0.1.9"):
        b = copy.deepcopy(builds[0])
        b["version"] = version
        builds.append(b)
    builds.pop(0)
    found = manifest.parse(doc, "t").builds_for("acestep", "cpu", "linux", "x86_64")
    assert [b.version for b in found] == ["v0.2.0", "v0.2.0-rc1", "v0.1.10", "v0.1.9"]
    assert manifest.version_key("v0.2.0-rc1") < manifest.version_key("v0.2.0")


def test_a_version_that_is_no_version_is_refused_naming_the_build():
    doc = _doc()
    doc["families"]["acestep"]["builds"][0]["version"] = "nightly"
    with pytest.raises(manifest.ManifestError, match=r"acestep build #1 .*'nightly' is not a"):
        manifest.parse(doc, "t")


def test_fetch_from_loopback_and_cache(monkeypatch):
    doc = _doc()
    with FileServer() as srv:
        serve_signed(srv, "/m.json", doc)
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.url("/m.json"))
        m = asyncio.run(manifest.fetch())
        assert m.source == srv.url("/m.json") and len(m.builds) == 1
        assert manifest.current().source == srv.url("/m.json")  # cached for offline status
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
        "a20f11af4d0eca8c906019c62db5074d30132860735404d84cec3cecddc00d4c"
    ]


# -- the default: the built-in manifest, no network --------------------------------------------


def test_default_is_the_builtin_manifest_without_network(monkeypatch):
    assert not hasattr(config, "DEFAULT_MANIFEST_URL")
    assert config.load_or_defaults()[0].get("engines.manifest") == ""
    assert manifest.manifest_url() == ""
    # every request would fail here; an attempt would show up as a note
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    m, note = asyncio.run(manifest.fetch_or_fallback())
    assert m.source == "builtin" and note == ""
    assert manifest.current().source == "builtin"
    with pytest.raises(manifest.ManifestError, match="new versions of Cantor"):
        asyncio.run(manifest.fetch())


def test_empty_manifest_setting_is_allowed_and_means_builtin():
    config.update({"engines.manifest": "http://127.0.0.1:9/x.json"})
    config.update({"engines.manifest": ""})
    assert manifest.manifest_url() == ""
    with pytest.raises(config.ConfigError, match="engines.manifest"):
        config.update({"engines.manifest": "http://example.com/m.json"})


# -- signatures ---------------------------------------------------------------------------------


def _served(srv: FileServer, raw: bytes, sig: bytes | None, path: str = "/m.json") -> str:
    srv.add_file(path, raw)
    if sig is not None:
        srv.add_file(path + ".sig", sig)
    return srv.url(path)


def _refused(url: str, words: str) -> manifest.ManifestRefused:
    with pytest.raises(manifest.ManifestRefused, match=words) as err:
        asyncio.run(manifest.fetch(url))
    return err.value


def test_signed_manifest_is_used_and_its_signature_kept():
    with FileServer() as srv:
        raw = serve_signed(srv, "/m.json", _doc())
        url = srv.url("/m.json")
        m = asyncio.run(manifest.fetch(url))
    assert m.source == url and m.builds[0].version == "v1"
    cache = manifest._cache_file(url)
    assert cache.read_bytes() == raw  # the exact bytes signed
    assert (
        signing_keys.verify(raw, manifest._sig_file(cache).read_bytes()) == signing_keys.PUBKEY_ENV
    )
    assert manifest.cached(url).source == url


def test_unsigned_manifest_refused_and_builtin_kept(monkeypatch):
    with FileServer() as srv:
        url = _served(srv, manifest_bytes(_doc()), None)
        err = _refused(url, "no signature")
        assert "/m.json.sig: HTTP 404" in str(err) and "never used" in str(err)
        monkeypatch.setenv("CANTOR_MANIFEST_URL", url)
        m, note = asyncio.run(manifest.fetch_or_fallback())
    assert m.source == "builtin" and "no signature" in note and "built into Cantor" in note
    assert not manifest._cache_file(url).exists() and manifest.current().source == "builtin"


def test_tampered_manifest_refused():
    raw = manifest_bytes(_doc())
    sig = signing_keys.sign(raw, TEST_KEY)
    tampered = raw.replace(b'"v1"', b'"v2"')
    assert tampered != raw and json.loads(tampered)  # still a valid manifest
    with FileServer() as srv:
        _refused(_served(srv, tampered, sig), "changed after it was signed")
        asyncio.run(manifest.fetch(_served(srv, raw, sig, "/ok.json")))  # the original passes


def test_manifest_signed_by_another_key_refused():
    other = signing_keys.new_private_key()
    raw = manifest_bytes(_doc())
    with FileServer() as srv:
        err = _refused(_served(srv, raw, signing_keys.sign(raw, other)), "not made by a trusted")
    assert "CANTOR_MANIFEST_PUBKEY" in str(err)


@pytest.mark.parametrize(
    "sig, words",
    [
        (b"", "decodes to 0 bytes"),
        (b"not base64 at all!\n", "not valid base64"),
        (b"AAAA\n", "decodes to 3 bytes"),
        (b"\xff\xfe", "not base64 text"),
    ],
)
def test_malformed_signature_refused(sig, words):
    with FileServer() as srv:
        _refused(_served(srv, manifest_bytes(_doc()), sig), words)


def test_no_trusted_key_refuses_even_a_signed_loopback_manifest(monkeypatch):
    monkeypatch.delenv("CANTOR_MANIFEST_PUBKEY")
    assert signing_keys.shipped_keys() == []  # none published yet (docs/manifest.md)
    with FileServer() as srv:
        serve_signed(srv, "/m.json", _doc())
        _refused(srv.url("/m.json"), "no key to check it with")


def test_a_bad_pubkey_variable_is_named(monkeypatch):
    monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", "c2hvcnQ=")
    with FileServer() as srv:
        serve_signed(srv, "/m.json", _doc())
        _refused(srv.url("/m.json"), "public key in CANTOR_MANIFEST_PUBKEY decodes to 5 bytes")


def test_cached_copy_is_checked_again_with_todays_keys(monkeypatch):
    with FileServer() as srv:
        serve_signed(srv, "/m.json", _doc())
        url = srv.url("/m.json")
        monkeypatch.setenv("CANTOR_MANIFEST_URL", url)
        asyncio.run(manifest.fetch())
    assert manifest.current().source == url
    # the key is no longer trusted (rotated out): the cached copy no longer counts
    other = signing_keys.new_private_key()
    monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", signing_keys.public_key_text(other))
    assert manifest.cached() is None and manifest.current().source == "builtin"
    # someone edits the cached file: it no longer counts either
    monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", signing_keys.public_key_text(TEST_KEY))
    cache = manifest._cache_file(url)
    cache.write_bytes(cache.read_bytes().replace(b'"v1"', b'"v9"'))
    assert manifest.current().source == "builtin"


def test_a_refused_manifest_never_falls_back_to_an_earlier_copy(monkeypatch):
    with FileServer() as srv:
        raw = serve_signed(srv, "/m.json", _doc())
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.url("/m.json"))
        asyncio.run(manifest.fetch())
        srv.add_file("/m.json", raw.replace(b'"v1"', b'"v2"'))  # tampered now
        m, note = asyncio.run(manifest.fetch_or_fallback())
    assert m.source == "builtin" and "changed after it was signed" in note


def test_build_on_a_host_the_shipped_manifest_does_not_name():
    doc = _doc()
    doc["families"]["acestep"]["builds"][0]["url"] = "https://evil.example/ace.tar.gz"
    with FileServer() as srv:
        serve_signed(srv, "/m.json", doc)  # signed, but still no
        with pytest.raises(manifest.ManifestError, match="only from github.com") as err:
            asyncio.run(manifest.fetch(srv.url("/m.json")))
    assert "evil.example" in str(err.value)
    assert manifest.build_hosts() == ("github.com",)


# -- redirects --------------------------------------------------------------------------------


def test_loopback_redirect_chain_is_followed_hop_by_hop():
    with FileServer() as srv:
        serve_signed(srv, "/final.json", _doc())
        srv.redirect("/a.json", srv.url("/b.json"))  # /a.json.sig -> /b.json.sig
        srv.redirect("/b.json", srv.url("/final.json"))
        m = asyncio.run(manifest.fetch(srv.url("/a.json")))
        assert len(m.builds) == 1
        assert [
            len(srv.requests_for(p))
            for p in ("/a.json", "/b.json", "/final.json", "/final.json.sig")
        ] == [1, 1, 1, 1]


def _via_evil(evil: HostileServer) -> httpx.AsyncClient:
    """A client that reaches the made-up host evil.example (plain http, not loopback: not an
    allowed URL) through ``evil`` as its proxy."""
    return httpx.AsyncClient(
        mounts={"http://evil.example": httpx.AsyncHTTPTransport(proxy=evil.base_url)}
    )


@pytest.mark.parametrize("bad", ["manifest", "signature"])
def test_a_forbidden_middle_hop_is_refused(bad):
    with FileServer() as srv, HostileServer() as evil:
        raw = serve_signed(srv, "/final.json", _doc())
        hop = "/m.json" if bad == "manifest" else "/m.json.sig"
        if bad == "signature":
            srv.add_file("/m.json", raw)
        srv.redirect(hop, "http://evil.example/bounce")
        evil.redirect("/bounce", srv.url("/final.json" + hop[len("/m.json") :]))

        async def go():
            async with _via_evil(evil) as client:
                # a client that follows blindly ends on an allowed loopback URL with the
                # signed bytes: only the check of the middle hop refuses it
                blind = await client.get(srv.url(hop), follow_redirects=True)
                assert blind.status_code == 200 and str(blind.url).startswith(srv.base_url)
                assert evil.hits("/bounce") == 1
                with pytest.raises(manifest.ManifestRefused, match="evil.example") as err:
                    await manifest.fetch(srv.url("/m.json"), client=client)
                return err.value

        err = asyncio.run(go())
    assert "redirects to http://evil.example/bounce, which is not allowed" in str(err)
    assert evil.hits("/bounce") == 1  # never asked for by the fetch


def test_endless_redirects_stop():
    with FileServer() as srv:
        srv.redirect("/loop.json", srv.url("/loop.json"))
        with pytest.raises(manifest.ManifestUnreachable, match="more than 5 redirects"):
            asyncio.run(manifest.fetch(srv.url("/loop.json")))
        assert len(srv.requests_for("/loop.json")) == 6


# -- size caps: streamed, memory bounded ------------------------------------------------------


def _fetch_measured(url: str) -> tuple[Exception, int]:
    tracemalloc.start()
    try:
        with pytest.raises(manifest.ManifestRefused) as err:
            asyncio.run(manifest.fetch(url))
        return err.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_oversize_body_is_cut_off_while_streaming():
    cap = manifest.MAX_MANIFEST_BYTES
    with HostileServer() as evil:
        evil.endless("/m.json")  # chunked: no size up front, never ends
        err, peak = _fetch_measured(evil.url("/m.json"))
        assert "cut off while streaming" in str(err)
        sent = evil.sent("/m.json")
    assert peak < 3 * cap, f"peak {peak} bytes of Python memory for a {cap}-byte cap"
    assert cap < sent < cap + 64 * 2**20  # stopped soon after the cap (socket buffers)


def test_oversize_declared_body_is_refused_before_reading():
    with HostileServer() as evil:
        evil.endless("/m.json", declare=10**9)
        err, peak = _fetch_measured(evil.url("/m.json"))
        sent = evil.sent("/m.json")
    assert "1000000000 declared" in str(err) and peak < 2**20
    assert sent < 64 * 2**20


def test_oversize_signature_is_cut_off():
    with FileServer() as srv, HostileServer() as evil:
        srv.add_file("/m.json", manifest_bytes(_doc()))
        srv.redirect("/m.json.sig", evil.url("/sig"))
        evil.endless("/sig")
        err = _refused(srv.url("/m.json"), "signature .* larger than 1024 bytes")
    assert "cut off while streaming" in str(err)


def test_an_encoded_body_is_refused():
    """Decompressing would let a small body grow past the cap in one chunk: refused, and the
    request asked for the bytes as they are."""
    import gzip

    with FileServer() as srv, HostileServer() as evil:
        srv.redirect("/m.json", evil.url("/gz"))
        evil.encoded("/gz", gzip.compress(manifest_bytes(_doc())), "gzip")
        _refused(srv.url("/m.json"), "gzip-encoded")
        assert srv.requests_for("/m.json")[0].header("accept-encoding") == "identity"
