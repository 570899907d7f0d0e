"""The node's settings where the node reads them: this home's node.toml, or another node's
own (``GET``/``PATCH /v1/config``). The app's own keys (``app.*``) are always ours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal

from ... import config
from .backends import BackendsService
from .base import OnError, Service


class SettingsService(Service):
    loaded = Signal(dict)  # the settings of a node that is not this home's

    def __init__(self, *args: Any, backends: BackendsService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.backends = backends
        self.node_config: dict[str, Any] = {}

    def change(
        self,
        changes: dict[str, Any],
        on_error: OnError | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        """Change node.toml keys where the node reads them: our file for this home's node,
        the node's ``PATCH /v1/config`` for another (which refuses the keys that may be set
        only on its own machine, with the command to use there)."""
        remote = self.connection.remote
        mine = {k: v for k, v in changes.items() if config.is_app_key(k) or not remote}
        theirs = {k: v for k, v in changes.items() if k not in mine}
        if mine:
            try:
                config.update(mine)
            except config.ConfigError as exc:
                (on_error or self.report)(str(exc))
                return
        if not theirs:
            if on_done is not None:
                on_done()
            return

        async def patch() -> None:
            answer = await self.client.patch_config(theirs)
            self.node_config = dict(answer.get("values") or {})
            self.loaded.emit(self.node_config)
            await self.backends.refresh()
            if on_done is not None:
                on_done()

        self.run("config:" + ",".join(sorted(theirs)), patch(), on_error=on_error)

    async def read(self) -> None:
        """The node's settings as the node reads them (``loaded``)."""
        answer = await self.client.config()
        self.node_config = dict(answer.get("values") or {})
        self.loaded.emit(self.node_config)

    def refresh(self) -> None:
        if self.running:
            self.tasks.start("config:read", self.read())
