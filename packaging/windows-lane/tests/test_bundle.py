"""The frozen Windows bundle: built by PyInstaller under Wine from packaging/cantor.spec with
the prefix's Python 3.13 (as ``packaging/build.sh windows`` builds it on Windows), free of
the lane's bridges, and passing its own self-test with the output sent to a file."""

from __future__ import annotations

import hashlib
import json

import lane


def test_pyinstaller_builds_the_windows_bundle_on_python_3_13(bundle):
    folder, _result = bundle
    for exe in ("cantor-desktop.exe", "cantor.exe"):
        assert (folder / exe).is_file()
    assert list(folder.glob("_internal/python313.dll"))


def test_no_bridge_of_the_lane_is_in_the_bundle(bundle):
    """The bridges live in the prefix only: no file of the bundle is one of them (by name
    or by content), and none is one of Wine's own DLLs."""
    folder, _ = bundle
    built = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.name
        for p in (lane.STATE / "bridges").glob("*.dll")
    }
    names = {b.dll.lower() for b in lane.BRIDGES} | {"wine_" + b.dll.lower() for b in lane.BRIDGES}
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        if (
            path.name.lower() in names
            or path.suffix.lower() in (".dll", ".pyd")
            and (
                hashlib.sha256(path.read_bytes()).hexdigest() in built
                or b"Wine builtin DLL" in path.read_bytes()[:0x80]
            )
        ):
            found.append(str(path.relative_to(folder)))
    assert not found, f"bridges or Wine DLLs in the bundle: {found}"


def test_the_frozen_self_test_passes_with_its_output_in_a_file(bundle, session, mark):
    """``cantor.exe --self-test > selftest.log``, as packaging/build.sh runs it: Windows
    gives a file the ANSI code page (cp1252), which has no "→"; the log is UTF-8."""
    folder, _ = bundle
    log = lane.DRIVE_C / "lane" / f"selftest-{mark}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    exe = lane.win_path(folder / "cantor.exe")
    # one word per argument (no spaces in these paths): Wine would quote an argument with
    # quotes inside as C's runtime does, which cmd does not read
    r = session.run(
        ["cmd", "/c", exe, "--self-test", ">", lane.win_path(log), "2>&1"], mark, timeout=600
    )
    text = log.read_bytes().decode("utf-8")
    assert r.returncode == 0, text + r.stdout + r.stderr
    assert "cantor self-test passed" in text and " → http://127.0.0.1:" in text, text
    assert "keyring backend: keyring.backends.Windows" in text


def test_the_bundle_carries_the_windows_cpu_engine_and_a_fresh_home_installs_it(
    bundle, session, mark, win_home
):
    """The engine in the box: the bundle holds the windows-x64-cpu build made by
    packaging/engines/build.py (.ci/build-engine.sh) with its ``bundled.json``, and the
    frozen ``cantor.exe backends --json`` on a home that has no engine installs it and lists
    it "came with Cantor" (install/bundled.py), its ace-server.exe unpacked in the home."""
    folder, _ = bundle
    carried = folder / "_internal" / "engines"
    rows = json.loads((carried / "bundled.json").read_text("utf-8"))["builds"]
    assert [(r["os"], r["backend"]) for r in rows] == [("windows", "cpu")], rows
    assert (carried / rows[0]["file"]).is_file()

    home, win = win_home
    r = session.run(
        [lane.win_path(folder / "cantor.exe"), "backends", "--json"],
        mark,
        timeout=600,
        CANTOR_HOME=win,
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    listed = json.loads(r.stdout)
    cpu = next(b for b in listed["backends"] if b["name"] == "cpu")
    assert cpu["installed"], cpu
    assert any("came with Cantor" in e for e in cpu.get("evidence") or []), cpu
    assert list(home.rglob("ace-server.exe")), "the carried engine was not unpacked in the home"


def test_the_console_twin_runs_the_cli(bundle, session, mark):
    folder, _ = bundle
    r = session.run([lane.win_path(folder / "cantor.exe"), "--version"], mark)
    assert r.returncode == 0 and r.stdout.strip().startswith("cantor "), r.stdout + r.stderr


def test_both_executables_carry_the_version_resource(bundle, session, mark):
    """What Explorer shows in Properties → Details (PyInstaller writes it from
    packaging/windows_version_info.txt; Linux cannot read it back: no pefile there)."""
    import sys

    sys.path.insert(0, str(lane.TOP / "installer" / "windows"))
    import build_msi

    folder, _ = bundle
    version = build_msi.checkout_version()
    code = (
        "import sys; from PyInstaller.utils.win32.versioninfo import "
        "read_version_info_from_executable as read; print(read(sys.argv[1]))"
    )
    for exe in ("cantor-desktop.exe", "cantor.exe"):
        r = session.run([lane.PY, "-c", code, lane.win_path(folder / exe)], mark)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"StringStruct('ProductVersion', '{version}')" in r.stdout, r.stdout
        assert "StringStruct('ProductName', 'Cantor')" in r.stdout


def test_the_executables_sign_and_still_run(bundle, signer, session, mark):
    """Authenticode with a throw-away certificate (installer/windows/sign.py, as
    packaging/build.sh windows signs a release): each executable signs and verifies, and the
    signed cantor.exe still runs under Windows (Wine)."""
    import shutil

    folder, _ = bundle
    signed = lane.WORK / "signed"
    shutil.rmtree(signed, ignore_errors=True)
    shutil.copytree(folder, signed)
    for exe in ("cantor.exe", "cantor-desktop.exe"):
        report = signer(signed / exe)
        assert "Signature verification: ok" in report, report
        assert "Cantor lane test signer" in report
    r = session.run([lane.win_path(signed / "cantor.exe"), "--version"], mark, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("cantor "), r.stdout + r.stderr
    shutil.rmtree(signed, ignore_errors=True)
