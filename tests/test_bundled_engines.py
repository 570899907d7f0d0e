"""The engine in the box (cantor_desktop/install/bundled.py): a package's own engine build is
installed the first time the store has none, listed as installed ("came with Cantor"),
trial-loaded like any other, replaced by an update, and one that does not load here falls
through like a downloaded build, never unpacked again."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from support.fake_builds import (
    BuildServer,
    cuda_broken_script,
    fake_machine,
    make_archive,
    sha256_of,
    working_script,
)

from cantor_desktop.install import backends, bundled, engine_store

VERSION = "0.17.0+fa33775"


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A simulated x86-64 Linux machine with no GPU."""
    root, bin_dir = fake_machine(tmp_path / "m", nvidia_driver=None, render=False)
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    return root


def carry(folder: Path, script: bytes, monkeypatch, *, sha256: str | None = None) -> Path:
    """A package's engines folder holding one CPU build (``script`` as its ace-server)."""
    archive = make_archive(
        folder / f"ace-server-{VERSION}-linux-x64-cpu.tar.gz",
        {"ace-server": script, "BUILD.json": b"{}\n"},
    )
    row = {
        "family": "acestep",
        "backend": "cpu",
        "os": "linux",
        "arch": "x86_64",
        "version": VERSION,
        "sha256": sha256 or sha256_of(archive),
        "size": archive.stat().st_size,
        "archive": "tar.gz",
        "executable": "ace-server",
        "env": {"GGML_BACKEND": "CPU"},
        "file": archive.name,
    }
    (folder / bundled.INDEX).write_text(json.dumps({"builds": [row]}))
    monkeypatch.setenv(bundled.FOLDER_ENV, str(folder))
    return archive


def cpu(st: backends.SystemStatus) -> backends.BackendStatus:
    return st.backend("cpu")


def test_the_carried_cpu_build_is_installed_and_listed_without_a_download(
    machine, tmp_path, monkeypatch
):
    archive = carry(tmp_path / "pkg", working_script(), monkeypatch)
    before = archive.read_bytes()
    st = backends.status("acestep")
    item = cpu(st)
    assert item.state == "installed" and item.version == VERSION, item
    assert "came with Cantor" in item.message and st.default == "cpu"
    assert any("it came with Cantor" in line for line in item.evidence)
    assert archive.read_bytes() == before  # the package's file is left as it was
    build = asyncio.run(backends.engine_for("acestep"))  # trial-loaded before it is used
    assert build.version == VERSION and bundled.is_bundled(build)
    assert (
        engine_store.trial_record("acestep", "cpu", engine_store.build_key(build)).state == "works"
    )


def test_a_carried_build_with_other_bytes_is_not_installed(machine, tmp_path, monkeypatch):
    carry(tmp_path / "pkg", working_script(), monkeypatch, sha256="0" * 64)
    assert cpu(backends.status("acestep")).state != "installed"
    assert engine_store.installed("acestep", "cpu") is None


def test_a_carried_build_that_does_not_load_falls_through_and_stays_out(
    machine, tmp_path, monkeypatch
):
    carry(tmp_path / "pkg", cuda_broken_script("[Load] FATAL: illegal instruction"), monkeypatch)
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", srv.archive("cpu.tar.gz", working_script()), version="v0.1.1")
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        kept = asyncio.run(backends.install("acestep"))
    # the carried build was tried, rejected and removed; the published one works
    assert kept.backend == "cpu" and kept.version == "v0.1.1" and not bundled.is_bundled(kept)
    key = engine_store.build_key(bundled.builds()[0][0])
    assert engine_store.trial_record("acestep", "cpu", key).rejected
    backends.status("acestep")  # a later look does not unpack it again
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"


def test_an_update_replaces_the_carried_build(machine, tmp_path, monkeypatch):
    carry(tmp_path / "pkg", working_script(), monkeypatch)
    assert cpu(backends.status("acestep")).version == VERSION
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", srv.archive("cpu.tar.gz", working_script()), version="0.18.0")
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        asyncio.run(backends.update())
        asyncio.run(backends.settle_staged("acestep"))  # the node's start: tried, then kept
    assert engine_store.installed("acestep", "cpu").version == "0.18.0"
