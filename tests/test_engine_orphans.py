"""An engine never outlives its owner: kill -9 the process that started it, the engine ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.procs import alive, gone, wait_until

OWNER = r"""
import asyncio, sys, time
from pathlib import Path
from cantor_desktop.engine.supervisor import EngineSupervisor
from cantor_desktop.system.selfexec import self_argv
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


OWNER_MID_JOB = r"""
import asyncio, json, sys
from pathlib import Path
from cantor_desktop.engine.supervisor import EngineSupervisor
from cantor_desktop.system.paths import paths
from support.scripted_engine import engine_argv, make_models

async def main():
    models = make_models(Path(sys.argv[1]))
    script = {"dit_steps": 4, "step_delay": 60}  # a job of four minutes
    sup = EngineSupervisor("acestep", engine_argv(), {"SCRIPTED_ENGINE": json.dumps(script)}, models)
    await sup.start()
    client = sup.client()
    await client.submit("/synth", {"caption": "x", "lyrics": "[Instrumental]"})
    log = paths().engine_log("acestep")
    while "[Resolve-T]" not in (log.read_text() if log.exists() else ""):
        await asyncio.sleep(0.02)  # the job is in its first step
    print(sup.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_an_engine_mid_job_ends_with_its_owner_without_finishing_the_job(tmp_path):
    """ace-server's graceful stop (SIGTERM) finishes the running job first: an engine whose
    node died must not go on for minutes decoding a song nobody will receive."""
    tests = str(Path(__file__).resolve().parent)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_MID_JOB, str(tmp_path / "models")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": tests},
    )
    try:
        engine_pid = int(owner.stdout.readline())
        assert alive(engine_pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        wait_until(
            lambda: gone(engine_pid),
            "the engine to end with the process that started it, mid-job",
            timeout=10,
        )
    finally:
        owner.kill()
        owner.wait()
