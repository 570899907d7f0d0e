"""Who may publish a manifest, end to end: the signing tool in packaging/, interoperability
with OpenSSL's ed25519, and the CLI and a real node refusing an unsigned or tampered manifest
(nothing downloaded, nothing run) or saying that new builds come with new versions of Cantor
when no manifest is published."""

from __future__ import annotations

import asyncio
import base64
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cantor_desktop.install import signing_keys
from cantor_desktop.system.selfexec import self_argv
from support.fake_builds import BuildServer, make_archive
from support.signed_manifests import TEST_KEY, manifest_bytes

ROOT = Path(__file__).resolve().parent.parent
TOOL = [sys.executable, str(ROOT / "packaging" / "manifest_key.py")]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.node import Node, write_config  # noqa: E402


def tool(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        TOOL + list(args),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


# -- packaging/manifest_key.py ----------------------------------------------------------------


def test_tool_keygen_sign_verify(tmp_path):
    key = tmp_path / "secret" / "manifest.key"
    key.parent.mkdir()
    made = tool("keygen", str(key))
    assert made.returncode == 0, made.stderr
    public = made.stdout.strip()
    assert len(base64.b64decode(public, validate=True)) == 32
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert tool("public", str(key)).stdout.strip() == public
    again = tool("keygen", str(key))
    assert again.returncode != 0 and "never overwritten" in again.stderr

    target = tmp_path / "engines.json"
    shutil.copy(ROOT / "cantor_desktop" / "data" / "engines.json", target)
    signed = tool("sign", str(key), str(target))
    assert signed.returncode == 0, signed.stderr
    sig = Path(str(target) + ".sig").read_bytes()
    # what Cantor itself accepts: the tool's signature with the tool's public key
    trusted = [signing_keys.TrustedKey("tool", public)]
    assert signing_keys.verify(target.read_bytes(), sig, trusted) == "tool"

    # no key trusted but the shipped ones (none yet): refused
    bare = {k: v for k, v in os.environ.items() if k != "CANTOR_MANIFEST_PUBKEY"}
    no_key = subprocess.run(
        TOOL + ["verify", str(target)], capture_output=True, text=True, env=bare, timeout=60
    )
    assert no_key.returncode == 1 and "no key to check it with" in no_key.stderr
    assert tool("verify", str(target), "--pubkey", public).returncode == 0
    assert tool("verify", str(target), env={"CANTOR_MANIFEST_PUBKEY": public}).returncode == 0
    target.write_bytes(target.read_bytes().replace(b"v0.1.1", b"v0.1.2", 1))
    bad = tool("verify", str(target), "--pubkey", public)
    assert bad.returncode == 1 and "changed after it was signed" in bad.stderr


def test_tool_never_signs_a_manifest_cantor_would_refuse(tmp_path):
    key = tmp_path / "k"
    tool("keygen", str(key))
    target = tmp_path / "m.json"
    target.write_bytes(
        manifest_bytes(
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
                                "url": "https://evil.example/a.tar.gz",
                                "sha256": "a" * 64,
                                "size": None,
                                "archive": "tar.gz",
                                "executable": "ace-server",
                            }
                        ]
                    }
                },
            }
        )
    )
    done = tool("sign", str(key), str(target))
    assert done.returncode != 0 and "evil.example" in done.stderr
    assert not Path(str(target) + ".sig").exists()


# -- the real peer: OpenSSL's ed25519 ---------------------------------------------------------

openssl = shutil.which("openssl")
OPENSSL3 = openssl is not None and subprocess.run(
    [openssl, "version"], capture_output=True, text=True
).stdout.startswith("OpenSSL 3")


@pytest.mark.skipif(not OPENSSL3, reason="no OpenSSL 3 (pkeyutl -rawin) on this machine")
def test_openssl_signature_accepted_and_ours_verified_by_openssl(tmp_path):
    raw = (ROOT / "cantor_desktop" / "data" / "engines.json").read_bytes()
    data = tmp_path / "engines.json"
    data.write_bytes(raw)
    pem = tmp_path / "key.pem"
    subprocess.run([openssl, "genpkey", "-algorithm", "ed25519", "-out", str(pem)], check=True)
    der = subprocess.run(
        [openssl, "pkey", "-in", str(pem), "-pubout", "-outform", "DER"],
        check=True,
        capture_output=True,
    ).stdout
    public = base64.b64encode(der[-32:]).decode()  # SPKI: 12-byte prefix + 32 bytes
    sig_bin = tmp_path / "sig.bin"
    subprocess.run(
        [
            openssl,
            "pkeyutl",
            "-sign",
            "-rawin",
            "-inkey",
            str(pem),
            "-in",
            str(data),
            "-out",
            str(sig_bin),
        ],
        check=True,
    )
    trusted = [signing_keys.TrustedKey("openssl", public)]
    assert signing_keys.verify(raw, base64.b64encode(sig_bin.read_bytes()), trusted) == "openssl"
    with pytest.raises(signing_keys.SignatureRefused):
        signing_keys.verify(raw + b" ", base64.b64encode(sig_bin.read_bytes()), trusted)

    # ours, checked by openssl
    from cryptography.hazmat.primitives import serialization

    pub_pem = tmp_path / "ours.pem"
    pub_pem.write_bytes(
        TEST_KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    ours = tmp_path / "ours.sig"
    ours.write_bytes(base64.b64decode(signing_keys.sign(raw, TEST_KEY)))
    checked = subprocess.run(
        [
            openssl,
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            str(pub_pem),
            "-rawin",
            "-in",
            str(data),
            "-sigfile",
            str(ours),
        ],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0 and "Signature Verified Successfully" in checked.stdout


# -- the CLI and the node ---------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + list(args), capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def mac(tmp_path, monkeypatch):
    """A machine the built-in manifest has no build for (macOS arm64): after a refusal,
    nothing at all can be downloaded."""
    monkeypatch.setenv("CANTOR_HW_ROOT", str(tmp_path / "machine"))
    monkeypatch.setenv("CANTOR_HW_OS", "macos")
    monkeypatch.setenv("CANTOR_HW_ARCH", "arm64")
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    return tmp_path


@pytest.fixture
def evil(mac):
    """A manifest server whose cpu build for this machine would leave a marker file when run;
    ``.publish_unsigned()`` / ``.publish_tampered()`` change what it serves."""
    marker = mac / "it-ran"
    script = f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\nexec sleep 30\n".encode()
    with BuildServer(mac / "srv") as srv:
        archive = make_archive(srv.folder / "evil.tar.gz", {"ace-server": script})
        srv.add("cpu", archive, os_name="macos", arch="arm64")
        srv.marker, srv.evil_archive = marker, archive

        def unsigned():
            srv.server.remove_file("/manifest.json.sig")

        def tampered():
            srv.server.add_file("/manifest.json", srv.manifest_raw.replace(b'"test"', b'"test2"'))

        srv.publish_unsigned, srv.publish_tampered = unsigned, tampered
        yield srv


def test_cli_update_without_a_published_manifest_says_so():
    done = _cli("backends", "--update")
    assert done.returncode == 0, done.stderr
    assert "new engine builds come with new versions of Cantor" in done.stdout
    up = _cli("upgrade", "--no-restart")
    assert up.returncode == 0, up.stderr
    assert "new engine builds come with new versions of Cantor" in up.stderr


@pytest.mark.parametrize(
    "how, words", [("unsigned", "no signature"), ("tampered", "changed after it was signed")]
)
def test_cli_refuses_a_bad_manifest_and_runs_nothing(evil, monkeypatch, how, words):
    (evil.publish_unsigned if how == "unsigned" else evil.publish_tampered)()
    monkeypatch.setenv("CANTOR_MANIFEST_URL", evil.manifest_url)
    upd = _cli("backends", "--update")
    assert upd.returncode == 1 and words in upd.stderr
    assert "manifest built into Cantor stays in use" in upd.stderr
    inst = _cli("backends", "--install")
    assert words in inst.stdout and "using the manifest built into Cantor" in inst.stdout
    assert inst.returncode == 1 and "No backend works" in inst.stderr
    assert evil.downloads(evil.evil_archive) == 0 and not evil.marker.exists()


def test_the_signed_manifest_is_used_by_the_cli(evil, monkeypatch):
    """The control: the same server, signed, is trusted (so the refusals above are the
    signature's doing). Its build is downloaded and trial-run."""
    monkeypatch.setenv("CANTOR_MANIFEST_URL", evil.manifest_url)
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "3")
    _cli("backends", "--install")
    assert evil.downloads(evil.evil_archive) == 1 and evil.marker.exists()


def test_node_refuses_a_tampered_manifest(evil, cantor_home):
    evil.publish_tampered()
    write_config(cantor_home)
    env = {"CANTOR_MANIFEST_URL": evil.manifest_url}

    async def main():
        node = await Node(cantor_home, env=env).start()
        try:
            async with node.client() as c:
                update = [item async for item in c.update_backends()]
                install = [item async for item in c.install_backend()]
                return update, install
        finally:
            await node.stop()

    update, install = asyncio.run(main())
    assert update[-1][0] == "error"
    assert "changed after it was signed" in update[-1][1]["message"]
    notes = [d.get("message", "") for e, d in install if e == "note"]
    assert any("changed after it was signed" in n and "built into Cantor" in n for n in notes)
    assert install[-1][0] == "error"
    assert evil.downloads(evil.evil_archive) == 0 and not evil.marker.exists()


def test_node_update_without_a_published_manifest(cantor_home, mac):
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                return [item async for item in c.update_backends()]
        finally:
            await node.stop()

    events = asyncio.run(main())
    assert events[-1][0] == "done", events
    assert any(
        "new engine builds come with new versions of Cantor" in d.get("message", "")
        for e, d in events
        if isinstance(d, dict)
    )
