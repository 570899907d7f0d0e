"""Shared pieces of the UI tests: a qasync loop and a real node process (fixtures, loaded by
tests/conftest.py), and :func:`run` / :func:`until` to wait on that loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from .procs import answers, free_port, stop, wait_until

os.environ.setdefault("QT_API", "pyside6")


@pytest.fixture
def qloop(qapp):
    """A qasync loop that counts as running all along, like the app's (Qt drives it).

    Tests wait with :func:`run`, which spins a nested Qt event loop; slots called from the
    test body therefore start tasks exactly as they would from a click.
    """
    from cantor_desktop.ui.tasks import close_loop_executor, new_loop

    loop = new_loop(qapp, already_running=True)
    yield loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        run(loop, asyncio.gather(*pending, return_exceptions=True), timeout=10)
    close_loop_executor(loop)
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


def run(loop, coro, timeout: float | None = None):
    """Run a coroutine to its end on the qasync loop by spinning Qt; its result or error.

    Without ``timeout`` it waits as long as the coroutine runs: the coroutine's own waits
    (:func:`until`, ``wait_for``) say how long is too long, and pytest-timeout ends a test
    that hangs. A ``timeout`` given here is a limit of its own, never a silent cap on a
    longer wait inside."""
    from PySide6.QtCore import QEventLoop, QTimer

    future = asyncio.ensure_future(coro)
    if not future.done():
        spin = QEventLoop()
        future.add_done_callback(lambda _f: spin.quit())
        if timeout is not None:
            QTimer.singleShot(int(timeout * 1000), spin.quit)
        spin.exec()
    if not future.done():
        future.cancel()
        raise TimeoutError(f"not done within {timeout} s")
    return future.result()


async def until(predicate, timeout: float = 20.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class NodeProc:
    def __init__(self, port: int, proc: subprocess.Popen):
        self.port, self.proc = port, proc
        self.url = f"http://127.0.0.1:{port}"

    def stop(self):
        stop(self.proc)


def start_node(port: int | None = None) -> NodeProc:
    from cantor_desktop.system.selfexec import self_argv

    port = port or free_port()
    log = open(os.path.join(os.environ["CANTOR_HOME"], "node-test.out"), "ab")
    proc = subprocess.Popen(
        self_argv("node") + ["serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=log,
    )
    node = NodeProc(port, proc)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"node exited with {proc.returncode}")
        return answers(node.url)

    try:
        wait_until(up, "the node to answer", timeout=60, every=0.1)
    except AssertionError:
        node.stop()
        raise
    return node


@pytest.fixture
def node():
    n = start_node()
    yield n
    n.stop()


def make_wav(path, seconds: float = 2.0, rate: int = 44100):
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    env = np.linspace(0.1, 1.0, t.size)
    data = (0.5 * env * np.sin(2 * np.pi * 220 * t)).astype("float32")
    sf.write(str(path), np.stack([data, data], axis=1), rate, subtype="PCM_24")
    return str(path)


def offline_shell(qapp):
    """The app's Shell with its window shown at 1200×760, its link aimed at a port nobody
    listens on and starting no node (the pages as a user sees them before the node is up).
    End it with :func:`close_shell`."""
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.node_link import NodeLink

    shell = Shell(qapp, NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
    shell.window.resize(1200, 760)
    shell.window.show()
    return shell


def close_shell(shell) -> None:
    shell.window.shutdown()
    shell.window.close()
