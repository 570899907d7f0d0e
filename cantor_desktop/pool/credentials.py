"""The pool's secrets on one member, and its name in the pool.

- The Redis password (or ACL user's password): ``CANTOR_POOL_PASSWORD`` when set (a headless
  box), else the URL's when one was given on the command line, else the OS keyring entry
  of this pool (``cantor pool join`` puts it there), else a file only the user can read in
  the state folder (where there is no keyring). Never node.toml, never a log.
- The node id: made once per home (``state/pool-node-id``), the consumer name of this node
  in the pool's consumer group, so a node that restarts finds the songs it held.
- The pool's node token is this home's node token (:mod:`cantor_desktop.auth.access`): every
  member keeps the same one. Redis holds only a check of it (an HMAC), so a member with a
  different token is told so before it joins, and the token itself never crosses Redis.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..system.paths import paths
from .address import PoolAddress
from ..files import write_private_file

PASSWORD_ENV = "CANTOR_POOL_PASSWORD"
NODE_ID_FILE = "pool-node-id"
TOKEN_CHECK_LABEL = b"cantor pool token check v1"


def _keyring_name(address: PoolAddress) -> str:
    return f"pool-password:{address.key}"


def _password_file(address: PoolAddress, state_dir: Path | None = None) -> Path:
    digest = hashlib.sha256(address.key.encode("utf-8")).hexdigest()[:16]
    return (state_dir or paths().state_dir) / f"pool-password-{digest}"


def password(address: PoolAddress) -> str | None:
    """The password to connect with (see the module's order), or None for none."""
    env = os.environ.get(PASSWORD_ENV, "")
    if env:
        return env
    if address.password is not None:
        return address.password
    from ..system.secrets import NoKeyringError, get_secret

    try:
        found = get_secret(_keyring_name(address))
    except NoKeyringError:
        found = None
    if found:
        return found
    try:
        text = _password_file(address).read_text("utf-8")
    except OSError:
        return None
    return text.rstrip("\n") or None


def keep_password(address: PoolAddress, value: str) -> str:
    """Keep the pool's password on this machine; returns where (for the user)."""
    from ..system.secrets import NoKeyringError, get_secret, set_secret

    try:
        set_secret(_keyring_name(address), value)
        if get_secret(_keyring_name(address)) == value.strip():
            _password_file(address).unlink(missing_ok=True)
            return "the OS keyring"
    except NoKeyringError:
        pass
    write_private_file(_password_file(address), value)
    return str(_password_file(address))


def forget_password(address: PoolAddress) -> None:
    from ..system.secrets import NoKeyringError, delete_secret

    try:
        delete_secret(_keyring_name(address))
    except NoKeyringError:
        pass
    _password_file(address).unlink(missing_ok=True)


def node_id(state_dir: Path | None = None) -> str:
    """This home's stable id in any pool (made on first use)."""
    path = (state_dir or paths().state_dir) / NODE_ID_FILE
    try:
        found = path.read_text("utf-8").strip()
    except OSError:
        found = ""
    if found:
        return found
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=30):
        try:
            found = path.read_text("utf-8").strip()
        except OSError:
            found = ""
        if not found:
            found = secrets.token_hex(6)
            from ..files import write_atomic

            write_atomic(path, found.encode("ascii"))
    return found


def token_check(token: str) -> str:
    """What Redis keeps of the pool's token: an HMAC under it, which proves a member holds
    the same token without giving the token to anyone who can read Redis."""
    return hmac.new(token.encode("utf-8"), TOKEN_CHECK_LABEL, hashlib.sha256).hexdigest()


def token_matches(token: str, check: str) -> bool:
    return hmac.compare_digest(token_check(token).encode("ascii"), check.encode("utf-8", "replace"))
