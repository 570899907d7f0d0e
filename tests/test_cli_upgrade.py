"""`cantor upgrade` with no node running: the update runs in the command, and each step is
told as from the node's stream (the event's kind, then its family, backend and message)."""

from __future__ import annotations

import asyncio
import os
import subprocess

from cantor_desktop.system.selfexec import self_argv
from support.fake_builds import BuildServer, working_script
from support.node import write_config
from support.procs import free_port


def test_upgrade_without_a_node_updates_here_and_tells_each_step(
    cantor_home, tmp_path, monkeypatch
):
    from cantor_desktop.install import backends, engine_store

    write_config(cantor_home)
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    with BuildServer(tmp_path / "srv") as builds:
        builds.add("cpu", builds.archive("cpu-1.tar.gz", working_script()), version="v0.1.1")
        with open(cantor_home / "node.toml", "a") as fh:  # no node listens on this port
            fh.write(
                f'\n[node]\nport = {free_port()}\n\n[engines]\nmanifest = "{builds.manifest_url}"\n'
            )
        asyncio.run(backends.install("acestep"))
        builds.entries.clear()
        builds.add("cpu", builds.archive("cpu-2.tar.gz", working_script()), version="v0.1.2")
        result = subprocess.run(
            self_argv("cli") + ["upgrade"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "CANTOR_HOME": str(cantor_home)},
        )

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("no node is running; the next one starts with the updated")
    assert any(line.startswith("download acestep cpu cpu: ") for line in lines), lines
    assert [line for line in lines if line.startswith("updated ")] == [
        "updated acestep cpu cpu: v0.1.2 fetched and verified. A running node keeps the build "
        "it has; at its next start the node trial-loads v0.1.2 and uses it only if it works "
        "(v0.1.1 stays otherwise)."
    ], lines
    assert engine_store.staged("acestep", "cpu").version == "v0.1.2"
