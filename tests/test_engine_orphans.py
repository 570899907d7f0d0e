"""An engine never outlives its owner: kill -9 the process that started it, the engine ends."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from support.procs import alive, gone, wait_until

OWNER = r"""
import asyncio, sys, time
from pathlib import Path
from cantor_desktop.engine.supervisor import EngineSupervisor
from cantor_desktop.selfexec import self_argv
from cantor_desktop.sketch import ensure_sketch_models

async def main():
    models = Path(sys.argv[1]); ensure_sketch_models(models)
    sup = EngineSupervisor("acestep", self_argv("sketch-server"), {}, models)
    await sup.start()
    print(sup.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_engine_ends_when_its_owner_is_killed(tmp_path):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "models")], stdout=subprocess.PIPE, text=True
    )
    try:
        engine_pid = int(owner.stdout.readline())
        assert alive(engine_pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        wait_until(
            lambda: gone(engine_pid),
            "the engine to end with the process that started it",
            timeout=10,
        )
    finally:
        owner.kill()
        owner.wait()
