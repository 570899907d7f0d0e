"""`cantor login [--token T] [--status] [--logout]`: the Hugging Face token in the OS keyring.

HF_TOKEN in the environment always wins over the stored token and works where no keyring
exists. Exit 0 done, 1 no keyring / failed, 2 bad input (an empty token).
"""

from __future__ import annotations

import getpass
import os
import sys

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def register(sub) -> None:
    p = sub.add_parser(
        "login",
        help="store a Hugging Face token in the OS keyring",
        description="Store a Hugging Face token (for gated models) in the OS "
        "keyring. Without --token it is read from stdin, or asked "
        "for without echo on a terminal.",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--token", metavar="T", help="the token (beware: visible in shell history)")
    g.add_argument("--status", action="store_true", help="say which token would be used")
    g.add_argument("--logout", action="store_true", help="delete the stored token")
    p.set_defaults(func=run)


def _masked(token: str) -> str:
    return token[:3] + "…" + token[-4:] if len(token) > 10 else "…"


def run(args) -> int:
    from ..system import secrets

    try:
        if args.status:
            env = os.environ.get("HF_TOKEN", "").strip()
            if env:
                print(f"HF_TOKEN is set in the environment ({_masked(env)}); it is used first")
            try:
                stored = secrets.get_secret(secrets.HF_TOKEN)
            except secrets.NoKeyringError as exc:
                print(str(exc))
                return EXIT_OK if env else EXIT_FAILED
            if stored:
                print(
                    f"a token is stored in the keyring ({_masked(stored)}; "
                    f"{secrets.keyring_name()})"
                )
            elif not env:
                print("no Hugging Face token: run `cantor login` or set HF_TOKEN")
            return EXIT_OK
        if args.logout:
            removed = secrets.delete_secret(secrets.HF_TOKEN)
            print("token deleted from the keyring" if removed else "no token was stored")
            return EXIT_OK
        token = args.token
        if token is None:
            if sys.stdin.isatty():
                token = getpass.getpass("Hugging Face token: ")
            else:
                token = sys.stdin.readline()
        token = (token or "").strip()
        if not token:
            print("cantor login: the token is empty", file=sys.stderr)
            return EXIT_USAGE
        if any(c.isspace() for c in token):
            print("cantor login: a token has no spaces in it", file=sys.stderr)
            return EXIT_USAGE
        secrets.set_secret(secrets.HF_TOKEN, token)
        print(f"token saved in the OS keyring ({secrets.keyring_name()})")
        return EXIT_OK
    except secrets.NoKeyringError as exc:
        print(f"cantor login: {exc}", file=sys.stderr)
        return EXIT_FAILED
