"""Engine store: verified download, safe unpack, atomic swap, rollback, one download per sha."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from cantor_desktop import config, download, engine_store, manifest
from cantor_desktop.paths import paths
from support.fake_builds import BuildServer, never_ready_script, unsafe_archive


def _build(srv: BuildServer, backend: str, **kw) -> manifest.Build:
    m = asyncio.run(manifest.fetch(srv.manifest_url))
    found = [b for b in m.builds if b.backend == backend]
    return found[-1]


def test_install_layout_and_version_file(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", srv.archive("cpu.tar.gz", never_ready_script()))
        build = _build(srv, "cpu")
        inst, fetched = asyncio.run(engine_store.install(build))
    assert fetched
    folder = paths().engine_backend_dir("acestep", "cpu")
    assert (folder / "current").read_text().strip() == "v0.1.1"
    assert inst.path == folder / "v0.1.1"
    info = json.loads((inst.path / "cantor-build.json").read_text())
    assert info["sha256"] == build.sha256 and info["env"] == {"GGML_BACKEND": "CPU"}
    assert info["version"] == "v0.1.1" and info["executable"] == "ace-server"
    assert os.access(inst.argv[0], os.X_OK)
    assert inst.env["GGML_BACKEND"] == "CPU" and inst.source == "store"
    assert inst.env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(inst.path)
    assert engine_store.installed("acestep", "cpu").argv == inst.argv
    assert not list(folder.glob(".staging-*"))


def test_wrong_hash_refused_and_nothing_installed(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", srv.archive("cpu.tar.gz", never_ready_script()), sha256="0" * 64)
        build = _build(srv, "cpu")
        with pytest.raises(download.HashMismatch):
            asyncio.run(engine_store.install(build))
    assert engine_store.installed("acestep", "cpu") is None
    assert not list((paths().cache_dir / "engines").glob("*.tar.gz"))


def test_escaping_archive_refused_nothing_outside(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", unsafe_archive(srv.folder / "bad.tar.gz", "dotdot"))
        with pytest.raises(engine_store.UnsafeArchive, match=r"'\.\.'"):
            asyncio.run(engine_store.install(_build(srv, "cpu")))
    folder = paths().engine_backend_dir("acestep", "cpu")
    assert not (folder.parent / "escaped.txt").exists()
    assert not (folder / "escaped.txt").exists()
    assert engine_store.installed("acestep", "cpu") is None
    assert not list(folder.glob(".staging-*"))


def test_cut_download_resumes_byte_identical(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        big = os.urandom(300_000)
        archive = srv.archive("cpu.tar.gz", never_ready_script(), extra={"libbig.so": big})
        srv.add("cpu", archive)
        srv.server.cut("/builds/cpu.tar.gz", after=50_000)
        build = _build(srv, "cpu")
        with pytest.raises(download.DownloadError):
            asyncio.run(download.download(build.url, engine_store.archive_cache_path(build),
                                          sha256=build.sha256, retries=0))
        part = download.part_path(engine_store.archive_cache_path(build))
        kept = part.stat().st_size
        assert 0 < kept < archive.stat().st_size
        inst, fetched = asyncio.run(engine_store.install(build))
        ranges = [r.header("range") for r in srv.server.requests_for("/builds/cpu.tar.gz")]
    assert fetched and ranges[-1] == f"bytes={kept}-"
    assert (inst.path / "libbig.so").read_bytes() == big


def test_update_keeps_previous_and_rollback(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", srv.archive("a.tar.gz", never_ready_script()), version="v1")
        old, _ = asyncio.run(engine_store.install(_build(srv, "cpu")))
        srv.add("cpu", srv.archive("b.tar.gz", never_ready_script() + b"# b\n"), version="v2")
        new, _ = asyncio.run(engine_store.install(_build(srv, "cpu")))
        assert new.version == "v2" and old.path.is_dir()
        # a broken v3 (unsafe) fails: v2 stays current
        srv.add("cpu", unsafe_archive(srv.folder / "c.tar.gz", "symlink_out"), version="v3")
        with pytest.raises(engine_store.UnsafeArchive):
            asyncio.run(engine_store.install(_build(srv, "cpu")))
    assert engine_store.installed("acestep", "cpu").version == "v2"
    back = engine_store.rollback("acestep", "cpu")
    assert back.version == "v1" and engine_store.installed("acestep", "cpu").version == "v1"


def test_shared_download_fetched_once(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        archive = srv.archive("vk.tar.gz", never_ready_script())
        srv.add("vulkan", archive)
        srv.add("cpu", archive)
        m = asyncio.run(manifest.fetch(srv.manifest_url))
        vk = m.best("acestep", "vulkan", "linux", "x86_64")
        cpu = m.best("acestep", "cpu", "linux", "x86_64")
        asyncio.run(engine_store.install(vk, keep_archive=True))
        _inst, fetched = asyncio.run(engine_store.install(cpu))
        assert not fetched and srv.downloads(archive) == 1
    assert engine_store.installed("acestep", "vulkan").env["GGML_BACKEND"] == "Vulkan0"
    assert engine_store.installed("acestep", "cpu").env["GGML_BACKEND"] == "CPU"


def test_user_supplied_build_used_as_is(tmp_path):
    exe = tmp_path / "my-ace-server"
    exe.write_text("#!/bin/sh\n")
    config.update({"engines.acestep.path": str(exe)})
    inst = engine_store.installed("acestep", "vulkan")
    assert inst.source == "user" and inst.argv == [str(exe)]
    assert inst.env == {"GGML_BACKEND": "Vulkan0"}


def test_missing_version_file_is_a_problem(tmp_path):
    folder = paths().engine_backend_dir("acestep", "cpu")
    (folder / "v1").mkdir(parents=True)
    (folder / "current").write_text("v1\n")
    entry = engine_store.inspect("acestep", "cpu")
    assert entry.build is None and "cantor-build.json is missing" in entry.problem


def test_two_installs_at_once_download_once(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        archive = srv.archive("vk.tar.gz", never_ready_script(), extra={"lib.so": os.urandom(200_000)})
        srv.add("vulkan", archive)
        srv.add("cpu", archive)
        m = asyncio.run(manifest.fetch(srv.manifest_url))
        vk = m.best("acestep", "vulkan", "linux", "x86_64")
        cpu = m.best("acestep", "cpu", "linux", "x86_64")

        async def both():
            return await asyncio.gather(engine_store.install(vk, keep_archive=True),
                                        engine_store.install(cpu, keep_archive=True))
        (a, fa), (b, fb) = asyncio.run(both())
        assert srv.downloads(archive) == 1 and [fa, fb].count(True) == 1
    assert (a.path / "lib.so").read_bytes() == (b.path / "lib.so").read_bytes()
