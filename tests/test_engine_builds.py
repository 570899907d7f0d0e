"""packaging/engines: build.py's target table, source check, patches and reproducible
archives; release.py's signed manifest as Cantor reads it. No compiler needed, except for the
one slow test that builds linux-x64-cpu from ../shared/engines' source archive."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cantor_desktop.install import engine_store, manifest, signing_keys

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ROOT / "packaging" / "engines"


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


release = _load("cantor_engines_release", ENGINES / "release.py")
build = release.build
SOURCE = build.load_source()


# -- the target table -------------------------------------------------------------------------


def test_source_json_pins_the_archive():
    assert SOURCE["sha256"] == "c3aaef6c9e53e13ae2950f8f896b586eeab41344da84cb6ec44ab88041a6265d"
    assert SOURCE["archive"] == "acestep.cpp-fa33775-ggml-v0.17.0-src.tar.xz"
    assert SOURCE["acestep_commit"].startswith("fa33775") and len(SOURCE["acestep_commit"]) == 40
    assert SOURCE["ggml_version"] == "v0.17.0"
    assert SOURCE["url"].startswith("https://github.com/")
    assert build.default_source(SOURCE) == ROOT.parent / "shared" / "engines" / SOURCE["archive"]
    manifest.version_key(SOURCE["engine_version"])  # a version Cantor orders


def test_every_target_the_release_needs():
    assert set(build.TARGETS) == {
        "linux-x64-cpu",
        "linux-x64-vulkan",
        "windows-x64-cpu",
        "macos-arm64-metal",
        "linux-x64-cuda12",
        "windows-x64-cuda12",
    }
    for t in build.TARGETS.values():
        assert (
            t.name
            == f"{'macos' if t.os == 'macos' else t.os}-{'arm64' if t.arch == 'arm64' else 'x64'}-{t.backend}"
        )
        assert t.backend in manifest.DEVICE_ENV and t.os in manifest.OSES
        assert t.arch in manifest.ARCHES
        assert "-DCMAKE_BUILD_TYPE=Release" in t.cmake_args
        assert t.patches[0] == "version-from-env.patch"
        for p in t.patches:
            assert (build.PATCHES / p).is_file()
        assert t.archive == ("zip" if t.os == "windows" else "tar.gz")
        assert t.executable == ("ace-server.exe" if t.os == "windows" else "ace-server")


def test_linux_cpu_is_cpu_only_with_run_time_variants():
    t = build.TARGETS["linux-x64-cpu"]
    args = t.cmake_args
    for flag in ("-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_NATIVE=OFF"):
        assert flag in args
    for flag in ("-DGGML_VULKAN=OFF", "-DGGML_CUDA=OFF", "-DGGML_METAL=OFF", "-DGGML_BLAS=OFF"):
        assert flag in args
    assert not any(a.startswith("-DGGML_AVX") for a in args)  # the variants choose
    variants = next(a for a in args if a.startswith("-DGGML_CPU_VARIANTS=")).split("=")[1]
    assert {"x64", "sse42", "haswell", "skylakex"} <= set(variants.split(";"))
    assert "cpu-variants-subset.patch" in t.patches
    assert t.rpath_args == (
        "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
        "-DCMAKE_INSTALL_RPATH=$ORIGIN",
    )


def test_gpu_and_cross_targets_flags():
    vk = build.TARGETS["linux-x64-vulkan"]
    assert "-DGGML_VULKAN=ON" in vk.cmake_args and "-DGGML_CUDA=OFF" in vk.cmake_args
    assert "vulkan-headers-before-261.patch" in vk.patches

    win = build.TARGETS["windows-x64-cpu"]
    assert win.toolchain == "mingw-w64-x86_64.cmake" and (ENGINES / win.toolchain).is_file()
    assert "-DBUILD_SHARED_LIBS=OFF" in win.cmake_args
    assert "-DCMAKE_EXE_LINKER_FLAGS=-static -Wl,--no-insert-timestamp" in win.cmake_args
    assert win.rpath_args == ()
    assert "x86_64-w64-mingw32-g++-posix" in (ENGINES / win.toolchain).read_text()

    metal = build.TARGETS["macos-arm64-metal"]
    assert metal.cmake_args == ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_METAL_EMBED_LIBRARY=ON")
    assert "-DCMAKE_INSTALL_RPATH=@executable_path" in metal.rpath_args
    assert metal.host == "darwin"

    for name, host in (("linux-x64-cuda12", "linux"), ("windows-x64-cuda12", "win32")):
        cuda = build.TARGETS[name]
        assert "-DGGML_CUDA=ON" in cuda.cmake_args and cuda.host == host
        archs = next(a for a in cuda.cmake_args if a.startswith("-DCMAKE_CUDA_ARCHITECTURES="))
        assert "86-real" in archs and "89-real" in archs
        assert any("cublas" in lib for lib in cuda.runtime_libs)


def test_recorded_flags_name_no_machine_path(tmp_path):
    t = build.TARGETS["windows-x64-cpu"]
    work = tmp_path / "work"
    run_args = build.cmake_args(t, work, work / "src", work / "build")
    assert run_args[:5] == ["cmake", "-S", str(work / "src"), "-B", str(work / "build")]
    assert f"-DCMAKE_TOOLCHAIN_FILE={ENGINES.as_posix()}/{t.toolchain}" in run_args
    prefix_map = f"-ffile-prefix-map={work.resolve()}=."
    assert f"-DCMAKE_C_FLAGS=-D_WIN32_WINNT=0x0601 {prefix_map}" in run_args
    assert f"-DCMAKE_CXX_FLAGS={prefix_map}" in run_args  # httplib wants Windows 10's API
    recorded = build.recorded_cmake_args(t)
    assert "-DCMAKE_TOOLCHAIN_FILE=packaging/engines/mingw-w64-x86_64.cmake" in recorded
    assert "-DCMAKE_CXX_FLAGS=-ffile-prefix-map=<work>=." in recorded
    assert not any(str(tmp_path) in a for a in recorded)
    msvc = build.recorded_cmake_args(build.TARGETS["windows-x64-cuda12"])
    assert not any("prefix-map" in a for a in msvc)


def test_build_env_gives_the_banner_and_fences_git(tmp_path):
    env = build.build_env(SOURCE, tmp_path)
    assert env["ACESTEP_VERSION_HASH"] == "fa33775"
    assert env["ACESTEP_VERSION_DATE"] == "2026-07-21"
    assert env["GIT_CEILING_DIRECTORIES"] == str(tmp_path.resolve())


# -- refusals ---------------------------------------------------------------------------------


def test_refuses_a_source_archive_with_another_sha256(tmp_path, capsys):
    fake = tmp_path / SOURCE["archive"]
    fake.write_bytes(b"not the pinned source")
    with pytest.raises(build.BuildError, match="refused: sha256"):
        build.check_source(fake, SOURCE)
    work = tmp_path / "work"
    rc = build.main(
        ["linux-x64-cpu", "--source", str(fake), "--work", str(work), "--out", str(tmp_path)]
    )
    assert rc == 1
    assert "refused: sha256" in capsys.readouterr().err
    assert not (work / "source").exists() and not (work / "build").exists()


def test_refuses_a_missing_source_archive(tmp_path):
    with pytest.raises(build.BuildError, match="not found"):
        build.check_source(tmp_path / "nope.tar.xz", SOURCE)


def test_refuses_an_unknown_target(capsys):
    with pytest.raises(SystemExit) as exc:
        build.main(["linux-arm64-cpu"])
    assert exc.value.code == 2
    assert "unknown target 'linux-arm64-cpu'" in capsys.readouterr().err


def test_refuses_a_target_for_another_host(tmp_path, monkeypatch):
    archive = tmp_path / "src.tar.xz"
    archive.write_bytes(b"x")
    monkeypatch.setitem(SOURCE, "sha256", hashlib.sha256(b"x").hexdigest())
    monkeypatch.setattr(build, "load_source", lambda: SOURCE)
    if sys.platform == "darwin":
        pytest.skip("this machine builds macos-arm64-metal")
    with pytest.raises(build.BuildError, match="is built on darwin"):
        build.build_target(build.TARGETS["macos-arm64-metal"], archive, tmp_path, tmp_path / "w", 1)


# -- patches ----------------------------------------------------------------------------------

PATCH = """A description line.

--- a/tools/v.cmake
+++ b/tools/v.cmake
@@ -1,3 +1,4 @@
 one
+one and a half
 two
 three
@@ -5,2 +6,2 @@
 five
-six
+SIX
"""


def test_apply_patch_exactly(tmp_path):
    tree = tmp_path / "src"
    (tree / "tools").mkdir(parents=True)
    (tree / "tools" / "v.cmake").write_text("one\ntwo\nthree\nfour\nfive\nsix\n")
    patch = tmp_path / "p.patch"
    patch.write_text(PATCH)
    assert build.apply_patch(patch, tree) == ["tools/v.cmake"]
    assert (
        tree / "tools" / "v.cmake"
    ).read_text() == "one\none and a half\ntwo\nthree\nfour\nfive\nSIX\n"
    with pytest.raises(build.BuildError, match="does not match the hunk"):
        build.apply_patch(patch, tree)  # already applied: the context no longer matches


def test_the_shipped_patches_are_diffs_of_the_pinned_tree():
    for patch in sorted(build.PATCHES.glob("*.patch")):
        text = patch.read_text()
        assert text.index("\n--- a/") > 0, f"{patch.name}: says what it is for first"
        assert "+++ b/" in text and "\n@@ " in text


@pytest.mark.skipif(not build.default_source(SOURCE).is_file(), reason="no ../shared/engines")
def test_the_shipped_patches_apply_to_the_pinned_source(tmp_path):
    src = build.unpack(build.default_source(SOURCE), tmp_path)
    for patch in sorted(build.PATCHES.glob("*.patch")):
        assert build.apply_patch(patch, src)
    text = (src / "tools" / "version.cmake").read_text()
    assert "$ENV{ACESTEP_VERSION_HASH}" in text


# -- reproducible archives --------------------------------------------------------------------


def _staged(folder: Path, stamp: int) -> dict[str, Path]:
    folder.mkdir()
    files = {}
    for name, data, mode in (
        ("ace-server", b"\x7fELF exe", 0o775),
        ("libggml.so.0", b"\x7fELF lib", 0o700),
        ("BUILD.json", b'{"target": "x"}\n', 0o600),
    ):
        p = folder / name
        p.write_bytes(data)
        p.chmod(mode)
        os.utime(p, (stamp, stamp))
        files[name] = p
    return files


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_packing_twice_gives_the_same_bytes(tmp_path, kind):
    pack = build.pack_tar_gz if kind == "tar.gz" else build.pack_zip
    one = _staged(tmp_path / "one", 1_000_000_000)
    two = _staged(tmp_path / "two", 1_700_000_000)  # other mtimes, other folder
    pack(one, tmp_path / f"a.{kind}", 1784655290)
    pack(dict(reversed(list(two.items()))), tmp_path / f"b.{kind}", 1784655290)
    a, b = (tmp_path / f"a.{kind}").read_bytes(), (tmp_path / f"b.{kind}").read_bytes()
    assert a == b
    pack(one, tmp_path / f"c.{kind}", 1784655292)  # (a zip stores time in 2-s steps)
    assert (tmp_path / f"c.{kind}").read_bytes() != a  # the time given is the one stored


def test_tar_entries_sorted_owned_by_root_at_the_source_date(tmp_path):
    files = _staged(tmp_path / "s", 5)
    out = tmp_path / "a.tar.gz"
    build.pack_tar_gz(files, out, 1784655290)
    head = out.read_bytes()[:10]
    assert head[3] == 0 and head[4:8] == b"\0\0\0\0"  # gzip: no name, no time
    with tarfile.open(out) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["BUILD.json", "ace-server", "libggml.so.0"]
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 1784655290)
        assert m.isfile()
    assert [oct(m.mode) for m in members] == ["0o644", "0o755", "0o755"]


def test_cantor_unpacks_what_build_py_packs(tmp_path):
    files = _staged(tmp_path / "s", 5)
    for kind, pack in (("tar.gz", build.pack_tar_gz), ("zip", build.pack_zip)):
        out = tmp_path / f"e.{kind}"
        pack(files, out, 1784655290)
        dest = tmp_path / f"u-{kind.replace('.', '')}"
        dest.mkdir()
        assert sorted(engine_store.unpack(out, kind, dest)) == sorted(files)
        assert (dest / "ace-server").read_bytes() == b"\x7fELF exe"
        assert os.access(dest / "ace-server", os.X_OK)


# -- release.py -------------------------------------------------------------------------------


def _engine_archive(
    folder: Path, target: str, *, name: str | None = None, record: dict | None = None
) -> Path:
    t = build.TARGETS[target]
    stage_dir = folder / f"stage-{target}-{name or ''}"
    stage_dir.mkdir(parents=True)
    (stage_dir / t.executable).write_bytes(f"engine for {target}".encode())
    (stage_dir / t.executable).chmod(0o755)
    record = record or {
        "target": target,
        "acestep_commit": SOURCE["acestep_commit"],
        "engine_version": SOURCE["engine_version"],
    }
    (stage_dir / "BUILD.json").write_text(json.dumps(record))
    files = {p.name: p for p in stage_dir.iterdir()}
    out = folder / "archives" / (name or build.archive_name(t, SOURCE))
    out.parent.mkdir(exist_ok=True)
    (build.pack_zip if t.archive == "zip" else build.pack_tar_gz)(files, out, 1784655290)
    return out


@pytest.fixture
def release_key(tmp_path):
    """A throw-away ed25519 key made for this test: (key file, public key)."""
    key = signing_keys.new_private_key()
    path = tmp_path / "throwaway.key"
    path.write_text(signing_keys.private_key_text(key) + "\n")
    return path, signing_keys.public_key_text(key)


def test_release_writes_a_manifest_cantor_loads_and_signs_it(tmp_path, release_key, capsys):
    key_file, public = release_key
    made = {
        t: _engine_archive(tmp_path, t)
        for t in ("linux-x64-cpu", "linux-x64-vulkan", "windows-x64-cpu")
    }
    out = tmp_path / "out"
    rc = release.main(
        [
            str(tmp_path / "archives"),
            "--key",
            str(key_file),
            "--out",
            str(out),
            "--published",
            "2026-12-01",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    raw = (out / "engines.json").read_bytes()
    sig = (out / "engines.json.sig").read_bytes()

    assert (
        signing_keys.verify(raw, sig, [signing_keys.TrustedKey("throwaway", public)]) == "throwaway"
    )
    with pytest.raises(signing_keys.SignatureRefused):  # not by the tests' usual key
        signing_keys.verify(
            raw,
            sig,
            signing_keys.shipped_keys()
            + [
                signing_keys.TrustedKey(
                    "t", signing_keys.public_key_text(signing_keys.new_private_key())
                )
            ],
        )

    loaded = manifest.parse_bytes(raw, "test")
    assert loaded.published == "2026-12-01" and not loaded.refused
    by_key = {(b.backend, b.os): b for b in loaded.builds}
    assert set(by_key) == {("cpu", "linux"), ("vulkan", "linux"), ("cpu", "windows")}
    for (backend, os_name), b in by_key.items():
        target = f"{os_name}-x64-{backend}"
        assert b.sha256 == build.sha256_file(made[target])
        assert b.size == made[target].stat().st_size
        assert b.url == (
            f"https://github.com/cantor-desktop/cantor/releases/download/acestep-"
            f"{SOURCE['engine_version']}/{made[target].name}"
        )
        assert (
            b.family == "acestep" and b.arch == "x86_64" and b.version == SOURCE["engine_version"]
        )
        assert b.env == {"GGML_BACKEND": manifest.DEVICE_ENV[backend]}
    assert (
        by_key[("cpu", "linux")].archive == "tar.gz"
        and by_key[("cpu", "linux")].executable == "ace-server"
    )
    assert (
        by_key[("cpu", "windows")].archive == "zip"
        and by_key[("cpu", "windows")].executable == "ace-server.exe"
    )
    doc = json.loads(raw)
    assert list(doc) == ["schema", "published", "families"]
    assert set(doc["families"]["acestep"]["builds"][0]) == {
        "backend",
        "os",
        "arch",
        "version",
        "url",
        "sha256",
        "size",
        "archive",
        "executable",
        "env",
    }


def test_a_release_on_loopback_is_what_cantor_fetches(tmp_path, release_key, monkeypatch):
    """--base-url for tests: Cantor's own fetch takes the manifest and its signature from
    127.0.0.1 and accepts it with the throw-away key trusted."""
    key_file, public = release_key
    _engine_archive(tmp_path, "linux-x64-cpu")
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert (
            release.main(
                [
                    str(tmp_path / "archives"),
                    "--key",
                    str(key_file),
                    "--out",
                    str(tmp_path / "pub"),
                    "--base-url",
                    base + "/archives",
                ]
            )
            == 0
        )
        monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", public)
        got = asyncio.run(manifest.fetch(base + "/pub/engines.json"))
    finally:
        server.shutdown()
    (cpu,) = got.builds
    assert cpu.url == base + "/archives/" + build.archive_name(
        build.TARGETS["linux-x64-cpu"], SOURCE
    )
    assert cpu.backend == "cpu" and cpu.env == {"GGML_BACKEND": "CPU"}


def test_the_key_can_come_from_the_environment(tmp_path, release_key, monkeypatch):
    key_file, public = release_key
    _engine_archive(tmp_path, "windows-x64-cpu")
    monkeypatch.setenv("THE_KEY", key_file.read_text())
    assert (
        release.main(
            [str(tmp_path / "archives"), "--key-env", "THE_KEY", "--out", str(tmp_path / "o")]
        )
        == 0
    )
    raw = (tmp_path / "o" / "engines.json").read_bytes()
    sig = (tmp_path / "o" / "engines.json.sig").read_bytes()
    signing_keys.verify(raw, sig, [signing_keys.TrustedKey("env", public)])


@pytest.mark.parametrize(
    "name",
    [
        "ace-server.tar.gz",
        "ace-server-fa33775.tar.gz",
        "engine-linux-x64-cpu.tar.gz",
        "ace-server-fa33775-linux-arm64-cpu.tar.gz",
        "ace-server-fa33775-linux-x64-cpu.zip",
    ],
)
def test_release_refuses_an_archive_whose_name_does_not_say_its_target(
    tmp_path, release_key, name, capsys
):
    key_file, _ = release_key
    _engine_archive(tmp_path, "linux-x64-cpu")
    _engine_archive(tmp_path, "linux-x64-cpu", name=name)
    rc = release.main(
        [str(tmp_path / "archives"), "--key", str(key_file), "--out", str(tmp_path / "o")]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert name in err and ("does not say its target" in err or "is a tar.gz" in err)
    assert not (tmp_path / "o").exists()


def test_release_refuses_an_archive_whose_build_record_disagrees(tmp_path, release_key):
    _engine_archive(
        tmp_path,
        "linux-x64-cpu",
        record={
            "target": "linux-x64-vulkan",
            "acestep_commit": SOURCE["acestep_commit"],
            "engine_version": "v1",
        },
    )
    with pytest.raises(release.ReleaseError, match="BUILD.json says target 'linux-x64-vulkan'"):
        release.manifest_document(list((tmp_path / "archives").iterdir()), None, "today")


def test_release_refuses_an_archive_without_a_build_record(tmp_path):
    out = tmp_path / build.archive_name(build.TARGETS["linux-x64-cpu"], SOURCE)
    exe = tmp_path / "ace-server"
    exe.write_bytes(b"x")
    build.pack_tar_gz({"ace-server": exe}, out, 0)
    with pytest.raises(release.ReleaseError, match="no BUILD.json"):
        release.row_for(out)


# -- a real build (slow) ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_linux_cpu_build_runs_from_a_fresh_folder(tmp_path):
    """linux-x64-cpu built from ../shared/engines' source archive (several minutes on 2
    cores; in CI the archive .ci/real-engine.sh built, named by CANTOR_BUILT_ENGINE),
    unpacked elsewhere and run: banner, no Vulkan loader, $ORIGIN, its build record."""
    given = os.environ.get("CANTOR_BUILT_ENGINE", "").strip()
    if not sys.platform.startswith("linux") or not all(shutil.which(t) for t in ("readelf", "ldd")):
        pytest.skip("needs Linux with readelf and ldd")
    if given:
        archive = Path(given)
    else:
        source = build.default_source(SOURCE)
        if not source.is_file():
            pytest.skip(f"{source} is not there")
        if not all(shutil.which(t) for t in ("cmake", "c++")):
            pytest.skip("needs cmake and a C++ compiler")
        out = tmp_path / "out"
        rc = subprocess.run(
            [
                sys.executable,
                str(ENGINES / "build.py"),
                "linux-x64-cpu",
                "--source",
                str(source),
                "--out",
                str(out),
                "--work",
                str(tmp_path / "work"),
                "--nice",
                "10",
                "-j",
                "2",
            ],
            timeout=3500,
        ).returncode
        assert rc == 0
        (archive,) = out.iterdir()
        shutil.rmtree(tmp_path / "work")  # nothing of the build folder is left to lean on
    assert archive.name == "ace-server-fa33775-linux-x64-cpu.tar.gz"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(fresh, filter="data")
    exe = fresh / "ace-server"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    run = subprocess.run(
        [str(exe), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    assert run.returncode == 0
    assert run.stderr.splitlines()[0] == "acestep.cpp fa33775 (2026-07-21)"
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "libvulkan" not in ldd and "not found" not in ldd
    assert f"libggml.so.0 => {fresh}" in ldd.replace("/./", "/")
    for lib in fresh.glob("*.so*"):
        assert (
            "libvulkan"
            not in subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
        )
    for f in [exe, *fresh.glob("*.so*")]:
        dyn = subprocess.run(
            ["readelf", "-d", str(f)], capture_output=True, text=True, check=True
        ).stdout
        assert "(RUNPATH)" in dyn and "[$ORIGIN]" in dyn, f.name
    record = json.loads((fresh / "BUILD.json").read_text())
    assert record["target"] == "linux-x64-cpu" and record["source_sha256"] == SOURCE["sha256"]
    assert record["files"]["ace-server"] == hashlib.sha256(exe.read_bytes()).hexdigest()
    assert len(list(fresh.glob("libggml-cpu-*.so"))) >= 4


# -- the release workflow ---------------------------------------------------------------------


def test_release_workflow_is_pinned_and_keeps_the_key_in_its_last_job():
    text = (ROOT / ".github" / "workflows" / "engines.yml").read_text()
    uses = re.findall(r"uses: (\S+)@(\S+)", text)
    assert uses and all(re.fullmatch(r"[0-9a-f]{40}", sha) for _, sha in uses)
    assert "\npermissions:\n  contents: read\n" in text
    jobs = text[text.index("\njobs:\n") :]
    last = jobs.rindex("\n  release:\n")
    assert "secrets." not in jobs[:last] and "contents: write" not in jobs[:last]
    assert jobs[last:].count("secrets.") == 1
    for target in build.TARGETS:
        assert target in text, f"{target} is not built by the workflow"
    assert "release.py engines --key-env" in text


def test_the_folder_a_package_carries_is_what_cantor_adopts(tmp_path, monkeypatch, capsys):
    """release.py --bundle: the archives and bundled.json as install/bundled.py reads them
    (the same rows as the manifest's, with family and file); no key needed."""
    from cantor_desktop.install import bundled

    made = _engine_archive(tmp_path, "linux-x64-cpu")
    _engine_archive(tmp_path, "windows-x64-cpu")
    out = tmp_path / "carried"
    assert release.main([str(made.parent), "--bundle", str(out)]) == 0
    assert "bundled.json written (2 builds to carry)" in capsys.readouterr().out
    monkeypatch.setenv(bundled.FOLDER_ENV, str(out))
    found = {b.os: (b, path) for b, path in bundled.builds()}
    assert set(found) == {"linux", "windows"}
    linux, archive = found["linux"]
    assert archive == out / made.name and archive.read_bytes() == made.read_bytes()
    assert (linux.backend, linux.arch, linux.executable) == ("cpu", "x86_64", "ace-server")
    assert linux.sha256 == build.sha256_file(made) and linux.version == SOURCE["engine_version"]
    assert linux.url == f"bundled:{made.name}"
    row = release.row_for(made)
    assert linux.env == row["env"] and linux.size == row["size"]
    empty = tmp_path / "nothing-built"
    empty.mkdir()
    assert release.main([str(empty), "--bundle", str(out)]) == 1
