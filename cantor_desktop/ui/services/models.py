"""The node's models: its library and the catalogue of what it can pull, their removal, the
import of .gguf files, and the Hugging Face token the node keeps for gated models."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal

from ..tasks import describe_error
from .base import OnDone, OnError, Service

ImportOutcome = tuple[str, dict[str, Any] | None, str]
"""(path, the node's answer or None, why not)"""


class ModelsService(Service):
    loaded = Signal(list)  # [model dicts as GET /v1/models?all=true gives them]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed: list[dict[str, Any]] = []

    async def refresh(self) -> None:
        raw = await self.client.models(all=True)  # the catalogue too: what can be pulled
        self.listed = list(raw.get("models", raw) if isinstance(raw, dict) else raw)
        self.loaded.emit(self.listed)

    def refresh_later(self) -> None:
        if self.running:
            self.tasks.start("refresh:models", self.refresh())

    def remove(
        self, name: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        """Delete a model's files on the node; ``on_done(answer)``."""

        async def remove() -> dict[str, Any]:
            try:
                return await self.client.delete_model(name)
            finally:
                await self.refresh()

        self.run(f"remove:{name}", remove(), on_done, on_error)

    def import_files(
        self,
        files: list[str],
        on_done: Callable[[list[ImportOutcome]], None] | None = None,
        on_error: OnError | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """Bring .gguf files to the node's library: this home's node adopts them where they
        are; a remote node gets each file uploaded (checked here first, so a file that is
        not a model is never sent). ``on_done([(path, answer or None, why not)])``;
        ``on_progress(path, sent, total)`` while uploading."""
        remote = self.connection.remote

        async def one(path: str) -> dict[str, Any]:
            if not remote:
                return await self.client.import_model(path)
            from ...models.importer import check_file

            await asyncio.to_thread(check_file, path)

            def report(sent: int, total: int) -> None:
                if on_progress is not None:
                    on_progress(path, sent, total)

            return await self.client.upload_model(path, on_progress=report)

        async def run() -> list[ImportOutcome]:
            outcomes: list[ImportOutcome] = []
            try:
                for path in files:
                    try:
                        outcomes.append((path, await one(path), ""))
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        from ...models.library import LibraryError

                        why = str(exc) if isinstance(exc, LibraryError) else describe_error(exc)
                        outcomes.append((path, None, why))
            finally:
                await self.refresh()
            return outcomes

        self.run("import", run(), on_done, on_error)

    # -- models other tools downloaded, on the node's machine ----------------------------
    def find_elsewhere(
        self,
        folders: list[str],
        on_done: Callable[[list[dict[str, Any]]], None] | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """Ask the node for ACE-Step files other tools keep on its machine (the Hugging Face
        cache, acestep.cpp's models folder, ``folders``): ``on_done([found])``."""

        async def find() -> list[dict[str, Any]]:
            return await self.client.find_models(folders)

        self.run("find", find(), on_done, on_error)

    def adopt(
        self,
        paths: list[str],
        folders: list[str],
        copy: bool,
        on_done: Callable[[list[dict[str, Any]]], None] | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """Have the node check the files and take them into its library (linked, or copied
        when ``copy``): ``on_done([what became of each])``; the library read again."""

        async def adopt() -> list[dict[str, Any]]:
            try:
                return await self.client.adopt_models(paths, folders=folders, copy=copy)
            finally:
                await self.refresh()

        self.run("adopt", adopt(), on_done, on_error)

    # -- the Hugging Face token (kept on the node's machine) ------------------------------
    def hf_token(self, on_done: OnDone | None = None, on_error: OnError | None = None) -> None:
        """Whether the node has a token (``on_done({"set", "source", "note"})``)."""

        async def read() -> dict[str, Any]:
            return await self.client.hf_token()

        self.run("hf_token", read(), on_done, on_error)

    def set_hf_token(
        self, token: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        async def save() -> dict[str, Any]:
            return await self.client.set_hf_token(token)

        self.run("hf_token", save(), on_done, on_error)

    def remove_hf_token(
        self, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        async def remove() -> dict[str, Any]:
            return await self.client.remove_hf_token()

        self.run("hf_token", remove(), on_done, on_error)
