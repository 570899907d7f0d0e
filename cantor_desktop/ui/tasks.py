"""Run coroutines as cancellable asyncio tasks on the Qt loop (qasync), errors in words.

Widgets never await: a slot calls ``tasks.start(key, coro, on_error=...)``. Starting a task
under a key that is already running cancels the old one first, so a second click never
piles work up. Exceptions other than cancellation go to ``on_error`` as a sentence.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Callable, Coroutine

log = logging.getLogger(__name__)
_EXECUTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each loop :func:`new_loop` made → its default executor (which :func:`close_loop_executor`
joins; asyncio has no public way to read it back)."""


def describe_error(exc: BaseException) -> str:
    """A short sentence for the user: the message of our own errors (written for them), the
    network's in words, anything else as its type and text."""
    import httpx

    from ..errors import CantorError

    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return "The node does not answer (is it running?)"
    if isinstance(exc, httpx.TimeoutException):
        return "The node took too long to answer"
    if isinstance(exc, CantorError):
        return exc.user_message
    message = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


class Tasks:
    """A keyed set of running tasks. Keys let the UI cancel "the pull of X" or "song Y"."""

    def __init__(self, on_error: Callable[[str, str], None] | None = None):
        self._tasks: dict[str, asyncio.Task] = {}
        self._on_error = on_error

    def start(
        self,
        key: str,
        coro: Coroutine[Any, Any, Any],
        on_error: Callable[[str], None] | None = None,
        on_done: Callable[[Any], None] | None = None,
    ) -> asyncio.Task:
        self.cancel(key)
        task = asyncio.ensure_future(coro)
        self._tasks[key] = task

        def finished(t: asyncio.Task) -> None:
            if self._tasks.get(key) is t:
                del self._tasks[key]
            if t.cancelled():
                return
            exc = t.exception()
            if exc is None:
                if on_done is not None:
                    on_done(t.result())
                return
            log.warning("task %s failed: %s", key, exc, exc_info=exc)
            text = describe_error(exc)
            if on_error is not None:
                on_error(text)
            elif self._on_error is not None:
                self._on_error(key, text)

        task.add_done_callback(finished)
        return task

    def running(self, key: str) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def cancel(self, key: str) -> bool:
        task = self._tasks.pop(key, None)
        if task is not None and not task.done():
            task.cancel()
            return True
        return False

    def cancel_all(self) -> None:
        for key in list(self._tasks):
            self.cancel(key)

    async def cancel_and_wait(self, timeout: float = 5.0) -> None:
        """Cancel every task and let each finish its cleanup (close streams, sockets)."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        self.cancel_all()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def keys(self) -> list[str]:
        return [k for k, t in self._tasks.items() if not t.done()]


def new_loop(app, *, already_running: bool = False):
    """The app's qasync loop, with a plain thread pool as its default executor.

    qasync's own default executor is ten unparented QThreads that live until the loop is
    closed; one still running when Python exits aborts the process ("QThread: Destroyed
    while thread is still running"). ``asyncio.to_thread`` and ``getaddrinfo`` use this
    pool instead, which :func:`close_loop` joins (and Python joins at exit in any case).
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    os.environ.setdefault("QT_API", "pyside6")
    import qasync

    loop = qasync.QEventLoop(app, already_running=already_running)
    executor = _EXECUTORS[loop] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cantor-io")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    return loop


def close_loop_executor(loop, wait: bool = True) -> None:
    """Join the loop's worker threads (work not yet started is dropped)."""
    executor = _EXECUTORS.get(loop)
    if executor is not None:
        executor.shutdown(wait=wait, cancel_futures=True)
