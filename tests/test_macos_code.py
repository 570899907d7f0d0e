"""macOS code on Linux: Mach-O headers read from real layouts, engine builds verified or
signed ad hoc after unpacking (the exact codesign command lines, every outcome), and an
engine killed by macOS for its signature explained in words.

There is no Mac here: codesign is played by ``support.macos_code.FakeCodesign`` (its
answers are codesign's own words), the processes and archives are real. What only a Mac
proves is listed in packaging/README.md.
"""

from __future__ import annotations

import asyncio
import glob
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fake_builds import BuildServer, gpu_script, make_archive
from support.macos_code import FakeCodesign, fat, thin, write

from cantor_desktop.install import engine_store, manifest, trial
from cantor_desktop.system import macho
from cantor_desktop.install.engine_store import InstalledBuild
from cantor_desktop.system.paths import paths
from cantor_desktop.system.procs import codesign

CS = "/usr/bin/codesign"


# -- Mach-O headers --------------------------------------------------------------------------


def test_thin_and_universal_files_are_read_with_their_architectures_and_oldest_macos(tmp_path):
    lib = write(tmp_path / "libggml.dylib", thin("arm64", "dylib", (14, 0, 0)))
    found = macho.read(lib)
    assert found.arches == ("arm64",) and found.filetype == "dylib" and not found.fat
    assert found.min_macos == (14, 0, 0) and not found.is_executable

    old = write(tmp_path / "old.so", thin("x86_64", "bundle", (10, 9, 0), old_style=True))
    assert macho.read(old).min_macos == (10, 9, 0) and macho.read(old).filetype == "bundle"

    both = write(
        tmp_path / "cantor-desktop",
        fat(thin("x86_64", "executable", (10, 13, 0)), thin("arm64", "executable", (11, 0, 0))),
    )
    found = macho.read(both)
    assert found.fat and found.arches == ("x86_64", "arm64") and found.is_executable
    assert found.min_macos == (11, 0, 0)  # it runs where every slice can
    assert macho.version_text((13, 0, 0)) == "13.0"
    assert macho.version_text((10, 15, 4)) == "10.15.4"


@pytest.mark.parametrize(
    "data",
    [
        b"#!/bin/sh\nexec true\n",
        b"\x7fELF\x02\x01\x01" + b"\0" * 60,
        b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + b"\0" * 64,  # a Java class file (version 52)
        b"\xcf\xfa\xed",  # too short
        b"",
    ],
)
def test_what_is_not_mach_o_is_not_taken_for_code(tmp_path, data):
    assert macho.read(write(tmp_path / "file", data)) is None


def test_llvm_reads_the_test_files_as_we_do(tmp_path):
    """The stand-in files are real Mach-O: LLVM's otool finds the same minos."""
    tool = shutil.which("llvm-otool") or next(
        iter(sorted(glob.glob("/usr/lib/llvm-*/bin/llvm-otool"))), None
    )
    if tool is None:
        pytest.skip("llvm-otool is not installed (apt: llvm)")
    for name, data, says in [
        ("lib.dylib", thin("arm64", "dylib", (13, 5, 0)), ("LC_BUILD_VERSION", "minos 13.5")),
        ("ext.so", thin("arm64", "bundle", (14, 0, 0)), ("LC_BUILD_VERSION", "minos 14.0")),
        ("exe", thin("arm64", "executable", (11, 0, 0)), ("LC_BUILD_VERSION", "minos 11.0")),
        ("old", thin("x86_64", "dylib", (10, 9, 0), old_style=True), ("version 10.9",)),
    ]:
        path = write(tmp_path / name, data)
        done = subprocess.run([tool, "-l", str(path)], check=False, capture_output=True, text=True)
        assert done.returncode == 0 and all(s in done.stdout for s in says), (name, done.stderr)
    both = write(tmp_path / "fat", fat(thin("x86_64"), thin("arm64")))
    done = subprocess.run(
        [tool, "-l", "-arch", "all", str(both)], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.count("LC_BUILD_VERSION") == 2, done.stderr


# -- inside-out ------------------------------------------------------------------------------


def _app(tmp_path: Path) -> Path:
    """A PyInstaller-shaped Cantor.app: main executable, a helper, libraries, a Python
    extension, a Qt framework, data, and the links PyInstaller makes between them."""
    import plistlib

    app = tmp_path / "Cantor.app"
    contents = app / "Contents"
    write(contents / "MacOS" / "cantor-desktop", thin(filetype="executable"), 0o755)
    write(contents / "Frameworks" / "libpython3.11.dylib", thin())
    write(contents / "Frameworks" / "numpy" / "_core" / "_multiarray.so", thin(filetype="bundle"))
    write(contents / "Frameworks" / "bin" / "helper", thin(filetype="executable"), 0o755)
    fw = contents / "Frameworks" / "PySide6" / "Qt" / "lib" / "QtCore.framework"
    write(fw / "Versions" / "A" / "QtCore", thin())
    write(fw / "Versions" / "A" / "Helpers" / "qt-tool", thin(filetype="executable"), 0o755)
    write(fw / "Versions" / "A" / "Resources" / "Info.plist", b"<plist/>")
    (fw / "Versions" / "Current").symlink_to("A")
    (fw / "QtCore").symlink_to("Versions/Current/QtCore")
    write(contents / "Resources" / "base_library.zip", b"PK\x05\x06" + b"\0" * 18)
    (contents / "MacOS" / "libpython3.11.dylib").symlink_to("../Frameworks/libpython3.11.dylib")
    (contents / "Resources" / "numpy").symlink_to("../Frameworks/numpy")
    with open(contents / "Info.plist", "wb") as f:
        plistlib.dump({"CFBundleExecutable": "cantor-desktop"}, f)
    return app


def test_an_app_is_signed_inside_out_without_links_data_or_its_main_binary_twice(tmp_path):
    app = _app(tmp_path)
    order = codesign.signing_order(app)
    rel = [str(p.relative_to(tmp_path)) for p in order]
    fw = "Cantor.app/Contents/Frameworks/PySide6/Qt/lib/QtCore.framework"
    assert rel == [
        f"{fw}/Versions/A/Helpers/qt-tool",
        "Cantor.app/Contents/Frameworks/numpy/_core/_multiarray.so",
        "Cantor.app/Contents/Frameworks/bin/helper",
        "Cantor.app/Contents/Frameworks/libpython3.11.dylib",
        fw,  # signs Versions/Current/QtCore with it
        "Cantor.app",  # signs Contents/MacOS/cantor-desktop with it, last of all
    ]
    # nothing is signed after something that contains it
    for i, path in enumerate(order):
        assert not any(earlier in path.parents for earlier in order[:i]), path
    assert codesign.is_executable_code(app) and codesign.is_executable_code(
        app / "Contents/Frameworks/bin/helper"
    )
    assert not codesign.is_executable_code(app / "Contents/Frameworks/libpython3.11.dylib")


def test_the_command_lines():
    assert codesign.verify_argv("/e/ace-server") == [
        CS,
        "--verify",
        "--all-architectures",
        "--strict",
        "--verbose=2",
        "/e/ace-server",
    ]
    assert codesign.adhoc_argv("/e/libggml.dylib") == [
        CS,
        "--force",
        "--sign",
        "-",
        "/e/libggml.dylib",
    ]
    argv = codesign.identity_argv(
        "/d/Cantor.app", "Developer ID Application: X (T)", entitlements="/e.plist"
    )
    assert argv == [
        CS,
        "--force",
        "--sign",
        "Developer ID Application: X (T)",
        "--options",
        "runtime",
        "--timestamp",
        "--entitlements",
        "/e.plist",
        "/d/Cantor.app",
    ]
    assert "--deep" not in argv


@pytest.mark.parametrize(
    "code,output,state,detail",
    [
        (0, "/x: valid on disk\n/x: satisfies its Designated Requirement", "valid", None),
        (1, "/x: code object is not signed at all\nIn architecture: arm64", "unsigned",
         "code object is not signed at all"),
        (1, "/x: invalid signature (code or signature have been modified)\nIn architecture: arm64",
         "invalid", "invalid signature (code or signature have been modified)"),
        (1, "/x: a sealed resource is missing or invalid", "invalid",
         "a sealed resource is missing or invalid"),
        (3, "", "invalid", "codesign --verify failed (exit code 3)"),
        (None, "/usr/bin/codesign could not run: No such file or directory", "unknown",
         "/usr/bin/codesign could not run: No such file or directory"),
    ],
)  # fmt: skip
def test_what_codesign_says_is_read(code, output, state, detail):
    found = codesign.verdict(code, output, "/x")
    assert found.state == state
    if detail is not None:
        assert found.detail == detail


# -- an engine build after unpacking ---------------------------------------------------------


def _engine(folder: Path) -> Path:
    write(folder / "ace-server", thin(filetype="executable"), 0o755)
    write(folder / "libggml-base.dylib", thin())
    write(folder / "lib" / "libggml-metal.dylib", thin())
    write(folder / "README.txt", b"ace-server\n")
    return folder


def test_a_build_whose_signatures_hold_is_kept_as_it_is(tmp_path):
    build = _engine(tmp_path / "build")
    tool = FakeCodesign()
    done = codesign.prepare_build(build, platform="darwin", run=tool)
    assert done.outcome == "kept" and tool.signed() == []
    assert tool.calls == [
        codesign.verify_argv(build / "lib" / "libggml-metal.dylib"),
        codesign.verify_argv(build / "libggml-base.dylib"),
        codesign.verify_argv(build / "ace-server"),
    ]
    assert done.describe() == "code signature verified (3 files)"


@pytest.mark.parametrize("state", ["unsigned", "invalid"])
def test_one_unsigned_or_broken_file_and_all_are_signed_ad_hoc_inside_out(tmp_path, state):
    build = _engine(tmp_path / "build")
    lib = str(build / "libggml-base.dylib")
    tool = FakeCodesign(states={lib: state})
    done = codesign.prepare_build(build, platform="darwin", run=tool)
    assert done.outcome == "signed"
    inside_out = [
        str(build / "lib" / "libggml-metal.dylib"),
        lib,
        str(build / "ace-server"),  # the executable last
    ]
    signing = [c for c in tool.calls if "--sign" in c]
    assert signing == [codesign.adhoc_argv(p) for p in inside_out]
    assert tool.verified() == inside_out + inside_out  # before, and again after
    said = {
        "unsigned": "code object is not signed at all",
        "invalid": "invalid signature (code or signature have been modified)",
    }[state]
    assert done.why == [f"libggml-base.dylib: {said}"]
    assert (
        done.describe()
        == f"signed ad hoc for this Mac (3 files; codesign said libggml-base.dylib: {said})"
    )


def test_a_build_that_cannot_be_signed_is_refused_in_words(tmp_path):
    build = _engine(tmp_path / "build")
    exe = str(build / "ace-server")
    tool = FakeCodesign(
        default="unsigned",
        refuse_signing={exe: "the codesign_allocate helper tool cannot be found or used"},
    )
    with pytest.raises(codesign.SignError) as err:
        codesign.prepare_build(
            build, describe="acestep metal v1 (macos arm64)", platform="darwin", run=tool
        )
    assert str(err.value) == (
        "acestep metal v1 (macos arm64): macOS would stop it at start (libggml-metal.dylib: "
        "code object is not signed at all), and signing it for this Mac failed: codesign "
        "--sign - ace-server: the codesign_allocate helper tool cannot be found or used"
    )


def test_a_signature_that_still_does_not_hold_is_refused(tmp_path):
    build = _engine(tmp_path / "build")
    lib = str(build / "libggml-base.dylib")
    tool = FakeCodesign(states={lib: "invalid"}, stays_broken={lib})
    with pytest.raises(codesign.SignError, match=r"libggml-base\.dylib: invalid signature .* "
                       r"\(still, after Cantor signed it for this Mac\)"):  # fmt: skip
        codesign.prepare_build(build, platform="darwin", run=tool)


def test_without_codesign_the_build_is_refused_not_left_to_die(tmp_path):
    build = _engine(tmp_path / "build")

    def missing(argv):
        return None, f"{argv[0]} could not run: No such file or directory"

    with pytest.raises(codesign.SignError, match="cannot check its code signature"):
        codesign.prepare_build(build, platform="darwin", run=missing)


def test_off_macos_nothing_is_checked(tmp_path):
    tool = FakeCodesign()
    assert (
        codesign.prepare_build(_engine(tmp_path / "b"), platform="linux", run=tool).outcome
        == "skipped"
    )
    assert (
        codesign.prepare_build(tmp_path / "empty", platform="darwin", run=tool).outcome == "skipped"
    )
    assert tool.calls == []


# -- through the store ------------------------------------------------------------------------


@pytest.fixture
def mac(monkeypatch):
    """This process plays a Mac for procs.codesign, with the fake codesign tool."""
    tool = FakeCodesign()
    monkeypatch.setattr(codesign, "is_mac", lambda platform=None: True)
    monkeypatch.setattr(codesign, "run_tool", tool)
    return tool


def _metal_build(srv: BuildServer, name: str, version: str) -> manifest.Build:
    files = {
        "ace-server": gpu_script(srv.engine_path, "CPU,MTL0"),  # a test engine owning Metal
        "libggml-metal.dylib": thin("arm64", "dylib", (14, 0, 0)),
        "libggml-base.dylib": thin("arm64", "dylib", (14, 0, 0)),
    }
    srv.add(
        "metal",
        make_archive(srv.folder / name, files),
        version=version,
        os_name="macos",
        arch="arm64",
    )
    m = asyncio.run(manifest.fetch(srv.manifest_url))
    return next(b for b in m.builds if b.backend == "metal" and b.version == version)


def test_the_store_signs_an_unsigned_build_and_says_so(tmp_path, mac):
    mac.default = "unsigned"
    with BuildServer(tmp_path / "srv") as srv:
        build = _metal_build(srv, "metal.tar.gz", "v1")
        inst, _ = asyncio.run(engine_store.install(build))
    folder = paths().engine_backend_dir("acestep", "metal")
    assert sorted(Path(p).name for p in mac.signed()) == [
        "libggml-base.dylib",
        "libggml-metal.dylib",
    ]
    assert all(folder.name in p or ".staging-" in p for p in mac.signed())
    info = json.loads((inst.path / "cantor-build.json").read_text())
    assert info["macos_signature"].startswith("signed ad hoc for this Mac (2 files; ")
    assert engine_store.installed("acestep", "metal").signature == info["macos_signature"]


def test_a_build_the_store_cannot_make_runnable_never_replaces_the_working_one(tmp_path, mac):
    with BuildServer(tmp_path / "srv") as srv:
        good = _metal_build(srv, "v1.tar.gz", "v1")
        asyncio.run(engine_store.install(good))
        bad = _metal_build(srv, "v2.tar.gz", "v2")
        mac.default = "invalid"
        mac.refuse_every = "Permission denied"
        with pytest.raises(engine_store.StoreError, match=r"acestep metal v2 \(macos arm64\): "
                           r"macOS would stop it at start \(libggml-base\.dylib: invalid signature "
                           r"\(code or signature have been modified\)\), and signing it for this "
                           r"Mac failed: codesign --sign - libggml-base\.dylib: Permission denied"):  # fmt: skip
            asyncio.run(engine_store.install(bad))
    assert engine_store.installed("acestep", "metal").version == "v1"
    folder = paths().engine_backend_dir("acestep", "metal")
    assert not list(folder.glob(".staging-*")) and not (folder / "v2").exists()


# -- an engine macOS killed --------------------------------------------------------------------


def test_a_sigkill_is_explained_by_the_signature_only_on_a_mac():
    broken = FakeCodesign(default="invalid")
    assert codesign.killed_reason("/e/ace-server", -9, platform="linux", run=broken) is None
    assert codesign.killed_reason("/e/ace-server", 1, platform="darwin", run=broken) is None
    assert broken.calls == []
    mine = codesign.killed_reason(
        "/my builds/ace-server", -9, user_build=True, platform="darwin", run=broken
    )
    assert mine.signature_broken
    assert mine.reason == (
        "macOS stopped it at start: its code signature does not hold (invalid signature (code "
        "or signature have been modified)); sign it for this Mac with: codesign --force --sign "
        "- '/my builds/ace-server' (and each library beside it)"
    )
    fetched = codesign.killed_reason(
        "/e/ace-server", -9, user_build=False, platform="darwin", run=broken
    )
    assert fetched.reason.endswith("Run: cantor backends --install to fetch and sign it again")
    holds = codesign.killed_reason("/e/ace-server", -9, platform="darwin", run=FakeCodesign())
    assert not holds.signature_broken and "a library it loads may not" in holds.reason


def test_a_trial_of_a_build_macos_kills_says_why_after_one_probe(tmp_path, mac):
    exe = write(tmp_path / "my build" / "ace-server", b"#!/bin/sh\nkill -9 $$\n", 0o755)
    mac.states[str(exe)] = "unsigned"
    build = InstalledBuild("acestep", "metal", "user-supplied", [str(exe)], {}, exe, source="user")
    result = asyncio.run(trial.trial_load(build, "metal", timeout=20))
    assert not result.ok and result.probes == 1 and result.exit_code == -9
    assert result.reason.startswith(
        "exited (killed by signal 9 (SIGKILL)) before initialising a device (no output). "
        "macOS stopped it at start: its code signature does not hold (code object is not "
        "signed at all); sign it for this Mac with: codesign --force --sign - "
    )
    assert mac.verified() == [str(exe)]


def test_a_sigkill_off_macos_is_tried_again_as_before(tmp_path):
    exe = write(tmp_path / "ace-server", b"#!/bin/sh\nkill -9 $$\n", 0o755)
    build = InstalledBuild("acestep", "cpu", "user-supplied", [str(exe)], {}, exe, source="user")
    result = asyncio.run(trial.trial_load(build, "cpu", timeout=3))
    assert not result.ok and result.probes > 1 and "macOS" not in result.reason


def test_metal_on_a_mac_is_fetched_signed_trial_loaded_and_the_user_told(
    tmp_path, mac, monkeypatch
):
    from cantor_desktop.install import backends
    from cantor_desktop.system import hardware

    mac.default = "unsigned"
    with BuildServer(tmp_path / "srv") as srv:
        _metal_build(srv, "metal.tar.gz", "v1")
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        hw = hardware.probe(tmp_path / "machine", os_name="macos", arch="arm64")
        events: list[backends.BackendEvent] = []
        kept = asyncio.run(backends.install("acestep", events.append, hw=hw))
    assert kept.backend == "metal" and kept.signature.startswith("signed ad hoc for this Mac")
    unpacked = next(e for e in events if e.kind == "unpack")
    assert unpacked.message.endswith(
        "; signed ad hoc for this Mac (2 files; codesign said libggml-base.dylib: code object "
        "is not signed at all and 1 more)"
    )
    assert any(e.kind == "kept" for e in events), [e.message for e in events]
