"""Signed engine manifests for tests: a test key pair and a way to serve a manifest with its
``.sig`` beside it on a FileServer.

The key pair is made once per test process; ``tests/conftest.py`` trusts its public half
through ``CANTOR_MANIFEST_PUBKEY`` (node processes the tests start inherit it). Nothing here
is trusted outside the tests: the private half lives only in this process's memory.
"""

from __future__ import annotations

import json
from typing import Any

from cantor_desktop.install import signing_keys

TEST_KEY = signing_keys.new_private_key()
TEST_PUBLIC = signing_keys.public_key_text(TEST_KEY)


def manifest_bytes(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1) + "\n").encode()


def serve_signed(server, path: str, doc: Any | bytes, key=TEST_KEY) -> bytes:
    """Serve ``doc`` (a JSON-able object, or exact bytes) at ``path`` and its signature by
    ``key`` at ``path + ".sig"``; returns the bytes served."""
    raw = doc if isinstance(doc, bytes) else manifest_bytes(doc)
    server.add_file(path, raw)
    server.add_file(path + ".sig", signing_keys.sign(raw, key))
    return raw
