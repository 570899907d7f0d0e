"""The node's styles, one list shared by the pages that use them (Compose applies and saves
them, Songs saves a song's recipe as one). Read on connecting and after each change made
here; ``changed`` goes out when the list differs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal

from .base import OnDone, OnError, Service

log = logging.getLogger(__name__)


class StylesService(Service):
    changed = Signal(list)  # [style dicts as GET /v1/styles gives them]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.styles: list[dict[str, Any]] = []

    def get(self, name: str) -> dict[str, Any] | None:
        return next((s for s in self.styles if s.get("name") == name), None)

    def refresh(self) -> None:
        if not self.running:
            return
        self.tasks.start(
            "styles:list",
            self.read(),
            on_error=lambda text: log.info("the node's styles could not be read: %s", text),
        )

    async def read(self) -> list[dict[str, Any]]:
        found = await self.client.styles()
        if found != self.styles:
            self.styles = found
            self.changed.emit(found)
        return found

    def _then_read(self, key: str, coro: Any, on_done: OnDone | None, on_error: OnError | None):
        async def run() -> Any:
            try:
                return await coro
            finally:
                await self.read()

        self.run(key, run(), on_done, on_error)

    def save(
        self,
        name: str,
        body: dict[str, Any],
        on_done: OnDone | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """Keep a style (``body``: fields, seed, reference, from, replace)."""
        self._then_read(
            f"styles:save:{name}", self.client.save_style(name, **body), on_done, on_error
        )

    def remove(self, name: str, on_done: OnDone | None = None, on_error: OnError | None = None):
        self._then_read(f"styles:remove:{name}", self.client.remove_style(name), on_done, on_error)

    def rename(
        self, name: str, new: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        self._then_read(
            f"styles:rename:{name}", self.client.rename_style(name, new), on_done, on_error
        )

    def export(
        self, name: str, path: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        """Write the style as one file at ``path`` (its sound inside)."""

        async def export() -> str:
            data = await self.client.export_style(name)
            await asyncio.to_thread(Path(path).write_bytes, data)
            return path

        self.run(f"styles:export:{name}", export(), on_done, on_error)

    def import_file(
        self, path: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        async def take() -> dict[str, Any]:
            data = await asyncio.to_thread(Path(path).read_bytes)
            return await self.client.import_style(data)

        self._then_read(f"styles:import:{path}", take(), on_done, on_error)
