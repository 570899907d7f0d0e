#!/usr/bin/env python3
"""Make the key that signs Cantor's engine manifest, sign a manifest, check a signature.

    packaging/manifest_key.py keygen KEYFILE            # new ed25519 key pair; prints the public key
    packaging/manifest_key.py public KEYFILE            # print the public key of a private key
    packaging/manifest_key.py sign KEYFILE engines.json # writes engines.json.sig
    packaging/manifest_key.py verify engines.json [--sig FILE] [--pubkey BASE64]

KEYFILE holds the private key (base64 of its 32 raw bytes), written 0600 and never over an
existing file. Keep it outside the repository (a password manager, a hardware token, the CI
secret store): whoever has it decides what every Cantor install downloads and runs.

``verify`` checks against the keys this checkout ships (cantor_desktop/data/
manifest_keys.json) plus ``--pubkey`` or CANTOR_MANIFEST_PUBKEY, exactly as Cantor does.
The publishing and key rotation steps are in docs/manifest.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cantor_desktop.install import manifest, signing_keys  # noqa: E402


def _read_private(path: Path):
    try:
        return signing_keys.load_private_key(path.read_bytes())
    except ValueError as exc:
        sys.exit(f"manifest_key: {path}: {exc}")


def keygen(args) -> int:
    path = Path(args.keyfile)
    key = signing_keys.new_private_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        sys.exit(f"manifest_key: {path} exists; a key is never overwritten")
    with os.fdopen(fd, "w") as fh:
        fh.write(signing_keys.private_key_text(key) + "\n")
    print(signing_keys.public_key_text(key))
    print(
        f"private key written to {path} (keep it out of the repository); the line above is "
        f"the public key for cantor_desktop/data/manifest_keys.json",
        file=sys.stderr,
    )
    return 0


def public(args) -> int:
    print(signing_keys.public_key_text(_read_private(Path(args.keyfile))))
    return 0


def sign(args) -> int:
    key = _read_private(Path(args.keyfile))
    target = Path(args.manifest)
    raw = target.read_bytes()
    try:
        manifest.parse_bytes(raw, str(target))  # never sign a manifest Cantor would refuse
    except manifest.ManifestError as exc:
        sys.exit(f"manifest_key: not signed: {exc}")
    sig_path = Path(args.out or f"{target}.sig")
    sig_path.write_bytes(signing_keys.sign(raw, key))
    print(f"{sig_path}: signed by {signing_keys.public_key_text(key)}")
    return 0


def verify(args) -> int:
    target = Path(args.manifest)
    raw = target.read_bytes()
    sig = Path(args.sig or f"{target}.sig").read_bytes()
    keys = signing_keys.shipped_keys()
    try:
        if args.pubkey:
            signing_keys.decode_public_key(args.pubkey, "--pubkey")
            keys.append(signing_keys.TrustedKey("--pubkey", args.pubkey))
        else:
            keys = signing_keys.trusted_keys()
        name = signing_keys.verify(raw, sig, keys)
        manifest.parse_bytes(raw, str(target))
    except (ValueError, signing_keys.SignatureRefused, manifest.ManifestError) as exc:
        print(f"manifest_key: {target}: refused: {exc}", file=sys.stderr)
        return 1
    print(f"{target}: signature good ({name})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("keygen", help="make a key pair; print the public key")
    p.add_argument("keyfile")
    p.set_defaults(func=keygen)
    p = sub.add_parser("public", help="print the public key of a private key file")
    p.add_argument("keyfile")
    p.set_defaults(func=public)
    p = sub.add_parser("sign", help="write MANIFEST.sig")
    p.add_argument("keyfile")
    p.add_argument("manifest")
    p.add_argument("--out", help="where to write the signature (default: MANIFEST.sig)")
    p.set_defaults(func=sign)
    p = sub.add_parser("verify", help="check MANIFEST.sig as Cantor does")
    p.add_argument("manifest")
    p.add_argument("--sig", help="the signature file (default: MANIFEST.sig)")
    p.add_argument("--pubkey", help="trust this public key (base64) besides the shipped ones")
    p.set_defaults(func=verify)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
