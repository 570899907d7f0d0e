"""Starting, finding, watching and stopping a node child (what the app and `cantor sing` do)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from cantor_desktop.client.node_process import NodeProcess, NodeStartError, answers, ensure_node

from cantor_desktop.system.procs.priority import BACKGROUND_NICE, follow, run_in_background
from support.procs import free_port
from support.node import SHORT, engine_pid, until_state, wait_for, write_config


def _config_port(home, port: int) -> None:
    write_config(home)
    with open(home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")


def test_ensure_node_starts_a_private_node_once_then_reuses_it(cantor_home):
    port = free_port()
    _config_port(cantor_home, port)

    async def main():
        url, proc = await ensure_node()
        try:
            again_url, again = await ensure_node()
            from cantor_desktop.client.nodeclient import NodeClient

            async with NodeClient(url) as c:
                sid = await c.submit_song(SHORT)
                await until_state(c, sid, ("done",), 30)
                engine = await engine_pid(c)
                assert engine is not None
                niceness = (psutil.Process(proc.pid).nice(), psutil.Process(engine).nice())
                groups = [_autogroup(pid) for pid in (proc.pid, engine)]
        finally:
            code = await proc.stop()
        return url, proc, again_url, again, not await answers(url), code, engine, niceness, groups

    url, proc, again_url, again, gone, code, engine, niceness, groups = asyncio.run(main())
    # the app's node runs below normal priority, and its engine with it; where Linux
    # shares the CPUs by session first (autogroup), their sessions are lowered too
    assert niceness == (BACKGROUND_NICE, BACKGROUND_NICE)
    if os.path.exists("/proc/self/autogroup"):
        assert groups == [BACKGROUND_NICE, BACKGROUND_NICE], groups
    assert url == f"http://127.0.0.1:{port}" and proc is not None
    assert again_url == url and again is None  # the running node is used, not ours
    # SIGTERM: a graceful stop (uvicorn re-raises the signal after shutting down) that also
    # ended the node's engine
    assert gone and code in (0, -signal.SIGTERM)
    with pytest.raises(ProcessLookupError):
        os.kill(engine, 0)


def test_watch_restarts_a_node_that_died_and_its_queue_goes_on(cantor_home):
    port = free_port()
    _config_port(cantor_home, port)
    states: list[tuple[str, str]] = []

    async def main():
        proc = NodeProcess("127.0.0.1", port)
        await proc.start()
        watcher = asyncio.create_task(
            proc.watch(lambda state, detail: states.append((state, detail)))
        )
        first_pid = proc.pid
        try:
            from cantor_desktop.client.nodeclient import NodeClient

            async with NodeClient(proc.url) as c:
                sid = await c.submit_song({**SHORT, "duration": 60})
                os.kill(first_pid, signal.SIGKILL)

                async def restarted():
                    return proc.pid != first_pid and await answers(proc.url)

                await wait_for(restarted, 20, 0.1)
                song = await until_state(c, sid, ("done", "failed"), 40)
                nxt = await c.submit_song(SHORT)
                done = await until_state(c, nxt, ("done", "failed"), 30)
            return song, done, proc.restarts
        finally:
            await proc.stop()
            await asyncio.wait_for(watcher, 5)

    song, done, restarts = asyncio.run(main())
    # the link's own states: starting (it died, and while it restarts), then idle again
    assert [s for s, _ in states[:3]] == ["starting", "starting", "idle"]
    assert "killed by signal 9 (SIGKILL)" in states[0][1]
    assert restarts == 1
    assert song["state"] in ("done", "failed")  # queued → done; running at death → failed
    if song["state"] == "failed":
        assert song["error"] == "node stopped"
    assert done["state"] == "done"


def test_a_node_that_cannot_listen_reports_why(cantor_home):
    write_config(cantor_home)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        async def main():
            proc = NodeProcess("127.0.0.1", port)
            with pytest.raises(NodeStartError) as err:
                await proc.start(timeout=15)
            return str(err.value)

        message = asyncio.run(main())
    assert "could not listen" in message or "address already in use" in message.lower()


def test_ensure_node_makes_the_token_the_node_and_its_clients_share(cantor_home):
    # every node wants its token, loopback included; clients on this machine find it
    from cantor_desktop.client.nodeclient import NodeClient, NodeError, local_token

    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f'\n[node]\nhost = "0.0.0.0"\nport = {port}\n')

    async def main():
        url, proc = await ensure_node()
        try:
            async with NodeClient(url) as found:  # no token given: found in this home
                listed = await found.songs()
            async with NodeClient(url, token="not-the-token") as wrong:
                with pytest.raises(NodeError) as err:  # the node cannot prove that token:
                    await wrong.songs()  # it is never sent
            again_url, again = await ensure_node()
            return proc.token, listed, err.value.type, again
        finally:
            await proc.stop()

    token, listed, status, again = asyncio.run(main())
    assert token and token == local_token()
    assert listed == [] and status == "stranger" and again is None


def _node_children() -> list[int]:
    """Our child processes that are Cantor nodes."""
    import psutil

    from cantor_desktop.node.leftovers import is_node_command

    out = []
    for child in psutil.Process().children():
        try:
            if is_node_command(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return out


async def _node_after_a_song(home) -> tuple[NodeProcess, int]:
    """A node child on a free port that has made one song: it and its engine's pid."""
    from cantor_desktop.client.nodeclient import NodeClient

    port = free_port()
    _config_port(home, port)
    proc = NodeProcess("127.0.0.1", port)
    await proc.start()
    async with NodeClient(proc.url) as c:
        sid = await c.submit_song(SHORT)
        await until_state(c, sid, ("done",), 30)
        return proc, await engine_pid(c)


def test_stop_asks_the_node_with_its_token_and_the_node_cleans_up_its_engines(cantor_home):
    import httpx

    from cantor_desktop.system import procs

    async def main():
        proc, engine = await _node_after_a_song(cantor_home)
        recorded = json.loads((cantor_home / "state" / "engines.json").read_text())
        async with httpx.AsyncClient(trust_env=False) as http:
            stranger = await http.post(proc.url + "/v1/node/shutdown")  # no token
        still = await answers(proc.url)
        code = await proc.stop()
        return engine, recorded, stranger.status_code, still, code

    engine, recorded, stranger, still, code = asyncio.run(main())
    assert recorded["sketch"]["pid"] == engine
    assert stranger == 401 and still  # only its token stops it
    assert code == 0  # stopped through the API (a SIGTERM would give -15)
    assert not procs.alive(engine)
    assert json.loads((cantor_home / "state" / "engines.json").read_text()) == {}
    # its stderr has its own file; node.log is the node's own rotated log
    assert "cantor node: listening on" in (cantor_home / "logs" / "node-stderr.log").read_text()
    assert "cantor node: listening on" not in (cantor_home / "logs" / "node.log").read_text()


def test_a_hung_node_is_signalled_then_killed_and_its_engine_ends_too(cantor_home):
    from cantor_desktop.system import procs

    async def main():
        proc, engine = await _node_after_a_song(cantor_home)
        os.kill(proc.pid, signal.SIGSTOP)  # it answers nothing, ends nothing
        code = await proc.stop(timeout=1.0)
        return engine, code

    engine, code = asyncio.run(main())
    assert code == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while procs.alive(engine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.alive(engine)


def test_an_upgrade_restart_is_one_new_node_started_by_its_supervisor_at_once(cantor_home):
    from cantor_desktop.client.nodeclient import NodeClient

    port = free_port()
    _config_port(cantor_home, port)
    states: list[tuple[str, str]] = []
    most = []

    async def main():
        proc = NodeProcess("127.0.0.1", port, supervised=True)
        await proc.start()
        first = proc.pid
        watcher = asyncio.create_task(proc.watch(lambda s, d: states.append((s, d))))
        try:
            async with NodeClient(proc.url) as c:
                sid = await c.submit_song(SHORT)
                await until_state(c, sid, ("done",), 30)
                await c.restart()  # what `cantor upgrade` sends
            deadline = time.monotonic() + 30
            # the supervisor counts the restart once its own health poll got an answer
            while (
                proc.restarts == 0 or not await answers(proc.url)
            ) and time.monotonic() < deadline:
                most.append(len(_node_children()))
                await asyncio.sleep(0.05)
            async with NodeClient(proc.url) as c:
                history = [s["id"] for s in await c.songs()]
            return first, proc.pid, proc.restarts, history, sid
        finally:
            await proc.stop()
            await asyncio.wait_for(watcher, 5)

    first, second, restarts, history, sid = asyncio.run(main())
    assert second != first and restarts == 1
    assert states[:2] == [("starting", "restarting the node after an upgrade"), ("idle", "")]
    assert not any("stopped" in d for _, d in states)  # not taken for a crash
    assert max(most) <= 1  # never two nodes at once
    assert sid in history  # the queue went on
    log = (cantor_home / "logs" / "node.log").read_text()
    assert "restarting the node (upgrade)" in log


def test_cantor_node_stop_stops_this_homes_node(cantor_home):
    from cantor_desktop.system.selfexec import self_argv

    port = free_port()
    _config_port(cantor_home, port)

    async def main():
        proc = NodeProcess("127.0.0.1", port)
        await proc.start()
        try:
            stop = await asyncio.to_thread(
                subprocess.run,
                self_argv("cli") + ["node", "stop"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            for _ in range(100):
                if not proc.running:
                    break
                await asyncio.sleep(0.05)
            return stop, proc.proc.returncode
        finally:
            await proc.stop()

    stop, code = asyncio.run(main())
    assert stop.returncode == 0 and "has stopped" in stop.stderr, stop.stderr
    assert code == 0
    again = subprocess.run(
        self_argv("cli") + ["node", "stop"], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and "no node answers" in again.stderr


def test_without_execv_a_node_run_by_hand_is_run_again_by_a_thin_parent(tmp_path):
    """Windows' restart for a node run in a terminal: this process stays, the node runs as
    its child, again while it asks (here a real child that asks once); it lets go of the
    node's log first, which the child rotates."""
    import logging

    from cantor_desktop.system import logs, procs
    from cantor_desktop.cli.node_cmd import restart_node, run_restarting

    logs.setup(tmp_path / "node.log", stderr_level=logging.WARNING)
    ours = [h for h in logging.getLogger().handlers if h.get_name() == logs.FILE_HANDLER]
    assert len(ours) == 1 and ours[0].stream is not None

    runs = tmp_path / "runs"
    script = (
        "import os, pathlib, sys; p = pathlib.Path(sys.argv[1]); "
        "n = len(p.read_text()) if p.exists() else 0; p.write_text('x' * (n + 1)); "
        f"assert os.environ.get({procs.SUPERVISED_ENV!r}) == '1'; "
        f"sys.exit({procs.RESTART_EXIT_CODE} if n == 0 else 3)"
    )
    assert run_restarting([sys.executable, "-c", script, str(runs)]) == 3
    assert runs.read_text() == "xx"
    assert ours[0].stream is None and ours[0] not in logging.getLogger().handlers
    assert restart_node(["never-run"], supervised=True) == procs.RESTART_EXIT_CODE


def _autogroup(pid: int) -> int | None:
    """The niceness of a process's autogroup ("/autogroup-123 nice 10"), None without one."""
    try:
        with open(f"/proc/{pid}/autogroup") as fh:
            return int(fh.read().split("nice")[-1])
    except OSError:
        return None


class _Process:
    """psutil.Process's nice(), for the branches of another OS."""

    def __init__(self, nice):
        self.value = nice

    def nice(self, value=None):
        if value is None:
            return self.value
        self.value = value


class _Psutil:
    IDLE_PRIORITY_CLASS = 0x40
    BELOW_NORMAL_PRIORITY_CLASS = 0x4000

    def __init__(self, nice):
        self.me = _Process(nice)

    def Process(self):  # noqa: N802 - psutil's name
        return self.me


def test_background_priority_lowers_and_never_raises(tmp_path, monkeypatch):
    from cantor_desktop.system.procs import priority

    monkeypatch.setattr(priority, "_background", False)  # this test's process is not the node
    windows = _Psutil(0x20)  # NORMAL_PRIORITY_CLASS
    assert run_in_background(ps=windows, os_name="nt") == "below normal priority"
    assert windows.me.value == 0x4000
    idle = _Psutil(0x40)  # IDLE_PRIORITY_CLASS: already lower, left there
    run_in_background(ps=idle, os_name="nt")
    assert idle.me.value == 0x40
    proc = tmp_path / "proc"
    for who, line in (("self", "/autogroup-7 nice 0"), ("42", "/autogroup-8 nice 15")):
        (proc / who).mkdir(parents=True)
        (proc / who / "autogroup").write_text(line)
    posix = _Psutil(0)
    said = run_in_background(ps=posix, os_name="posix", proc=str(proc))
    assert said == f"niceness {BACKGROUND_NICE}" and posix.me.value == BACKGROUND_NICE
    assert (proc / "self" / "autogroup").read_text() == str(BACKGROUND_NICE)
    follow(42, proc=str(proc))  # an engine's session already lower: left there
    assert (proc / "42" / "autogroup").read_text() == "/autogroup-8 nice 15"
    already = _Psutil(19)  # started lower still (nice -n 19): left there
    assert run_in_background(ps=already, os_name="posix", proc=str(proc)) == "niceness 19"
    assert already.me.value == 19
