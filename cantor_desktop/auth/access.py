"""The node's token: made once per install, kept where only the user can read it, and found
by the node's own clients without the user typing it (Jupyter's model).

Every request to the node carries ``Authorization: Bearer TOKEN``, loopback included: a web
page the user has open can reach 127.0.0.1 but cannot know the token. The node makes the
token on its first start. It lives in the OS keyring when there is one (one entry per home,
so a portable install or a test home never shares another's), else in a file readable only
by the user, ``<state>/node-token`` (0600). ``CANTOR_NODE_TOKEN`` overrides both: the app
hands its child node the token that way, and headless machines without a keyring can too.

This module is shared by the node and its clients (the app, the CLI); it imports no server
code and no Qt.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..errors import CantorError
from ..files import write_private_file
from ..system.paths import HOME_ENV, paths

TOKEN_ENV = "CANTOR_NODE_TOKEN"
FILE_NAME = "node-token"
KEYRING_PREFIX = "node-token"
LEGACY_KEYRING_NAME = "node-token"  # the one token of the first release (beyond loopback)
TOKEN_BYTES = 32


class TokenError(CantorError, RuntimeError):
    """No token can be read or made here."""


def home_key(state_dir: Path | None = None) -> str:
    """A short stable name for one home (its state folder), for the keyring entry."""
    folder = (state_dir or paths().state_dir).expanduser().resolve()
    return hashlib.sha256(str(folder).encode("utf-8")).hexdigest()[:16]


def token_file(state_dir: Path | None = None) -> Path:
    return (state_dir or paths().state_dir) / FILE_NAME


def _keyring_name(state_dir: Path | None) -> str:
    return f"{KEYRING_PREFIX}:{home_key(state_dir)}"


def _read_file(path: Path) -> str | None:
    try:
        text = path.read_text("utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TokenError(f"cannot read the node token in {path}: {exc.strerror or exc}") from None
    return text or None


def _write_file(path: Path, token: str) -> None:
    write_private_file(path, token)


def _keyring_get(name: str) -> str | None:
    from ..system.secrets import NoKeyringError, get_secret

    try:
        return get_secret(name)
    except NoKeyringError:
        return None


def _keyring_set(name: str, token: str) -> bool:
    """Keep the token in the keyring; False when it cannot be kept there (no keyring, or one
    that does not give back what it was given, like keyring's null backend)."""
    from ..system.secrets import NoKeyringError, set_secret

    try:
        set_secret(name, token)
    except NoKeyringError:
        return False
    return _keyring_get(name) == token


def read_token(state_dir: Path | None = None) -> str | None:
    """The token of the node serving this home, or None when it has none yet.

    The environment wins; then the 0600 file (where a node without a keyring keeps it); then
    the keyring entry of this home."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    return home_token(state_dir)


def home_token(state_dir: Path | None = None) -> str | None:
    """The token this home's own node keeps (its 0600 file, else its keyring entry), never
    the one ``CANTOR_NODE_TOKEN`` gives for a node elsewhere."""
    found = _read_file(token_file(state_dir))
    if found:
        return found
    return _keyring_get(_keyring_name(state_dir))


def node_token(*, create: bool, state_dir: Path | None = None) -> str | None:
    """The node's token; with ``create`` one is made (and kept) when there is none yet.

    Two processes asking at once agree on one token (a lock in the state folder)."""
    token = read_token(state_dir)
    if token or not create:
        return token
    from filelock import FileLock

    folder = state_dir or paths().state_dir
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / f"{FILE_NAME}.lock"), timeout=30):
            token = read_token(state_dir)
            if token:
                return token
            token = _adopt_legacy(state_dir) or new_token()
            if not _keyring_set(_keyring_name(state_dir), token):
                _write_file(token_file(state_dir), token)
            return token
    except OSError as exc:
        raise TokenError(
            f"cannot keep a node token in {folder}: {exc.strerror or exc}; or set {TOKEN_ENV}"
        ) from None


def new_token() -> str:
    """A fresh node token: URL-safe base64, never beginning with "-". A user pastes it
    after ``--token`` (``cantor pool join … --token T``), where a leading "-" reads as an
    option and argparse refuses it ("expected one argument"): one token in 64 did."""
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def _adopt_legacy(state_dir: Path | None) -> str | None:
    """The default home keeps the token its first release made (remote apps hold it)."""
    if state_dir is not None or os.environ.get(HOME_ENV):
        return None
    return _keyring_get(LEGACY_KEYRING_NAME)


REPORT_ENV = "CANTOR_REPORT_TOKEN"
REPORT_PREFIX = "cantor-node-token "
"""A node started with ``REPORT_ENV=1`` writes ``REPORT_PREFIX + token`` as the one line on
its standard output (a pipe to its parent): the app that starts its node learns the token
without opening the OS keyring itself."""


def report_token(token: str) -> None:
    """Tell the parent the token on stdout, then leave stdout to nothing (nobody reads it
    after this line; a full pipe must never block the node)."""
    import sys

    if os.environ.pop(REPORT_ENV, None) != "1":
        return
    sys.stdout.write(REPORT_PREFIX + token + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented token with the node's."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def bearer(token: str | None) -> dict[str, str]:
    """The request header that carries ``token`` (none for None)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def keep_token(token: str, state_dir: Path | None = None) -> str:
    """Make ``token`` this home's node token from now on (a pool's members share one):
    kept in the keyring when it keeps it (a 0600 file left by an earlier token goes), else
    in the 0600 file. Returns where it is kept, for the user."""
    from filelock import FileLock

    folder = state_dir or paths().state_dir
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / f"{FILE_NAME}.lock"), timeout=30):
        if _keyring_set(_keyring_name(state_dir), token):
            token_file(state_dir).unlink(missing_ok=True)
            return "the OS keyring"
        write_private_file(token_file(state_dir), token)
        return str(token_file(state_dir))
