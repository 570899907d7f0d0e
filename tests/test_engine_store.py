"""Engine store: verified download, safe unpack, atomic swap, rollback, one download per sha."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import tracemalloc

import pytest

from cantor_desktop import config
from cantor_desktop.fetch import download
from cantor_desktop.install import engine_store, manifest
from cantor_desktop.system.paths import paths
from support.fake_builds import HUGE_LINK, BuildServer, never_ready_script, unsafe_archive


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
            asyncio.run(
                download.download(
                    build.url,
                    engine_store.archive_cache_path(build),
                    sha256=build.sha256,
                    retries=0,
                )
            )
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
    assert inst.env["GGML_BACKEND"] == "Vulkan0"
    # libraries beside the binary (a release archive unpacked by hand) are found
    assert inst.env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(tmp_path)


def test_trial_records_are_kept_per_build_and_evidence(tmp_path):
    exe = tmp_path / "my-ace-server"
    exe.write_text("#!/bin/sh\n")
    config.update({"engines.acestep.path": str(exe)})
    user = engine_store.installed("acestep", "cuda12")
    key = engine_store.build_key(user)
    assert engine_store.trial_record("acestep", "cuda12", key) is None
    engine_store.record_trial(
        user, ok=False, reason="[Load] FATAL: x", probes=3, evidence=["nvidia-smi: RTX, driver 550"]
    )
    got = engine_store.trial_record("acestep", "cuda12", key)
    assert got.rejected and got.reason == "[Load] FATAL: x" and got.probes == 3
    assert got.applies(["nvidia-smi: RTX, driver 550"])
    assert not got.applies(["nvidia-smi: RTX, driver 560"])  # a new driver: try again
    assert engine_store.trial_record("acestep", "cpu", key) is None  # per backend
    exe.write_text("#!/bin/sh\n# rebuilt\n")  # a new binary: a new build
    assert engine_store.build_key(user) != key


def test_missing_version_file_is_a_problem(tmp_path):
    folder = paths().engine_backend_dir("acestep", "cpu")
    (folder / "v1").mkdir(parents=True)
    (folder / "current").write_text("v1\n")
    entry = engine_store.inspect("acestep", "cpu")
    assert entry.build is None and "cantor-build.json is missing" in entry.problem


def test_two_installs_at_once_download_once(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        archive = srv.archive(
            "vk.tar.gz", never_ready_script(), extra={"lib.so": os.urandom(200_000)}
        )
        srv.add("vulkan", archive)
        srv.add("cpu", archive)
        m = asyncio.run(manifest.fetch(srv.manifest_url))
        vk = m.best("acestep", "vulkan", "linux", "x86_64")
        cpu = m.best("acestep", "cpu", "linux", "x86_64")

        async def both():
            return await asyncio.gather(
                engine_store.install(vk, keep_archive=True),
                engine_store.install(cpu, keep_archive=True),
            )

        (a, fa), (b, fb) = asyncio.run(both())
        assert srv.downloads(archive) == 1 and [fa, fb].count(True) == 1
    assert (a.path / "lib.so").read_bytes() == (b.path / "lib.so").read_bytes()


# -- hostile archives: links, modes, entry counts, zip links (real archives, built here) ------


def _links_outside(dest) -> list[str]:
    real = os.path.realpath(dest)
    return [
        str(p)
        for p in dest.rglob("*")
        if p.is_symlink() and not (os.path.realpath(p) + os.sep).startswith(real + os.sep)
    ]


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
@pytest.mark.parametrize("how", ["link_chain", "link_chain_write"])
def test_link_chain_through_dot_is_refused(tmp_path, kind, how):
    """`a -> .` then `a/a/esc -> ../../etc`: each link looks harmless as text once joined to
    its name; judged by where it resolves, the second leads out."""
    dest = tmp_path / "x" / "y" / "dest"
    (tmp_path / "x" / "etc").mkdir(parents=True)
    archive = unsafe_archive(tmp_path / f"bad.{kind}", how, kind)
    with pytest.raises(engine_store.UnsafeArchive, match="esc"):
        engine_store.unpack(archive, kind, dest)
    assert _links_outside(dest) == []
    assert list((tmp_path / "x" / "etc").iterdir()) == []


def test_link_chain_install_leaves_nothing(tmp_path):
    with BuildServer(tmp_path / "srv") as srv:
        srv.add("cpu", unsafe_archive(srv.folder / "chain.tar.gz", "link_chain_write"))
        with pytest.raises(engine_store.UnsafeArchive):
            asyncio.run(engine_store.install(_build(srv, "cpu")))
    folder = paths().engine_backend_dir("acestep", "cpu")
    assert engine_store.installed("acestep", "cpu") is None
    assert not list(folder.glob(".staging-*")) and not (folder.parent / "etc").exists()


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_links_inside_their_folder_still_work(tmp_path, kind):
    """What engine archives really hold: versioned .so links, a folder link, even `a -> .`."""
    import tarfile
    import zipfile

    archive = tmp_path / f"ok.{kind}"
    links = {
        "lib/libggml.so": "libggml.so.1",
        "current": "lib",
        "a": ".",
        "lib/self": "./libggml.so.1",
    }
    if kind == "tar.gz":
        with tarfile.open(archive, "w:gz") as tf:
            info = tarfile.TarInfo("lib/libggml.so.1")
            info.size = 3
            tf.addfile(info, io.BytesIO(b"elf"))
            for name, target in links.items():
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tf.addfile(info)
    else:
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("lib/libggml.so.1", b"elf")
            for name, target in links.items():
                info = zipfile.ZipInfo(name)
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, target)
    dest = tmp_path / "dest"
    engine_store.unpack(archive, kind, dest)
    assert (dest / "lib" / "libggml.so").read_bytes() == b"elf"
    assert (dest / "current" / "libggml.so.1").read_bytes() == b"elf"
    assert (dest / "a" / "a" / "lib" / "self").read_bytes() == b"elf"
    assert os.readlink(dest / "lib" / "libggml.so") == "libggml.so.1"


@pytest.mark.parametrize("target", ["..", "../lib", "sub/../../x", "/etc", "C:/x", "\\\\srv\\x"])
def test_link_targets_with_dotdot_or_absolute_refused(tmp_path, target):
    import tarfile

    archive = tmp_path / "l.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("d/link")
        info.type, info.linkname = tarfile.SYMTYPE, target
        tf.addfile(info)
    with pytest.raises(engine_store.UnsafeArchive, match="only point inside its own folder"):
        engine_store.unpack(archive, "tar.gz", tmp_path / "dest")


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_setuid_and_world_writable_modes_masked(tmp_path, kind):
    archive = unsafe_archive(tmp_path / f"suid.{kind}", "setuid", kind)
    dest = tmp_path / "dest"
    names = engine_store.unpack(archive, kind, dest)
    assert {"suid", "lib/sgid"} <= set(names)
    for name in ("suid", "lib/sgid"):
        mode = stat.S_IMODE((dest / name).stat().st_mode)
        assert mode == 0o755, oct(mode)  # executable kept; 0o6777 → 0o755


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_twenty_thousand_tiny_entries_refused(tmp_path, kind):
    archive = unsafe_archive(tmp_path / f"many.{kind}", "many", kind)
    assert archive.stat().st_size < 3 * 2**20
    dest = tmp_path / "dest"
    with pytest.raises(engine_store.UnsafeArchive, match="more than 4096"):
        engine_store.unpack(archive, kind, dest)
    written = sum(1 for _ in dest.rglob("*"))
    if kind == "zip":
        assert written == 0  # counted from the directory, before writing
    else:
        assert written <= engine_store.MAX_ENTRIES + 1  # a stream: stopped at the cap


def test_huge_zip_link_entry_is_never_read_whole(tmp_path):
    archive = unsafe_archive(tmp_path / "link.zip", "huge_link", "zip")
    assert archive.stat().st_size < 2**20 < HUGE_LINK
    tracemalloc.start()
    try:
        with pytest.raises(engine_store.UnsafeArchive, match="target"):
            engine_store.unpack(archive, "zip", tmp_path / "dest")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak} bytes held for a {HUGE_LINK}-byte link entry"
    assert not (tmp_path / "dest" / "lib").exists()


def test_zip_link_target_just_over_the_cap_refused(tmp_path):
    import zipfile

    archive = tmp_path / "lie.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("lib")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, b"x" * (engine_store.MAX_LINK_TARGET + 10))
    with pytest.raises(engine_store.UnsafeArchive, match="target"):
        engine_store.unpack(archive, "zip", tmp_path / "dest")


def test_zip64_directory_count_is_read_from_the_zip64_record(tmp_path, monkeypatch):
    """A zip64 archive says 0xFFFF in the plain end record; the real count is in the zip64
    record. Built with a lowered zip64 threshold so 20 entries make one."""
    import zipfile

    archive = tmp_path / "z64.zip"
    with monkeypatch.context() as m:
        m.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 10)
        with zipfile.ZipFile(archive, "w") as zf:
            for i in range(20):
                zf.writestr(f"f{i}", b"x")
    assert b"PK\x06\x06" in archive.read_bytes()  # a zip64 end record is there
    assert engine_store._zip_directory(archive)[0] == 20
    assert len(engine_store.unpack(archive, "zip", tmp_path / "ok", max_entries=30)) == 20
    with pytest.raises(engine_store.UnsafeArchive, match="20 entries"):
        engine_store.unpack(archive, "zip", tmp_path / "no", max_entries=15)
