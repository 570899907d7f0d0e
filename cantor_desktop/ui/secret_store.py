"""The app's own secrets in this machine's keyring (the token of a remote node), read and
written off the GUI thread: the OS keyring can take seconds (D-Bus, an unlock prompt).

Secrets that belong to the node's machine (the Hugging Face token) are not kept here: the
node stores them (``PUT /v1/hub/token``).
"""

from __future__ import annotations

import asyncio
from typing import Callable

from .tasks import Tasks

_tasks = Tasks()


async def read_secret(name: str) -> str | None:
    """The stored secret, or None (none stored, or no keyring here)."""

    def read():
        from ..system.secrets import get_secret

        try:
            return get_secret(name)
        except Exception:
            return None

    return await asyncio.to_thread(read)


async def write_secret(name: str, value: str) -> None:
    """Store ``value`` (an empty value deletes the secret)."""

    def write():
        from ..system.secrets import delete_secret, set_secret

        set_secret(name, value) if value else delete_secret(name)

    await asyncio.to_thread(write)


def save_secret_later(
    name: str,
    value: str,
    said: Callable[[str], None],
    failed: Callable[[str, str], None],
    what: str,
) -> None:
    """Save a secret from a button: ``said(outcome)`` when it is saved (or removed, for an
    empty value), else ``failed(what could not be done, why)``."""
    doing = f"save the {what.lower()}"
    try:
        asyncio.get_running_loop()  # qasync's loop counts as running all along
    except RuntimeError:
        failed(doing, "no event loop")
        return
    _tasks.start(
        f"secret:{name}",
        write_secret(name, value),
        on_done=lambda _r: said(
            f"{what} saved in the keyring" if value else f"{what} removed from the keyring"
        ),
        on_error=lambda text: failed(doing, text),
    )
