"""Failures: the engine killed mid-song, the node killed with songs queued, tokens."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import httpx
import pytest

from cantor_desktop.system.selfexec import self_argv

from support.procs import free_port, gone
from support.node import LONG, SHORT, Node, engine_pid, until_state, wait_for, write_config


@pytest.fixture
def home(cantor_home):
    write_config(cantor_home)
    return cantor_home


def run(coro):
    return asyncio.run(coro)


async def _running_synth(c, sid):
    async def check():
        song = await c.song(sid)
        return song if song["state"] == "running" and song["stage"] == "synth" else None

    return await wait_for(check, 30)


def test_engine_killed_mid_song_fails_that_song_and_the_next_one_is_done(home):
    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                doomed = await c.submit_song(LONG)
                nxt = await c.submit_song(SHORT)
                await _running_synth(c, doomed)
                pid = await engine_pid(c)
                os.kill(pid, signal.SIGKILL)
                failed = await until_state(c, doomed, ("failed", "done", "cancelled"), 20)
                done = await until_state(c, nxt, ("done", "failed"), 30)
                new_pid = await engine_pid(c)
                retried = await c.retry(doomed)
                return failed, done, pid, new_pid, retried
        finally:
            await node.stop()

    failed, done, pid, new_pid, retried = run(main())
    assert failed["state"] == "failed"
    assert "signal 9" in failed["error"] or "SIGKILL" in failed["error"], failed["error"]
    assert done["state"] == "done"
    assert new_pid and new_pid != pid  # the engine was restarted
    assert retried == failed["id"]


def test_node_killed_with_songs_queued_restarted_node_runs_them(home):
    async def main():
        port = free_port()
        node = await Node(home, port=port).start()
        async with node.client() as c:
            first = await c.submit_song({**LONG, "duration": 120})
            queued = [await c.submit_song(SHORT) for _ in range(2)]
            await _running_synth(c, first)
            engine = await engine_pid(c)
        node.kill9()
        # The engine gets SIGTERM from the kernel as its node dies (parent-death signal) and
        # may still be finishing its job; whichever way it ends, once the next node answers
        # nothing of the killed node is left. (That the next node itself ends a leftover
        # engine is tested with the process code, in the platform tests.)
        again = await Node(home, port=port).start()
        try:
            assert gone(engine)
            async with again.client() as c:
                states = [await until_state(c, sid, ("done", "failed"), 30) for sid in queued]
                stopped = await c.song(first)
                await c.retry(first)
                retried = await until_state(c, first, ("done", "failed"), 40)
                return states, stopped, retried
        finally:
            await again.stop()

    states, stopped, retried = run(main())
    assert [s["state"] for s in states] == ["done", "done"]
    assert stopped["state"] == "failed" and stopped["error"] == "node stopped"
    assert retried["state"] == "done"


def test_every_node_needs_its_token_and_a_wrong_one_is_401(home):
    token_out = subprocess.run(
        self_argv("cli") + ["node", "token"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "CANTOR_HOME": str(home)},
    )
    assert token_out.returncode == 0
    token = token_out.stdout.strip()
    assert len(token) >= 32

    async def main():
        results = {}
        for host in ("0.0.0.0", "127.0.0.1"):  # loopback included
            node = await Node(home, host=host).start()
            try:
                assert node.proc.token == token  # the one `cantor node token` printed
                async with httpx.AsyncClient(base_url=node.url, trust_env=False) as http:
                    health = await http.get("/v1/health")
                    none = await http.get("/v1/songs")
                    wrong = await http.get("/v1/songs", headers={"Authorization": "Bearer nope"})
                    right = await http.get(
                        "/v1/songs", headers={"Authorization": f"Bearer {token}"}
                    )
                async with node.client() as c:
                    sid = await c.submit_song(SHORT)
                    done = await until_state(c, sid, ("done", "failed"))
                results[host] = health, none, wrong, right, done
            finally:
                await node.stop()
        return results

    for host, (health, none, wrong, right, done) in run(main()).items():
        # health says that the node is up, and nothing else
        assert health.status_code == 200 and set(health.json()) == {"status", "version"}
        assert none.status_code == 401 and none.json()["error"]["type"] == "unauthorized", host
        assert wrong.status_code == 401
        assert right.status_code == 200
        assert done["state"] == "done"


def test_without_a_keyring_the_token_is_a_file_only_the_user_can_read(home):
    env = {
        **os.environ,
        "CANTOR_HOME": str(home),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }
    made = subprocess.run(
        self_argv("cli") + ["node", "token"], capture_output=True, text=True, timeout=30, env=env
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    kept = home / "state" / "node-token"
    assert kept.read_text().strip() == token
    assert kept.stat().st_mode & 0o777 == 0o600

    async def main():
        node = await Node(home, host="0.0.0.0", env=env).start()
        try:
            async with node.client() as c:
                return node.proc.token, await c.songs()
        finally:
            await node.stop()

    used, songs = run(main())
    assert used == token and songs == []


def test_cantor_node_says_where_it_listens_once_it_answers(home):
    port = free_port()
    proc = subprocess.Popen(
        self_argv("cli") + ["node", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CANTOR_HOME": str(home)},
    )
    try:
        line = proc.stderr.readline()  # blocks until the node has bound its port
        assert httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert line.startswith(f"cantor node: listening on http://127.0.0.1:{port} ")
    assert str(home / "logs") in line
