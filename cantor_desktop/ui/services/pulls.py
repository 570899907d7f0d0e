"""Model downloads on the node: each pull's typed events
(:class:`~cantor_desktop.models.events.PullEvent`) as they come, pause (the .part files stay
and the next pull resumes them) and discard (the node deletes them)."""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtCore import Signal

from ..tasks import describe_error
from .base import opened, OnDone, OnError, Service
from .models import ModelsService


class PullsService(Service):
    changed = Signal(str, object)  # model name, PullEvent (the node's, or paused/failed)

    def __init__(self, *args: Any, models: ModelsService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.models = models

    def pull(self, name: str) -> None:
        """Download a model on the node; every step goes out on ``changed`` as a
        PullEvent, ending with ``done``, ``failed`` or ``paused``."""
        from ...models.events import PullEvent

        async def pull() -> None:
            ended = False
            try:
                async with opened(self.client.pull(name)) as stream:
                    async for event in stream:
                        ended = event.is_terminal
                        self.changed.emit(name, event)
                        if ended:
                            return
                self.changed.emit(
                    name, PullEvent.failed(name, "the node ended the download without finishing it")
                )
            except asyncio.CancelledError:
                if not ended:
                    self.changed.emit(name, PullEvent.paused(name))
                raise
            except Exception as exc:
                self.changed.emit(
                    name, PullEvent.failed(name, describe_error(exc), type(exc).__name__)
                )
            finally:
                self.models.refresh_later()

        if not self.running:
            pull().close()
            self.changed.emit(name, PullEvent.failed(name, "the node is not running"))
            return
        self.tasks.start(f"pull:{name}", pull())

    def pause(self, name: str) -> None:
        """Stop the transfer; the .part files stay and pulling again resumes them."""
        self.tasks.cancel(f"pull:{name}")

    def discard(self, name: str, on_done: OnDone | None = None, on_error: OnError | None = None):
        """Stop a pull and delete what it left on the node (its .part files);
        ``on_done(answer)`` with what was deleted, ``on_error(text)`` with why not."""
        self.pause(name)

        async def discard() -> dict[str, Any]:
            try:
                return await self.client.discard_parts(name)
            finally:
                await self.models.refresh()

        self.run(f"discard:{name}", discard(), on_done, on_error)
