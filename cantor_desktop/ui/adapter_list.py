"""The node's LoRA adapters, one list shared by the pages that show them (Compose's
Advanced, the Library).

Read from the node whenever the link reads its models (on connecting, and after every pull,
import or removal) and after each add or remove made here; ``changed`` goes out only when
the list differs. Adding follows the node's rule for paths: this home's node copies a file
or a PEFT folder by path; a node elsewhere gets a ``.safetensors`` file uploaded (checked
here first, so what is not an adapter is never sent)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal

from .tasks import describe_error

log = logging.getLogger(__name__)
_LISTS: "weakref.WeakKeyDictionary[Any, AdapterList]" = weakref.WeakKeyDictionary()
"""The one list of each node link (gone with the link)."""


class AdapterList(QObject):
    changed = Signal(list)  # [adapter dicts as GET /v1/adapters gives them]

    @classmethod
    def of(cls, link) -> "AdapterList":
        """The one list of ``link`` (made when first asked for)."""
        found = _LISTS.get(link)
        if found is None:
            found = _LISTS[link] = cls(link)
        return found

    def __init__(self, link):
        super().__init__(link)
        self.link = link
        self.adapters: list[dict[str, Any]] = []
        self.folder = ""
        self.loaded = False  # the node answered at least once
        link.models_loaded.connect(lambda _models: self.refresh())

    def names(self) -> list[str]:
        return [a["name"] for a in self.adapters]

    def get(self, name: str) -> dict[str, Any] | None:
        return next((a for a in self.adapters if a.get("name") == name), None)

    def refresh(self) -> None:
        if self.link.client is None:
            return
        self.link.tasks.start(
            "adapters:list",
            self.read(),
            on_error=lambda text: log.info("the node's adapters could not be read: %s", text),
        )

    async def read(self) -> list[dict[str, Any]]:
        self.set(await self.link.client.adapters())
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
        on_done: Callable[[list], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """Add each path (a .safetensors file or a PEFT folder); ``on_done([(path, the
        adapter or None, why not)])``; ``on_progress(path, sent, total)`` while uploading."""
        remote = self.link.remote

        async def one(path: str) -> dict:
            if not remote:
                return await self.link.client.add_adapter(path)
            from ..models.adapters import AdapterError, inspect

            if Path(path).is_dir():
                raise AdapterError(
                    "a PEFT folder can be added only on the node's own machine "
                    "(there: Library → Add adapter…, or `cantor adapters add`); "
                    "a .safetensors file can be sent from here"
                )
            await asyncio.to_thread(inspect, Path(path))
            report = (lambda sent, total: on_progress(path, sent, total)) if on_progress else None
            return await self.link.client.upload_adapter(path, on_progress=report)

        async def run() -> list:
            outcomes = []
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

        self._start("adapters:add", run(), on_done, on_error)

    def remove(self, name: str, on_done=None, on_error=None) -> None:
        async def remove():
            try:
                return await self.link.client.remove_adapter(name)
            finally:
                await self.read()

        self._start(f"adapters:remove:{name}", remove(), on_done, on_error)

    def _start(self, key: str, coro, on_done, on_error) -> None:
        if self.link.client is None:
            coro.close()
            (on_error or self.link.error.emit)("the node is not running")
            return
        self.link.tasks.start(key, coro, on_done=on_done, on_error=on_error)
