"""Leftover processes: kill -9 the app, the node and the engine in turn, 20 times each, on
real processes (the real app offscreen, its node child, the sketch engine), and count every
process left behind. Goal: 0.

- **the app**: each round a new app makes a song (so its node runs an engine), then is killed;
  its node and engine must end with it (Linux: parent-death signal and the owner pipe).
- **the node**: one app; each round a song, then its node is killed; the engine must end with
  it, the app's supervisor starts one new node (never two), and the next song is done.
- **the engine**: each round a song, then its engine is killed; nothing of it may stay (not
  even a zombie) and the next song is done.

Each prints tried / survived / lost (a round is lost when anything was left); the count of
leftover processes goes in the line's note.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from support.procs import free_port  # noqa: E402
from support.app_run import AppUnderTest, still_running  # noqa: E402
from support.node import write_config  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="the Linux tie; Windows and macOS: packaging/README.md",
    ),
]

ROUNDS = int(os.environ.get("CANTOR_KILL_ROUNDS", "20"))


@pytest.fixture
def app_home(cantor_home):
    write_config(cantor_home)
    port = free_port()
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    return cantor_home, port


def _describe(pids) -> str:
    out = []
    for pid in pids:
        try:
            out.append(f"{pid} {' '.join(psutil.Process(pid).cmdline()[:4])}")
        except psutil.NoSuchProcess:
            out.append(str(pid))
    return ", ".join(out)


def _clear(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombies(app: AppUnderTest) -> list[int]:
    out = []
    for pid in app.tree():
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _node_children(app: AppUnderTest) -> list[int]:
    out = []
    for child in psutil.Process(app.pid).children():
        try:
            if "node" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _song_or_reason(app: AppUnderTest) -> dict:
    try:
        return app.song()
    except Exception as exc:  # noqa: BLE001 - a round that could not make its song is lost
        return {"state": f"not made ({exc})"}


def test_kill_9_the_app_the_node_and_the_engine_20_times_each(app_home, tally):
    home, port = app_home
    left_total = {"app": 0, "node": 0, "engine": 0}

    # -- the app ---------------------------------------------------------------------------
    t = tally(f"kill -9 the app, {ROUNDS} rounds (its node and engine must end)")
    for i in range(ROUNDS):
        app = AppUnderTest(home, port).start()
        try:
            if not app.node_up() or app.song()["state"] != "done":
                t.fail(f"app round {i}: did not come up")
                continue
            tree = app.tree()
            app.kill9()
            left = still_running(tree, 10)
            if left:
                left_total["app"] += len(left)
                t.fail(f"app round {i}: left {_describe(left)}")
                _clear(left)
            else:
                t.ok()
        finally:
            if app.proc.poll() is None:
                app.proc.kill()
                app.proc.wait()

    # -- the node and the engine, under one app --------------------------------------------
    tn = tally(f"kill -9 the node, {ROUNDS} rounds (its engine must end; one new node)")
    te = tally(f"kill -9 the engine, {ROUNDS} rounds (nothing of it stays)")
    # a node killed every few seconds looks like a crash loop: the app waits longer each time
    # (0.5 s doubling to 30 s); capped at 1 s here, or 20 rounds would take ten minutes
    app = AppUnderTest(home, port, backoff_max=1.0).start()
    try:
        assert app.node_up(), app.finish(5)
        for i in range(ROUNDS):
            app.song()
            node, engine = app.node_pid(), app.engine_pid()
            old = [node, engine]
            os.kill(node, signal.SIGKILL)
            left = still_running(old, 10)
            most = 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                nodes = _node_children(app)
                most = max(most, len(nodes))
                if nodes and nodes[0] != node and app.node_up(0.2):
                    break
                time.sleep(0.05)
            extra = max(0, most - 1)
            song = _song_or_reason(app)
            if left or extra or song["state"] != "done":
                left_total["node"] += len(left) + extra
                tn.fail(
                    f"node round {i}: left {_describe(left)}; {most} nodes at once; "
                    f"next song {song['state']}"
                )
                _clear(left)
            else:
                tn.ok()
        for i in range(ROUNDS):
            app.song()
            engine = app.engine_pid()
            os.kill(engine, signal.SIGKILL)
            left = still_running([engine], 10)
            song = _song_or_reason(app)  # the node starts a new engine
            zombies = _zombies(app)
            if left or zombies or song["state"] != "done":
                left_total["engine"] += len(left) + len(zombies)
                te.fail(
                    f"engine round {i}: left {_describe(left)}; zombies {zombies}; next "
                    f"song {song['state']}"
                )
                _clear(left)
            else:
                te.ok()
        tree = app.tree()
        app.proc.terminate()
        code, _out, err = app.finish()
        assert code == 0, err
        assert still_running(tree, 10) == []
    finally:
        if app.proc.poll() is None:
            app.proc.kill()
    print(
        f"\nleftover processes: app {left_total['app']}, node {left_total['node']}, "
        f"engine {left_total['engine']}",
        flush=True,
    )
    assert not (t.lost or tn.lost or te.lost), (t.lost, tn.lost, te.lost)
