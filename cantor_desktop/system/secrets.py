"""Secrets (the Hugging Face token, a node token) kept in the OS keyring.

Every secret lives under the service name ``cantor``. Where the machine has no usable keyring
backend (a headless Linux box without Secret Service, for instance) every call raises
:class:`NoKeyringError`, whose message tells the user to use the environment variable instead.
"""

from __future__ import annotations

import keyring
import keyring.backends.fail
import keyring.errors

from ..errors import CantorError

SERVICE = "cantor"

HF_TOKEN = "hf_token"
"""Name of the Hugging Face token (the environment variable HF_TOKEN wins over it)."""


ENV_HINTS = {HF_TOKEN: "HF_TOKEN", "node-token": "CANTOR_NODE_TOKEN"}
"""The environment variable that replaces a secret where no keyring exists."""


class NoKeyringError(CantorError, RuntimeError):
    """No OS keyring can store secrets here."""

    def __init__(self, detail: str = "", env_hint: str | None = "HF_TOKEN"):
        if env_hint:
            message = f"no OS keyring is available here; set {env_hint} instead"
        else:
            message = "no OS keyring is available here; the token cannot be stored"
        if detail:
            message += f" ({detail})"
        super().__init__(message)


def _backend(hint: str | None = "HF_TOKEN"):
    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # a broken keyring configuration
        raise NoKeyringError(str(exc), hint) from None
    if isinstance(backend, keyring.backends.fail.Keyring):
        raise NoKeyringError("", hint)
    if type(backend).__name__ == "ChainerBackend" and not getattr(backend, "backends", None):
        raise NoKeyringError("", hint)  # a chain of nothing: no viable backend
    return backend


def _call(name: str, action: str, fn):
    hint = ENV_HINTS.get(name)
    backend = _backend(hint)
    try:
        return fn(backend)
    except keyring.errors.KeyringLocked as exc:
        raise NoKeyringError(f"the keyring is locked: {exc}", hint) from None
    except (keyring.errors.NoKeyringError, keyring.errors.InitError) as exc:
        raise NoKeyringError(str(exc), hint) from None
    except keyring.errors.KeyringError as exc:
        raise NoKeyringError(f"the keyring could not {action} {name}: {exc}", hint) from None


def get_secret(name: str) -> str | None:
    """The stored secret, or None when none is stored."""
    value = _call(name, "read", lambda b: b.get_password(SERVICE, name))
    return value or None


def set_secret(name: str, value: str) -> None:
    """Store (or replace) a secret. An empty value is refused: use delete_secret."""
    if not value or not value.strip():
        raise ValueError(f"refusing to store an empty {name}")
    _call(name, "store", lambda b: b.set_password(SERVICE, name, value.strip()))


def delete_secret(name: str) -> bool:
    """Remove a secret; True when one was removed, False when there was none."""

    def _delete(backend):
        try:
            backend.delete_password(SERVICE, name)
            return True
        except keyring.errors.PasswordDeleteError:
            return False

    return bool(_call(name, "delete", _delete))


def keyring_name() -> str:
    """A short description of the keyring in use (for `cantor login --status`)."""
    backend = _backend()
    return f"{type(backend).__module__}.{type(backend).__name__}"
