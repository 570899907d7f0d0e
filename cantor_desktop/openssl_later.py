"""Keep OpenSSL out of the app until it makes a TLS connection.

asyncio imports :mod:`ssl` as it is imported, and :mod:`hashlib` loads OpenSSL's libcrypto
for any hash: together about 5 MiB resident (a fifth of what the app adds to a bare Qt
window), in an app that talks plain HTTP to the node it started and needs TLS only for a
remote ``https://`` node.

- :func:`import_asyncio_without_ssl` imports asyncio with ``ssl`` hidden, so asyncio's
  modules hold ``ssl = None`` (their own fallback for a Python built without it).
- :func:`ssl_for_asyncio` imports ssl when a TLS connection is about to be made and gives
  it to those modules: what they would have had from the start.
- :func:`sha256_hex` is SHA-256 from Python's own implementation, for the short names the
  app derives at start-up (its single-instance socket, the node's home key).

Only the app's entry point hides ssl; the node and the CLI import asyncio as usual.
"""

from __future__ import annotations

import sys

ASYNCIO_SSL_USERS = ("asyncio.base_events", "asyncio.selector_events", "asyncio.sslproto")
"""asyncio's modules that import ssl as they load (3.11 to 3.13); any other asyncio module
left with ``ssl = None`` makes :func:`ssl_for_asyncio` fail loudly, never TLS quietly off."""


def import_asyncio_without_ssl() -> bool:
    """Import asyncio without ssl (True), unless either is imported already (False)."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return False
    sys.modules["ssl"] = None  # `import ssl` raises ImportError while this is here
    try:
        import asyncio  # noqa: F401 - imported for its side effect
    finally:
        if sys.modules.get("ssl", False) is None:
            del sys.modules["ssl"]  # any later `import ssl` loads the real module
    return True


def ssl_for_asyncio():
    """The ssl module, imported now if need be and given to asyncio's modules that were
    imported without it (a no-op when they have it)."""
    import ssl

    for name, module in list(sys.modules.items()):
        if not name.startswith("asyncio.") or getattr(module, "ssl", ssl) is not None:
            continue
        if name not in ASYNCIO_SSL_USERS:
            raise RuntimeError(
                f"{name} was imported without ssl and Cantor does not know "
                "how to give it back: TLS would not work"
            )
        module.ssl = ssl
        if name == "asyncio.sslproto" and not hasattr(module, "SSLAgainErrors"):
            module.SSLAgainErrors = (ssl.SSLWantReadError, ssl.SSLSyscallError)
    return ssl


def sha256_hex(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8) in hex, without loading OpenSSL when Python has its own
    implementation (``_sha2`` from 3.12, ``_sha256`` before); hashlib's otherwise."""
    try:
        from _sha2 import sha256
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256
    return sha256(text.encode("utf-8")).hexdigest()
