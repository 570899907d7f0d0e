"""The node's LoRA adapters, one list shared by the pages that show them (Compose's
Advanced, the Library).

Read from the node whenever the models are read (on connecting, and after every pull, import
or removal) and after each add or remove made here; ``changed`` goes out only when the list
differs. Adding follows the node's rule for paths: this home's node copies a file or a PEFT
folder by path; a node elsewhere gets a ``.safetensors`` file uploaded (checked here first,
so what is not an adapter is never sent)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal

from ..tasks import describe_error
from .base import OnDone, OnError, Service
from .models import ModelsService

log = logging.getLogger(__name__)

AddOutcome = tuple[str, dict[str, Any] | None, str]
"""(path, the adapter as the node lists it or None, why not)"""


class AdaptersService(Service):
    changed = Signal(list)  # [adapter dicts as GET /v1/adapters gives them]

    def __init__(self, *args: Any, models: ModelsService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.adapters: list[dict[str, Any]] = []
        self.folder = ""
        self.loaded = False  # the node answered at least once
        models.loaded.connect(self._models_loaded)

    def _models_loaded(self, _models: list) -> None:
        self.refresh()

    def names(self) -> list[str]:
        return [a["name"] for a in self.adapters]

    def get(self, name: str) -> dict[str, Any] | None:
        return next((a for a in self.adapters if a.get("name") == name), None)

    def refresh(self) -> None:
        if not self.running:
            return
        self.tasks.start(
            "adapters:list",
            self.read(),
            on_error=lambda text: log.info("the node's adapters could not be read: %s", text),
        )

    async def read(self) -> list[dict[str, Any]]:
        self.set(await self.client.adapters())
        return self.adapters

    def set(self, answer: dict[str, Any]) -> None:
        items = [dict(a) for a in answer.get("adapters") or [] if isinstance(a, dict)]
        self.folder = str(answer.get("folder") or "")
        if items != self.adapters or not self.loaded:
            self.adapters, self.loaded = items, True
            self.changed.emit(list(items))

    # -- changes --------------------------------------------------------------------------
    def add(
        self,
        paths: list[str],
        on_done: Callable[[list[AddOutcome]], None] | None = None,
        on_error: OnError | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """Add each path (a .safetensors file or a PEFT folder); ``on_done([(path, the
        adapter or None, why not)])``; ``on_progress(path, sent, total)`` while uploading."""
        remote = self.connection.remote

        async def one(path: str) -> dict[str, Any]:
            if not remote:
                return await self.client.add_adapter(path)
            from ...models.adapters import AdapterError, inspect

            if Path(path).is_dir():
                raise AdapterError(
                    "a PEFT folder can be added only on the node's own machine "
                    "(there: Library → Add adapter…, or `cantor adapters add`); "
                    "a .safetensors file can be sent from here"
                )
            await asyncio.to_thread(inspect, Path(path))

            def report(sent: int, total: int) -> None:
                if on_progress is not None:
                    on_progress(path, sent, total)

            return await self.client.upload_adapter(path, on_progress=report)

        async def run() -> list[AddOutcome]:
            outcomes: list[AddOutcome] = []
            try:
                for path in paths:
                    try:
                        outcomes.append((path, await one(path), ""))
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        outcomes.append((path, None, describe_error(exc)))
            finally:
                await self.read()
            return outcomes

        self.run("adapters:add", run(), on_done, on_error)

    def remove(
        self, name: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        async def remove() -> dict[str, Any]:
            try:
                return await self.client.remove_adapter(name)
            finally:
                await self.read()

        self.run(f"adapters:remove:{name}", remove(), on_done, on_error)
