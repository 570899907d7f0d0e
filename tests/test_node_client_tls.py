"""The node client checks certificates for an https:// node (and only loads them there)."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
from pathlib import Path

import pytest

from cantor_desktop.client.nodeclient import NodeClient, NodeError, which_node, NO_NODE


def _self_signed(tmp_path):
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def _health(head: bytes, writer) -> bytes:
    """A node's health answer to this request: with the proof of the token "t" when the
    request carries the client's challenge (cantor_desktop.auth.proof)."""
    from cantor_desktop.auth import proof

    line = head.split(b"\r\n")[0].decode()
    if "challenge=" not in line:
        return b'{"status": "ok"}'
    challenge = line.split("challenge=")[1].split()[0]
    port = writer.get_extra_info("sockname")[1]
    answer = proof.answer("t", challenge, port)
    return json.dumps({"status": "ok", "port": port, "proof": answer}).encode()


async def _tls_health_server(tmp_path):
    """A TLS server answering every request like a node's health (a stranger's certificate)."""
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    answered = []

    async def serve(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            body = _health(head, writer)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            answered.append(True)
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1], answered


def test_an_https_node_with_an_unknown_certificate_is_refused(tmp_path):
    async def go():
        server, port, answered = await _tls_health_server(tmp_path)
        async with server:
            url = f"https://127.0.0.1:{port}"
            with pytest.raises(NodeError) as caught:
                async with NodeClient(url, token="t") as client:
                    await client.health()
            assert await which_node(url) == NO_NODE
            return str(caught.value), answered

    message, answered = asyncio.run(go())
    assert "certificate" in message.lower() and answered == []


def test_an_https_node_with_a_trusted_certificate_answers(tmp_path, monkeypatch):
    """A node behind TLS whose certificate chains to an authority in the store (certifi's,
    httpx's default; here one with the test's own authority added) is reached, its name
    checked."""
    certifi = pytest.importorskip("certifi")

    async def go():
        server, port, answered = await _tls_health_server(tmp_path)
        bundle = tmp_path / "authorities.pem"
        bundle.write_bytes(
            Path(certifi.where()).read_bytes() + (tmp_path / "cert.pem").read_bytes()
        )
        monkeypatch.setattr(certifi, "where", lambda: str(bundle))
        async with server:
            url = f"https://127.0.0.1:{port}"
            async with NodeClient(url, token="t") as client:
                health = await client.health()
            return health, answered

    health, answered = asyncio.run(go())
    assert health == {"status": "ok"} and answered == [True, True]  # the proof, then health


def test_a_plain_http_node_never_loads_the_certificate_store(monkeypatch):
    """A node on plain http (the app's own, on loopback) needs no authorities: the store is
    not read for it (~3 MiB and ~20 ms a client)."""
    certifi = pytest.importorskip("certifi")

    def refused():
        raise AssertionError("the certificate store was loaded for plain http")

    monkeypatch.setattr(certifi, "where", refused)

    async def go():
        async def serve(reader, writer):
            body = _health(await reader.readuntil(b"\r\n\r\n"), writer)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            async with NodeClient(url, token="t") as client:
                return await client.health()

    assert asyncio.run(go()) == {"status": "ok"}


def test_a_home_keeps_its_key(tmp_path):
    """home_key names the node's keyring entry: the same SHA-256 the first release stored
    the token under."""
    import hashlib

    from cantor_desktop.auth import access

    state = tmp_path / "state é"
    assert (
        access.home_key(state)
        == hashlib.sha256(str(state.resolve()).encode("utf-8")).hexdigest()[:16]
    )
