#!/usr/bin/env python3
"""Authenticode-sign Cantor's Windows executables and its MSI with osslsigncode (Debian's
package), and verify them: SmartScreen stops an unsigned first install.

    installer/windows/sign.py FILE... --pkcs12 CERT.p12 --password-env VAR
                              [--timestamp URL] [--ca CA.pem]

The certificate's password is read from the environment variable named (a CI secret) and
handed to osslsigncode in a file only this user can read (``-readpass``), never on a command
line. Each file is signed into a copy (SHA-256 digest, the product's name and address, an
RFC 3161 timestamp when ``--timestamp`` names a server) that replaces it once signed, and
verified (against ``--ca`` when given: the throw-away CA of the tests). The release's
certificate comes from the release secret store; the tests make a throw-away one.

Python 3.11 standard library only; every command is run with an argument list.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NAME = "Cantor"
URL = "https://github.com/cantor-desktop/cantor"


class SigningError(RuntimeError):
    pass


def _tool() -> str:
    return os.environ.get("OSSLSIGNCODE", "osslsigncode")


def sign(path: Path, pkcs12: Path, password: str, *, timestamp: str | None = None) -> Path:
    """Sign ``path`` in place (through a copy): SigningError with osslsigncode's words."""
    path = Path(path)
    signed = path.with_name(path.name + ".signed")
    with tempfile.NamedTemporaryFile("w", delete=False, prefix="cantor-sign-") as fh:
        os.chmod(fh.name, 0o600)
        fh.write(password)
        secret = fh.name
    try:
        argv = [
            _tool(),
            "sign",
            "-pkcs12",
            str(pkcs12),
            "-readpass",
            secret,
            "-n",
            NAME,
            "-i",
            URL,
            "-h",
            "sha256",
        ]
        if timestamp:
            argv += ["-ts", timestamp]
        argv += ["-in", str(path), "-out", str(signed)]
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode != 0 or not signed.is_file():
            signed.unlink(missing_ok=True)
            raise SigningError(f"{path.name}: {(run.stderr or run.stdout).strip()[-600:]}")
        os.replace(signed, path)
    finally:
        os.unlink(secret)
    return path


def verify(path: Path, ca: Path | None = None) -> str:
    """osslsigncode's report of ``path``'s signature; SigningError when it does not hold."""
    argv = [_tool(), "verify"]
    if ca is not None:
        argv += ["-CAfile", str(ca)]
    argv += ["-in", str(path)]
    run = subprocess.run(argv, capture_output=True, text=True)
    report = run.stdout + run.stderr
    if run.returncode != 0 or "Signature verification: ok" not in report:
        raise SigningError(f"{Path(path).name}: the signature does not hold:\n{report[-800:]}")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--pkcs12", type=Path, required=True, help="the certificate and its key")
    ap.add_argument("--password-env", required=True, help="environment variable with its password")
    ap.add_argument("--timestamp", help="an RFC 3161 timestamp server")
    ap.add_argument("--ca", type=Path, help="verify against this CA (tests)")
    args = ap.parse_args(argv)
    password = os.environ.get(args.password_env)
    if password is None:
        print(f"sign.py: {args.password_env} is not set", file=sys.stderr)
        return 1
    try:
        for path in args.files:
            sign(path, args.pkcs12, password, timestamp=args.timestamp)
            verify(path, args.ca)
            print(f"signed and verified: {path}")
    except SigningError as exc:
        print(f"sign.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
