"""The node's machine and its engines: ``GET /v1/system`` (the hardware, each backend's
state, the model loaded, whether the node is in a pool) and the backend actions — use one
(fetch, trial-load, pin), update them, find the best — whose events go out as they come."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from PySide6.QtCore import Signal

from ..tasks import describe_error
from .base import Service, opened
from .pool import PoolService


class BackendsService(Service):
    system_loaded = Signal(dict)  # GET /v1/system
    action_event = Signal(str, dict)  # the action's key, one of its events

    def __init__(self, *args: Any, pool: PoolService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool = pool
        self.system: dict[str, Any] = {}

    async def refresh(self) -> None:
        self.system = dict(await self.client.system())
        self.system_loaded.emit(self.system)
        self.pool.from_system(self.system.get("pool"))

    def refresh_later(self) -> None:
        if self.running:
            self.tasks.start("refresh:system", self.refresh())

    def run_action(self, action: str, backend: str | None = None) -> str:
        """use / update / find; its events go out on ``action_event`` under the key
        returned (which :meth:`cancel` takes)."""
        key = f"backend:{action}:{backend or ''}"

        def emit(event: dict[str, Any]) -> None:
            self.action_event.emit(key, event)

        async def stream(events: AsyncIterator[tuple[str, Any]], who: str | None) -> bool:
            async with opened(events) as reading:
                async for event, data in reading:
                    data = data if isinstance(data, dict) else {"message": data}
                    if event == "error":
                        message = data.get("message") or "failed"
                        emit({"backend": who, "outcome": "rejected", "message": message})
                        return False
                    if event == "done":
                        return True
                    emit({"backend": who, "event": event, **data})
            return True

        async def run() -> None:
            try:
                if action == "use":  # fetch if needed, trial-load, pin ("auto" unpins)
                    ok = await stream(self.client.use_backend(backend or "auto"), backend)
                elif action == "update":
                    ok = await stream(self.client.update_backends(), None)
                else:  # "find": the node tries the candidates, best first
                    ok = await stream(self.client.install_backend(), None)
                # a refusal's reason went out as its own event just before: not again here
                emit({"state": "done" if ok else "failed", "error": ""})
            except asyncio.CancelledError:
                emit({"state": "cancelled"})
                raise
            except Exception as exc:
                emit({"state": "failed", "error": describe_error(exc)})
                raise
            finally:
                self.refresh_later()

        self.run(key, run())
        return key

    def cancel(self, key: str) -> None:
        self.tasks.cancel(key)
