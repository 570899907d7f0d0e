"""The trial load against the scripted engine made to behave like the real one: lines lost
before an exit, a FATAL line cut in half, a probe that does not exit by itself."""

from __future__ import annotations

import asyncio
import json
import os

from support.scripted_engine import engine_argv

from cantor_desktop.install import trial
from cantor_desktop.install.engine_store import InstalledBuild

CUDA_FATAL = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"


def scripted_build(tmp_path, script: dict, device: str = "CPU") -> InstalledBuild:
    script = {"header_only": True, "runs_file": str(tmp_path / "runs"), **script}
    return InstalledBuild(
        "acestep",
        "cpu",
        "scripted",
        engine_argv(),
        {"GGML_BACKEND": device, "SCRIPTED_ENGINE": json.dumps(script)},
        None,
        source="user",
    )


def probes_alive() -> list[int]:
    """Live processes started with this home's probe folder (Linux /proc)."""
    folder = str(trial.probe_models_dir()).encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as fh:
                zombie = fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if folder in args and not zombie:
            found.append(int(pid))
    return found


def test_a_working_build_that_loses_its_last_lines_is_kept(tmp_path):
    # the first four processes lose the device line and everything after it
    build = scripted_build(tmp_path, {"drop_last_lines": 4, "drop_runs": 4})
    result = asyncio.run(trial.trial_load(build, "cpu", timeout=60))
    assert result.ok and result.device == "CPU", result.reason
    assert result.probes == 5
    assert (tmp_path / "runs").read_text() == "5"
    assert not probes_alive()


def test_a_cut_fatal_line_is_never_the_reason(tmp_path):
    build = scripted_build(
        tmp_path, {"drop_last_lines": 1, "cut_last_line": True, "drop_runs": 3}, device="CUDA0"
    )
    result = asyncio.run(trial.trial_load(build, "cuda12", timeout=60))
    assert not result.ok and result.reason == CUDA_FATAL  # whole, from the 4th probe
    assert result.probes == 4


def test_a_build_that_always_loses_its_lines_is_rejected_after_every_probe(tmp_path):
    build = scripted_build(tmp_path, {"drop_last_lines": 4})
    # what is checked is that every probe was tried: a deadline that never comes first (25
    # Python processes: seconds alone, far longer on a loaded machine); it ends at the 25th
    result = asyncio.run(trial.trial_load(build, "cpu", timeout=250))
    assert not result.ok and result.probes == trial.MAX_PROBES
    assert result.reason.startswith(
        "exited (exit code 1) before initialising a device (last line: "
    )
    assert result.reason.endswith(f"; the same in all {trial.MAX_PROBES} tries")


def test_a_probe_that_does_not_exit_is_ended(tmp_path):
    # with weights the probe job runs on: the engine stays up after the device line
    build = scripted_build(tmp_path, {"header_only": False, "lm_delay": 0.5})
    result = asyncio.run(trial.trial_load(build, "cpu", timeout=60))
    # ok: judged by its device line and ended then (run to its timeout, it would have failed)
    assert result.ok and result.probes == 1
    assert not probes_alive()
