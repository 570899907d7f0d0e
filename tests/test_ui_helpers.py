"""Shared pieces of the UI tests (no tests here): a qasync loop, a real node process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import httpx
import pytest

os.environ.setdefault("QT_API", "pyside6")

from conftest import free_port  # noqa: E402


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


def run(loop, coro, timeout: float = 30.0):
    """Run a coroutine to its end on the qasync loop by spinning Qt; its result or error."""
    from PySide6.QtCore import QEventLoop, QTimer
    future = asyncio.ensure_future(coro)
    if not future.done():
        spin = QEventLoop()
        future.add_done_callback(lambda _f: spin.quit())
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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_node(port: int | None = None) -> NodeProc:
    from cantor_desktop.selfexec import self_argv
    port = port or free_port()
    log = open(os.path.join(os.environ["CANTOR_HOME"], "node-test.out"), "ab")
    proc = subprocess.Popen(self_argv("node") + ["serve", "--host", "127.0.0.1", "--port",
                                                 str(port)], stdout=log, stderr=log)
    node = NodeProc(port, proc)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"node exited with {proc.returncode}")
        try:
            if httpx.get(node.url + "/v1/health", timeout=1).status_code == 200:
                return node
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    node.stop()
    raise RuntimeError("node did not answer")


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


def test_sizes_are_named_in_the_binary_units_they_are_counted_in():
    # the app said "23.5 GB" for 25,276,518,400 bytes (23.5 GiB, 25.3 GB) while the CLI
    # said "23.5 GiB": the same figure, named correctly in both
    from cantor_desktop.download import human_size
    from cantor_desktop.ui.transfer import human_bytes
    assert human_bytes(25_276_518_400) == "23.5 GiB" == human_size(25_276_518_400)
    assert human_bytes(48 * 1024 * 1024) == "48.0 MiB"
    assert human_bytes(512) == "512 B" and human_bytes(None) == "?"


def test_errors_reach_the_user_by_their_kind_not_their_class_name():
    import httpx

    from cantor_desktop.config import ConfigError
    from cantor_desktop.nodeclient import NodeError
    from cantor_desktop.song_request import RequestError
    from cantor_desktop.ui.tasks import describe_error

    class Subclassed(NodeError):          # a name describe_error has never heard of
        pass

    assert describe_error(Subclassed("the queue is full (node.max_queue = 2)", 429)) == \
        "the queue is full (node.max_queue = 2)"
    assert describe_error(RequestError("bpm", "must be from 30 to 300")) == \
        "bpm: must be from 30 to 300"
    assert describe_error(ConfigError("node.toml: line 2, column 6: …")).startswith("node.toml")
    assert describe_error(httpx.ConnectError("refused")) == \
        "The node does not answer (is it running?)"
    assert describe_error(httpx.ReadTimeout("slow")) == "The node took too long to answer"
    assert describe_error(KeyError("x")) == "KeyError: 'x'"
