"""Starting, finding, watching and stopping a node child (what the app and `cantor sing` do)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import pytest

from cantor_desktop.node.launcher import NodeProcess, NodeStartError, answers, ensure_node

from conftest import free_port
from test_node_support import SHORT, engine_pid, until_state, wait_for, write_config


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
            from cantor_desktop.nodeclient import NodeClient
            async with NodeClient(url) as c:
                sid = await c.submit_song(SHORT)
                await until_state(c, sid, ("done",), 30)
                engine = await engine_pid(c)
        finally:
            code = await proc.stop()
        return url, proc, again_url, again, not await answers(url), code, engine

    url, proc, again_url, again, gone, code, engine = asyncio.run(main())
    assert url == f"http://127.0.0.1:{port}" and proc is not None
    assert again_url == url and again is None          # the running node is used, not ours
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
        watcher = asyncio.create_task(proc.watch(lambda state, detail: states.append((state, detail))))
        first_pid = proc.pid
        try:
            from cantor_desktop.nodeclient import NodeClient
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
    assert "exit code -9" in states[0][1]
    assert restarts == 1
    assert song["state"] in ("done", "failed")      # queued → done; running at death → failed
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
    from cantor_desktop.nodeclient import NodeClient, NodeError, local_token

    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f'\n[node]\nhost = "0.0.0.0"\nport = {port}\n')

    async def main():
        url, proc = await ensure_node()
        try:
            async with NodeClient(url) as found:      # no token given: found in this home
                listed = await found.songs()
            async with NodeClient(url, token="not-the-token") as wrong:
                with pytest.raises(NodeError) as err:
                    await wrong.songs()
            again_url, again = await ensure_node()
            return proc.token, listed, err.value.status, again
        finally:
            await proc.stop()

    token, listed, status, again = asyncio.run(main())
    assert token and token == local_token()
    assert listed == [] and status == 401 and again is None
