"""Engine builds through the node: install as SSE from a manifest server on 127.0.0.1, then
`cantor upgrade` fetches a newer build and the running node restarts after its song."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cantor_desktop.client.nodeclient import NodeError
from cantor_desktop.system.selfexec import self_argv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.procs import free_port
from support.fake_builds import BuildServer, working_script  # noqa: E402
from support.node import LONG, Node, until_state, wait_for, write_config  # noqa: E402


@pytest.fixture
def builds(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.cpu = srv.archive("cpu-1.tar.gz", working_script())
        srv.add("cpu", srv.cpu, version="v0.1.1")
        yield srv


def test_install_then_upgrade_restarts_the_node_after_its_song(cantor_home, builds):
    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f'\n[node]\nport = {port}\n\n[engines]\nmanifest = "{builds.manifest_url}"\n')
    env = {"CANTOR_TRIAL_TIMEOUT": "20"}

    async def main():
        node = await Node(cantor_home, port=port, env=env).start()
        pid = node.proc.pid
        try:
            async with node.client() as c:
                installed = [item async for item in c.install_backend()]
                before = (await c.backends())["backends"]["acestep"]
                pinned = [item async for item in c.use_backend("cpu")]
                pin_cfg = (await c.config())["values"]["backends.acestep"]
                unpinned = [item async for item in c.use_backend("auto")]
                with pytest.raises(NodeError) as bad:
                    [item async for item in c.use_backend("gpu9")]
                audio, kind = await c.generate(prompt="quick", model="sketch", duration=10)
                # a newer build is published; a song is running when the upgrade comes
                builds.cpu2 = builds.archive("cpu-2.tar.gz", working_script())
                builds.entries.clear()
                builds.add("cpu", builds.cpu2, version="v0.1.2")
                sid = await c.submit_song(LONG)
                await until_state(c, sid, ("running",), 20)
                upgrade = await asyncio.to_thread(
                    subprocess.run,
                    self_argv("cli") + ["upgrade"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env={**os.environ, "CANTOR_HOME": str(cantor_home), **env},
                )

                async def back():
                    try:
                        system = await c.system()
                        return not system["restarting"]
                    except Exception:
                        return False

                await wait_for(back, 60, 0.1)  # restarted once the song ended
                song = await c.song(sid)
                staged = next(
                    b
                    for b in (await c.backends())["backends"]["acestep"]["backends"]
                    if b["name"] == "cpu"
                )

                async def settled():
                    after = (await c.backends())["backends"]["acestep"]
                    cpu = next(b for b in after["backends"] if b["name"] == "cpu")
                    return after if cpu["staged"] is None else None

                # the restarted node trial-loads the staged build before it takes over
                after = await wait_for(settled, 30, 0.1)
                assert pinned[-1][0] == "done" and pin_cfg == "cpu"
                assert unpinned[-1][0] == "done"
                assert bad.value.status == 422 and bad.value.field == "backend"
                assert audio[:4] == b"RIFF" and kind == "audio/wav"
                assert staged["version"] == "v0.1.1" or staged["staged"] is None
                return installed, before, upgrade, song, after, node.proc.pid == pid
        finally:
            await node.stop()

    installed, before, upgrade, song, after, same_pid = asyncio.run(main())
    events = [e for e, _ in installed]
    assert events[-1] == "done", installed
    assert "trial" in events or "kept" in events
    cpu = next(b for b in before["backends"] if b["name"] == "cpu")
    assert cpu["installed"] and cpu["version"] == "v0.1.1"

    assert upgrade.returncode == 0, upgrade.stderr
    assert "updated" in upgrade.stderr and "after its current song" in upgrade.stderr
    assert song["state"] == "done"  # the running song was not cut short
    assert same_pid  # restarted in place (exec)
    assert "restarting the node (upgrade)" in (cantor_home / "logs" / "node.log").read_text()
    cpu = next(b for b in after["backends"] if b["name"] == "cpu")
    assert cpu["version"] == "v0.1.2" and cpu["state"] == "installed"
    assert cpu["trial"]["state"] == "works" and cpu["trial"]["version"] == "v0.1.2"


def test_upgrade_with_an_unreachable_manifest_says_why_once_and_exits_1(cantor_home):
    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:  # nothing listens on the manifest's port
        fh.write(
            f"\n[node]\nport = {port}\n\n[engines]\n"
            f'manifest = "http://127.0.0.1:{free_port()}/engines.json"\n'
        )

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            return await asyncio.to_thread(
                subprocess.run,
                self_argv("cli") + ["upgrade"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "CANTOR_HOME": str(cantor_home)},
            )
        finally:
            await node.stop()

    result = asyncio.run(main())
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "engines.json" in line]
    assert len(lines) == 1 and lines[0].startswith("cantor upgrade: "), result.stderr
