"""The real Vulkan engine on a real Vulkan driver: Mesa's lavapipe, a Vulkan 1.3 device that
computes on the CPU (CI installs mesa-vulkan-drivers). It is what a software device is to
Cantor: named as one, never chosen by itself, usable when asked for, and the engine's own
lines say so. ``CANTOR_REAL_VULKAN_ACE_SERVER`` names the build (.ci/real-engine.sh unpacks
../shared/engines' Vulkan archive)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from real_engine.real_build import needs_real_vulkan_engine, vulkan_binary

from cantor_desktop.install import backends, trial
from cantor_desktop.install.engine_store import InstalledBuild
from cantor_desktop.system import hardware

pytestmark = needs_real_vulkan_engine


def _real_vulkan(env: dict[str, str] | None = None) -> InstalledBuild:
    exe = vulkan_binary()
    assert exe is not None
    return InstalledBuild(
        "acestep",
        "vulkan",
        "real",
        [str(exe)],
        {"GGML_BACKEND": "Vulkan0", **(env or {})},
        exe,
        source="user",
    )


def test_lavapipe_is_a_software_device_to_the_probe():
    vk = hardware.probe().backends["vulkan"]
    assert not vk.supported and vk.software.startswith("llvmpipe"), vk
    assert vk.env == {"GGML_VK_VISIBLE_DEVICES": "0"}
    assert any("a software device" in line for line in vk.evidence), vk.evidence


def test_the_real_engine_sees_lavapipe_only_when_it_is_named():
    hw = hardware.probe()
    hidden = asyncio.run(trial.trial_load(_real_vulkan(), "vulkan", timeout=60))
    assert not hidden.ok and "Vulkan0 not found" in hidden.reason, hidden
    named = asyncio.run(
        trial.trial_load(backends.with_device_env(_real_vulkan(), hw), "vulkan", timeout=60)
    )
    assert named.ok and named.device == "Vulkan0", named
    assert named.device_name.startswith("llvmpipe") and named.software, named


@pytest.mark.timeout(300)
def test_use_vulkan_on_lavapipe_through_the_cli(cantor_home):
    """The user's own Vulkan build in node.toml: --install leaves it for the CPU, --use
    vulkan trial-loads it on lavapipe and pins it, saying it is a software device."""
    exe = vulkan_binary()
    (cantor_home / "node.toml").write_text(f'[engines.acestep]\npath = "{exe}"\n')

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cantor_desktop", "backends", *args],
            capture_output=True,
            text=True,
            timeout=240,
        )

    st = json.loads(cli("--json").stdout)
    assert st["default"] == "cpu", st  # the software device is never chosen by itself
    done = cli("--use", "vulkan")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a software device" in done.stdout and "Saved: vulkan" in done.stdout
    vulkan = next(b for b in json.loads(cli("--json").stdout)["backends"] if b["name"] == "vulkan")
    assert vulkan["state"] == "installed" and vulkan["trial"]["software"] is True, vulkan
    assert vulkan["trial"]["device_name"].startswith("llvmpipe")


@pytest.mark.timeout(1800)
def test_a_whole_song_on_lavapipe_is_measured_slower_than_the_cpu(cantor_home, fabricated):
    """The same song through the node on the CPU build and on the Vulkan build on lavapipe
    (pinned: a software device is never chosen by itself): both made, each song records its
    backend and its seconds per diffusion step, and `cantor backends` says the software
    device measured slower than the CPU and offers the CPU."""
    from real_engine.real_build import binary
    from real_engine.real_node import configure, import_models, sing

    from cantor_desktop import config

    cpu_engine = binary()
    assert cpu_engine is not None and cpu_engine.is_file(), "the CPU build is needed too"
    made = {}
    for backend, engine in (("cpu", cpu_engine), ("vulkan", vulkan_binary())):
        port = configure(cantor_home, engine)
        import_models(fabricated)
        if backend == "vulkan":
            config.update({"backends.acestep": "vulkan"})

        made[backend] = sing(
            cantor_home, port, {"caption": "a quiet piano", "duration": 10, "seed": 7}
        )
    for backend, song in made.items():
        assert song["state"] == "done", (backend, song.get("error"))
        assert song["engine"]["backend"] == backend, song["engine"]
        assert song["engine"]["seconds_per_step"] > 0, song["engine"]
    done = subprocess.run(
        [sys.executable, "-m", "cantor_desktop", "backends", "--json"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    status = {b["name"]: b for b in json.loads(done.stdout)["backends"]}
    vulkan, cpu = status["vulkan"], status["cpu"]
    assert vulkan["measured"]["seconds_per_step"] > cpu["measured"]["seconds_per_step"]
    assert "Measured slower than the CPU here" in vulkan["message"], vulkan["message"]
    assert "cantor backends --use cpu" in vulkan["message"]
    ratio = vulkan["measured"]["seconds_per_step"] / cpu["measured"]["seconds_per_step"]
    from real_engine.conftest import figure

    figure(
        "lavapipe against the CPU build, seconds per diffusion step",
        1,
        1,
        f"{vulkan['measured']['seconds_per_step']:.2f} against "
        f"{cpu['measured']['seconds_per_step']:.2f} s a step for a minute of audio "
        f"({ratio:.1f}x slower)",
    )
