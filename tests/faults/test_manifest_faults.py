"""Manifest faults: a published manifest that no trusted key signed, or that is served in a
hostile way, is refused; Cantor keeps the built-in manifest, caches nothing, and holds a
bounded amount of memory. Real servers on 127.0.0.1; the made-up host evil.example is reached
through a local proxy. The control cases (a good signed manifest, directly and through
loopback redirects) must be accepted, or the refusals prove nothing.

Run with ``pytest -m slow tests/faults/test_manifest_faults.py -s``: prints tried/survived/lost.
"""

from __future__ import annotations

import asyncio
import gzip
import re
import sys
import tracemalloc
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cantor_desktop.install import manifest, signing_keys  # noqa: E402
from support.hostile_http import HostileServer  # noqa: E402
from support.http_files import FileServer  # noqa: E402
from support.signed_manifests import TEST_KEY, manifest_bytes  # noqa: E402

pytestmark = pytest.mark.slow

GITHUB = "https://github.com/pwilkin/acestep.cpp/releases/download/v9"
MAX_PEAK = 16 * 2**20
OTHER_KEY = signing_keys.new_private_key()


def _doc(url: str = f"{GITHUB}/a.tar.gz") -> dict:
    return {
        "schema": 1,
        "published": "fault",
        "families": {
            "acestep": {
                "builds": [
                    {
                        "backend": "cpu",
                        "os": "linux",
                        "arch": "x86_64",
                        "version": "v9",
                        "url": url,
                        "sha256": "b" * 64,
                        "size": None,
                        "archive": "tar.gz",
                        "executable": "ace-server",
                        "env": {"GGML_BACKEND": "CPU"},
                    }
                ]
            }
        },
    }


GOOD = manifest_bytes(_doc())


def _sig(raw: bytes, key=TEST_KEY) -> bytes:
    return signing_keys.sign(raw, key)


def _case(srv: FileServer, evil: HostileServer, name: str) -> tuple[str, str | None]:
    """Set up one fault under /NAME.json; returns (URL to fetch, words the refusal must
    hold, or None for a control case that must be accepted)."""
    p = f"/{name}.json"
    url = srv.url(p)

    def serve(raw: bytes, sig: bytes | None):
        srv.add_file(p, raw)
        if sig is not None:
            srv.add_file(p + ".sig", sig)

    if name == "control-signed":
        serve(GOOD, _sig(GOOD))
        return url, None
    if name == "control-loopback-redirects":
        serve(GOOD, _sig(GOOD))
        srv.redirect(f"/{name}-start", url)
        return srv.url(f"/{name}-start"), None
    if name == "unsigned":
        serve(GOOD, None)
        return url, "no signature"
    if name == "sig-404-after-redirect":
        serve(GOOD, None)
        srv.redirect(p + ".sig", srv.url("/nowhere.sig"))
        return url, "no signature"
    if name == "sig-empty":
        serve(GOOD, b"")
        return url, "decodes to 0 bytes"
    if name == "sig-not-base64":
        serve(GOOD, b"#!/bin/sh\n")
        return url, "not valid base64"
    if name == "sig-wrong-length":
        serve(GOOD, _sig(GOOD)[:40] + b"\n")
        return url, "not 64"
    if name == "sig-binary":
        serve(GOOD, b"\x00\xff" * 32)
        return url, "not base64 text"
    if name == "wrong-key":
        serve(GOOD, _sig(GOOD, OTHER_KEY))
        return url, "not made by a trusted key"
    if name == "tampered-byte":
        serve(GOOD.replace(b'"v9"', b'"v8"'), _sig(GOOD))
        return url, "changed after it was signed"
    if name == "tampered-build-added":
        doc = _doc()
        doc["families"]["acestep"]["builds"].append(
            dict(doc["families"]["acestep"]["builds"][0], backend="vulkan")
        )
        serve(manifest_bytes(doc), _sig(GOOD))
        return url, "changed after it was signed"
    if name == "tampered-whitespace":
        serve(GOOD.replace(b"\n", b"\r\n"), _sig(GOOD))
        return url, "changed after it was signed"
    if name == "signature-of-another-manifest":
        serve(GOOD, _sig(manifest_bytes(_doc(f"{GITHUB}/other.tar.gz"))))
        return url, "changed after it was signed"
    if name == "signed-build-on-foreign-host":
        raw = manifest_bytes(_doc("https://evil.example/ace.tar.gz"))
        serve(raw, _sig(raw))
        return url, "only from github.com"
    if name == "signed-build-on-lookalike-host":
        raw = manifest_bytes(_doc("https://github.com.evil.example/ace.tar.gz"))
        serve(raw, _sig(raw))
        return url, "not github.com.evil.example"
    if name == "signed-build-plain-http":
        raw = manifest_bytes(_doc("http://github.com/ace.tar.gz"))
        serve(raw, _sig(raw))
        return url, "plain http only to"
    if name == "middle-hop-plain-http":
        serve(GOOD, _sig(GOOD))
        srv.redirect(f"/{name}-start", "http://evil.example/bounce")
        evil.redirect("/bounce", url)
        return srv.url(f"/{name}-start"), "redirects to http://evil.example/bounce"
    if name == "sig-middle-hop-plain-http":
        srv.add_file(p, GOOD)
        srv.add_file("/real.sig", _sig(GOOD))
        srv.redirect(p + ".sig", "http://evil.example/sig-bounce")
        evil.redirect("/sig-bounce", srv.url("/real.sig"))
        return url, "redirects to http://evil.example/sig-bounce"
    if name == "redirect-to-file":
        srv.redirect(p, "file:///etc/passwd")
        return url, "redirects to file://.*/etc/passwd, which is not allowed"
    if name == "endless-redirects":
        srv.redirect(p, url)
        return url, "more than 5 redirects"
    if name == "endless-body":
        srv.redirect(p, evil.url("/endless"))
        evil.endless("/endless")
        return url, "cut off while streaming"
    if name == "body-declared-1GB":
        srv.redirect(p, evil.url("/declared"))
        evil.endless("/declared", declare=10**9)
        return url, "1000000000 declared"
    if name == "endless-sig":
        srv.add_file(p, GOOD)
        srv.redirect(p + ".sig", evil.url("/endless-sig"))
        evil.endless("/endless-sig")
        return url, "signature .* larger than 1024"
    if name == "gzip-encoded":
        srv.redirect(p, evil.url("/gz"))
        evil.encoded("/gz", gzip.compress(GOOD), "gzip")
        return url, "gzip-encoded"
    if name == "not-json-but-signed":
        raw = b"#!/bin/sh\nrm -rf ~\n"
        serve(raw, _sig(raw))
        return url, "not valid JSON"
    raise ValueError(name)


CASES = [
    "control-signed",
    "control-loopback-redirects",
    "unsigned",
    "sig-404-after-redirect",
    "sig-empty",
    "sig-not-base64",
    "sig-wrong-length",
    "sig-binary",
    "wrong-key",
    "tampered-byte",
    "tampered-build-added",
    "tampered-whitespace",
    "signature-of-another-manifest",
    "signed-build-on-foreign-host",
    "signed-build-on-lookalike-host",
    "signed-build-plain-http",
    "middle-hop-plain-http",
    "sig-middle-hop-plain-http",
    "redirect-to-file",
    "endless-redirects",
    "endless-body",
    "body-declared-1GB",
    "endless-sig",
    "gzip-encoded",
    "not-json-but-signed",
]


async def _try(url: str, words: str | None, evil: HostileServer, monkeypatch) -> str | None:
    """Fetch as --update does (fetch), then as install and --use do (fetch_or_fallback)."""
    monkeypatch.setenv("CANTOR_MANIFEST_URL", url)
    mounts = {"http://evil.example": httpx.AsyncHTTPTransport(proxy=evil.base_url)}
    tracemalloc.start()
    try:
        async with httpx.AsyncClient(mounts=mounts, timeout=20) as client:
            try:
                m = await manifest.fetch(url, client=client)
            except manifest.ManifestError as exc:
                if words is None:
                    return f"control refused: {exc}"
                if not re.search(words, str(exc)):
                    return f"refused, but the message does not say why: {exc}"
            else:
                if words is not None:
                    return f"accepted ({len(m.builds)} builds)"
                return None if m.source == url else f"control from {m.source}"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if peak > MAX_PEAK:
        return f"held {peak} bytes of memory"
    if manifest.cached(url) is not None or manifest._cache_file(url).exists():
        return "kept a copy of a refused manifest"
    if "evil.example/" in words and evil.hits("/bounce") + evil.hits("/sig-bounce"):
        return "asked evil.example for a hop it should have refused"
    fallback, note = await manifest.fetch_or_fallback()  # what install and --use get
    if fallback.source != "builtin" or "built into Cantor" not in note:
        return f"fell back to {fallback.source} ({note!r})"
    return None


def test_manifest_faults(tmp_path, monkeypatch, tally):
    t = tally("manifest faults: signatures, redirects, size caps, build hosts")
    with FileServer() as srv, HostileServer() as evil:
        for name in CASES:
            url, words = _case(srv, evil, name)
            problem = asyncio.run(_try(url, words, evil, monkeypatch))
            if problem is None:
                t.ok()
            else:
                t.fail(f"{name}: {problem}")
    assert not t.lost, t.lost
