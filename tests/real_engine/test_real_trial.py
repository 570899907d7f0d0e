"""Trial loads of the real ace-server: a working CPU build is never rejected, however many
of its last lines it loses; a GPU-named build is rejected with its whole FATAL line."""

from __future__ import annotations

import asyncio
import collections

import pytest

from real_engine.conftest import figure
from real_engine.real_build import binary, library_env, needs_real_engine

from cantor_desktop.install import trial
from cantor_desktop.install.engine_store import InstalledBuild

pytestmark = needs_real_engine
CUDA_FATAL = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"


def real(device: str, backend: str) -> InstalledBuild:
    env = {"GGML_BACKEND": device, "LD_LIBRARY_PATH": library_env()["LD_LIBRARY_PATH"]}
    return InstalledBuild("acestep", backend, "real", [str(binary())], env, binary(), source="user")


async def trials(build: InstalledBuild, backend: str, n: int) -> list[trial.TrialResult]:
    return [await trial.trial_load(build, backend, timeout=60) for _ in range(n)]


def test_one_trial_of_the_cpu_build_works():
    result = asyncio.run(trial.trial_load(real("CPU", "cpu"), "cpu", timeout=60))
    assert result.ok and result.device == "CPU", result.reason


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_200_trials_of_the_working_cpu_build_reject_none():
    results = asyncio.run(trials(real("CPU", "cpu"), "cpu", 200))
    rejected = [r.reason for r in results if not r.ok]
    probes = collections.Counter(r.probes for r in results)
    repeated = sum(n for k, n in probes.items() if k > 1)
    figure(
        "false rejections of a working CPU build",
        len(rejected),
        len(results),
        f"{repeated} trials needed more than one probe (the device line lost); probes per "
        f"trial: {dict(sorted(probes.items()))}; "
        f"{sum(r.seconds for r in results) / len(results):.2f} s per trial",
    )
    assert rejected == []


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_200_trials_of_a_gpu_named_build_are_rejected_with_the_whole_fatal_line():
    results = asyncio.run(trials(real("CUDA0", "cuda12"), "cuda12", 200))
    whole = [r for r in results if not r.ok and r.reason == CUDA_FATAL]
    others = collections.Counter(r.reason for r in results if r not in whole)
    probes = collections.Counter(r.probes for r in results)
    figure(
        "complete rejection reasons of a GPU-named build",
        len(whole),
        len(results),
        f"probes per trial: {dict(sorted(probes.items()))}",
    )
    assert others == collections.Counter()
