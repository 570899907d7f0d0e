"""The backends flow with the real ace-server packed as release archives (binary and
libggml* at the top level, RUNPATH stripped) and served on 127.0.0.1 with a manifest:
install on a simulated NVIDIA machine, a staged update that lacks a library, a user's own
build unpacked by hand."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from real_engine.real_build import needs_real_engine, pack, unpack_beside
from support.fake_builds import BuildServer, fake_machine

from cantor_desktop.install import backends, engine_store, manifest
from cantor_desktop import config

pytestmark = needs_real_engine
CUDA_FATAL = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"
VULKAN_FATAL = "[Load] FATAL: GGML_BACKEND=Vulkan0 not found. Available: CPU"
MISSING = (
    "ace-server: error while loading shared libraries: libggml-base.so.0: cannot open "
    "shared object file: No such file or directory"
)


@pytest.fixture
def nvidia(tmp_path, monkeypatch):
    root, bin_dir = fake_machine(tmp_path / "machine")
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)  # the store sets its own
    return root


@pytest.fixture
def release(tmp_path, monkeypatch):
    """The real build as one release archive serving cuda12, vulkan and cpu (each with its
    device), published by a manifest server. BuildServer.publish() is the one place the
    manifest is written (a signature goes there)."""
    with BuildServer(tmp_path / "srv") as srv:
        srv.real = pack(tmp_path / "srv" / "acestep-real-linux-x64.tar.gz")
        for backend in ("cuda12", "vulkan", "cpu"):
            srv.add(backend, srv.real, version="v0.1.1")
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        yield srv


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop", "backends", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_install_from_real_archives_rejects_the_gpus_with_their_fatal_lines(nvidia, release):
    done = cli("--install")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert f"GPU backend rejected: {CUDA_FATAL}" in out
    assert f"GPU backend rejected: {VULKAN_FATAL}" in out
    assert any(line.startswith("cpu: works — kept (v0.1.1)") for line in out), out
    assert release.downloads(release.real) == 1  # one archive serves all three
    st = json.loads(cli("--json").stdout)
    states = {b["name"]: b["state"] for b in st["backends"]}
    assert states == {
        "cuda12": "rejected",
        "metal": "unsupported",
        "vulkan": "rejected",
        "cpu": "installed",
    }
    assert st["default"] == "cpu"
    cuda = next(b for b in st["backends"] if b["name"] == "cuda12")
    assert cuda["message"].startswith(f"rejected: {CUDA_FATAL} (trial load of v0.1.1")
    # the auto rule skips the rejected ones: the node runs the CPU build
    build = asyncio.run(backends.engine_for("acestep"))
    assert build.backend == "cpu" and build.source == "store"
    # an explicit --use tries cuda12 again, and says the node keeps the CPU
    again = cli("--use", "cuda12")
    assert again.returncode == 1
    assert f"GPU backend rejected: {CUDA_FATAL}" in again.stderr
    assert "node.toml is unchanged; the node keeps using cpu" in again.stderr


def test_a_staged_update_missing_a_library_never_takes_over(nvidia, release, tmp_path):
    assert cli("--use", "cpu").returncode == 0
    broken = pack(tmp_path / "srv" / "acestep-real-v2.tar.gz", leave_out=("libggml-base.so.0",))
    release.add("cpu", broken, version="v0.2.0")
    asyncio.run(manifest.fetch())
    done = cli("--update")
    assert done.returncode == 0, done.stderr
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    assert engine_store.staged("acestep", "cpu").version == "v0.2.0"
    # the node's start: the staged build is trial-loaded first, and fails with exit 127
    told = asyncio.run(backends.settle_staged("acestep"))
    rejected = [e.message for e in told if e.kind == "rejected"]
    assert rejected and MISSING in rejected[0], told
    assert rejected[0].startswith("cpu: the update to v0.2.0 was rejected: ")
    assert "v0.1.1 stays in use" in rejected[0]
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    assert engine_store.staged("acestep", "cpu") is None
    assert asyncio.run(backends.engine_for("acestep")).version == "v0.1.1"
    again = cli("--update")
    assert "v0.2.0 was rejected here and is not offered again" in again.stdout
    assert release.downloads(broken) == 1


def test_a_users_build_unpacked_by_hand_finds_its_libraries(nvidia, tmp_path):
    exe = unpack_beside(tmp_path / "my-ace")
    config.update({"engines.acestep.path": str(exe)})
    build = asyncio.run(backends.engine_for("acestep"))
    assert build.source == "user" and build.backend == "cpu"
    st = backends.status("acestep")
    assert [st.backend(n).state for n in ("cuda12", "vulkan", "cpu")] == [
        "rejected",
        "rejected",
        "installed",
    ]
    assert st.backend("cuda12").message.startswith(f"rejected: {CUDA_FATAL}")
