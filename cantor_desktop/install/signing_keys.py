"""Who may publish an engine manifest: ed25519 keys and the detached signature check.

A fetched manifest counts only with a signature beside it (``<manifest URL>.sig``: the base64
ed25519 signature of the manifest's exact bytes) made by a trusted key. Trusted keys are those
shipped in the package (``data/manifest_keys.json``) plus one added for this process by
``CANTOR_MANIFEST_PUBKEY`` (tests and private mirrors sign their own manifests). A public key
is its 32 raw bytes in base64. The check itself is the ``cryptography`` library's.

The private half of a key never ships: ``packaging/manifest_key.py`` makes a key pair and
signs a manifest with it (docs/manifest.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from importlib import resources

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import CantorError

PUBKEY_ENV = "CANTOR_MANIFEST_PUBKEY"
KEYS_FILE = "data/manifest_keys.json"
SIGNATURE_BYTES = 64
PUBLIC_KEY_BYTES = 32


class SignatureRefused(CantorError):
    """A signature is missing, malformed, or not by a trusted key; the message says which."""


@dataclass(frozen=True)
class TrustedKey:
    name: str  # where it comes from: its name in the package, or the env var
    public: str  # base64 of the 32 raw bytes

    def key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(decode_public_key(self.public, self.name))


def _b64(text: str | bytes, what: str, size: int) -> bytes:
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError(f"{what} is not base64 text") from None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not valid base64") from None
    if len(raw) != size:
        raise ValueError(f"{what} decodes to {len(raw)} bytes, not {size}")
    return raw


def decode_public_key(text: str, where: str) -> bytes:
    """The 32 raw bytes of a base64 public key; ValueError naming ``where`` otherwise."""
    return _b64(text, f"the ed25519 public key in {where}", PUBLIC_KEY_BYTES)


def shipped_keys() -> list[TrustedKey]:
    """The public keys this release of Cantor carries (may be none)."""
    raw = resources.files("cantor_desktop").joinpath(KEYS_FILE).read_bytes()
    data = json.loads(raw)
    return [
        TrustedKey(name=f"{KEYS_FILE} ({entry['name']})", public=entry["public_key"])
        for entry in data.get("keys", [])
    ]


def trusted_keys() -> list[TrustedKey]:
    """Shipped keys plus ``CANTOR_MANIFEST_PUBKEY``. A malformed env key is a ValueError
    (never silently ignored: the user meant to trust something)."""
    keys = shipped_keys()
    extra = os.environ.get(PUBKEY_ENV, "").strip()
    if extra:
        decode_public_key(extra, PUBKEY_ENV)
        keys.append(TrustedKey(name=PUBKEY_ENV, public=extra))
    return keys


def verify(data: bytes, signature: bytes | str, keys: list[TrustedKey] | None = None) -> str:
    """Check a detached signature over ``data``; returns the name of the key that made it.

    Raises SignatureRefused when the signature text is malformed or no trusted key made it."""
    try:
        keys = trusted_keys() if keys is None else keys
    except ValueError as exc:
        raise SignatureRefused(str(exc)) from None
    if not keys:
        raise SignatureRefused(
            f"there is no key to check it with (this Cantor ships no "
            f"manifest key and {PUBKEY_ENV} is not set)"
        )
    try:
        sig = _b64(signature, "the signature", SIGNATURE_BYTES)
    except ValueError as exc:
        raise SignatureRefused(str(exc)) from None
    for trusted in keys:
        try:
            trusted.key().verify(sig, data)
            return trusted.name
        except InvalidSignature:
            continue
    names = ", ".join(k.name for k in keys)
    raise SignatureRefused(
        f"its signature was not made by a trusted key ({names}), or the "
        f"manifest was changed after it was signed"
    )


# -- making keys and signatures (packaging/manifest_key.py, tests) ---------------------------


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_text(key: Ed25519PrivateKey) -> str:
    """The private key as base64 of its 32 raw bytes (what the key file holds)."""
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode("ascii")


def load_private_key(text: str | bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_b64(text, "the private key", 32))


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def sign(data: bytes, key: Ed25519PrivateKey) -> bytes:
    """The ``.sig`` file's content for ``data``: base64 of the signature and a newline."""
    return base64.b64encode(key.sign(data)) + b"\n"
