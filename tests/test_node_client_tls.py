"""The node client checks certificates for an https:// node (and only loads them there)."""

from __future__ import annotations

import asyncio
import datetime
import ssl

import pytest

from cantor_desktop.nodeclient import NodeClient, NodeError, which_node, NO_NODE


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


async def _tls_health_server(tmp_path):
    """A TLS server answering every request like a node's health (a stranger's certificate)."""
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    answered = []

    async def serve(reader, writer):
        try:
            await reader.readuntil(b"\r\n\r\n")
            body = b'{"status": "ok", "home": "x"}'
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


APP_CLIENT = r"""
import sys
from cantor_desktop.openssl_later import import_asyncio_without_ssl
assert import_asyncio_without_ssl()                     # as the app's main() imports it
import asyncio
from cantor_desktop.nodeclient import NodeClient, NodeError
assert "_ssl" not in sys.modules and asyncio.sslproto.ssl is None

async def main(url, cert_file):
    try:
        async with NodeClient(url, token="t") as client:
            await client.health()
        print("unknown certificate accepted")
    except NodeError as exc:
        print("refused:", "certificate" in str(exc).lower())
    import ssl                                         # loaded by the client's first TLS
    trusted = ssl.create_default_context(cafile=cert_file)
    reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]),
                                                   ssl=trusted)
    writer.write(b"GET /v1/health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    print("answered:", (await reader.readline()).strip().decode())
    writer.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_the_app_gets_tls_when_asyncio_was_imported_without_ssl(tmp_path):
    """The app imports asyncio without ssl (openssl_later): its first https:// node still
    gets a real TLS handshake, with the certificate checked, and TLS works from then on."""
    import subprocess
    import sys

    async def go():
        server, port, answered = await _tls_health_server(tmp_path)
        async with server:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                APP_CLIENT,
                f"https://127.0.0.1:{port}",
                str(tmp_path / "cert.pem"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            return out.decode().split("\n"), err.decode(), answered

    lines, err, answered = asyncio.run(go())
    assert lines[:2] == ["refused: True", "answered: HTTP/1.1 200 OK"], err
    assert answered == [True]


def test_a_home_keeps_its_key_without_openssl(tmp_path):
    """home_key names the node's keyring entry: computed without OpenSSL, it is the same
    SHA-256 the first release stored the token under."""
    import hashlib

    from cantor_desktop import access
    from cantor_desktop.openssl_later import sha256_hex

    state = tmp_path / "state é"
    assert (
        access.home_key(state)
        == hashlib.sha256(str(state.resolve()).encode("utf-8")).hexdigest()[:16]
    )
    assert sha256_hex("") == hashlib.sha256(b"").hexdigest()


def test_an_asyncio_module_left_without_ssl_that_cantor_does_not_know_fails_loudly():
    import types
    import sys

    from cantor_desktop.openssl_later import ssl_for_asyncio

    sys.modules["asyncio.someday"] = stranger = types.ModuleType("asyncio.someday")
    stranger.ssl = None
    try:
        with pytest.raises(RuntimeError, match="asyncio.someday"):
            ssl_for_asyncio()
    finally:
        del sys.modules["asyncio.someday"]
