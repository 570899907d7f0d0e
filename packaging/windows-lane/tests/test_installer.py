"""The Windows installer, built here (installer/windows/build_msi.py: a per-user MSI made by
msitools' wixl from the frozen bundle) and run by Windows Installer under Wine, as a
musician runs it: installed silently, the installed app started and self-tested, upgraded
while the app runs (the app is closed first; node.toml and the songs stay), uninstalled
(the songs and settings stay)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time

import httpx
import lane
import pytest

sys.path.insert(0, str(lane.TOP / "installer" / "windows"))
import build_msi

PY = lane.PY
PRODUCTS = lane.win_path(lane.SRC / "packaging" / "windows-lane" / "drivers" / "msi_products.py")
WXS = (lane.TOP / "installer" / "windows" / "cantor.wxs").read_text()
UPGRADE_CODE = "{" + re.search(r'UpgradeCode="([0-9A-F-]+)"', WXS).group(1) + "}"


@pytest.fixture(scope="module")
def msis(bundle, signer):
    """This version's MSI and a next one (the same bundle, the version one patch higher:
    what an upgrade looks like to Windows Installer), each Authenticode-signed with a
    throw-away certificate (installer/windows/sign.py) and verified, as a release is."""
    folder, _ = bundle
    out = lane.WORK / "msi"
    shutil.rmtree(out, ignore_errors=True)
    version = build_msi.msi_version(build_msi.checkout_version())
    major, minor, patch = map(int, version.split("."))
    following = f"{major}.{minor}.{patch + 1}"
    first = build_msi.build(folder, out, version)
    second = build_msi.build(folder, out, following)
    for msi in (first, second):
        assert "Signature verification: ok" in signer(msi)
    return first, version, second, following


def products(session, mark) -> list[dict]:
    r = session.run([PY, PRODUCTS, UPGRADE_CODE], mark)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def msiexec(session, mark, *args: str) -> None:
    log = lane.DRIVE_C / "lane" / f"msiexec-{mark}-{args[0][1:]}-{time.monotonic_ns()}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    r = session.run(["msiexec", *args, "/qn", "/l*v", lane.win_path(log)], mark, timeout=900)
    assert r.returncode == 0, (
        r.returncode,
        r.stdout,
        r.stderr,
        log.read_text("utf-16", "replace")[-4000:] if log.exists() else "",
    )


def user_folders() -> dict:
    users = [
        p
        for p in (lane.DRIVE_C / "users").iterdir()
        if (p / "AppData").is_dir() and p.name not in ("Public",)
    ]
    assert len(users) == 1, users
    u = users[0]
    return {
        "program": u / "AppData" / "Local" / "Programs" / "Cantor",
        "start_menu": u
        / "AppData"
        / "Roaming"
        / "Microsoft"
        / "Windows"
        / "Start Menu"
        / "Programs"
        / "Cantor.lnk",
        "data": u / "AppData" / "Local" / "Cantor",
        "songs": u / "Music" / "Cantor",
    }


def test_install_self_test_upgrade_over_the_running_app_and_uninstall(session, mark, msis):
    msi1, v1, msi2, v2 = msis
    where = user_folders()
    for stale in products(session, mark):  # an earlier run's install
        msiexec(session, mark, "/x", stale["code"])
    for folder in (where["data"], where["songs"]):
        shutil.rmtree(folder, ignore_errors=True)

    # install, silently: the program, its Start-menu entry, one product
    msiexec(session, mark, "/i", lane.win_path(msi1))
    assert (where["program"] / "cantor-desktop.exe").is_file()
    assert (where["program"] / "_internal" / "python313.dll").is_file()
    # the Windows CPU engine the bundle carries (test_bundle proves it installs)
    assert list(
        (where["program"] / "_internal" / "engines").glob("ace-server-*-windows-x64-cpu.zip")
    )
    assert where["start_menu"].is_file()
    assert [p["version"] for p in products(session, mark)] == [v1]
    desktop = lane.win_path(where["program"] / "cantor-desktop.exe")
    cli = lane.win_path(where["program"] / "cantor.exe")

    # the installed build passes its self-test (output to a file, as build.sh sends it)
    log = lane.DRIVE_C / "lane" / f"installed-selftest-{mark}.log"
    r = session.run(  # one word per argument, as in test_bundle
        ["cmd", "/c", cli, "--self-test", ">", lane.win_path(log), "2>&1"], mark, timeout=600
    )
    text = log.read_bytes().decode("utf-8")
    assert r.returncode == 0 and "cantor self-test passed" in text, text

    # the musician's settings and a song, made with the installed app running
    port = lane_free_port()
    where["data"].mkdir(parents=True, exist_ok=True)
    settings = f'# my settings\n[node]\nhost = "127.0.0.1"\nport = {port}\n'.encode()
    (where["data"] / "node.toml").write_bytes(settings)
    app = session.start([desktop], mark)
    try:
        deadline = time.monotonic() + 240
        while not _answers(port) and time.monotonic() < deadline:
            assert app.proc.poll() is None, app.output()
            time.sleep(0.5)
        assert _answers(port), app.output()
        r = session.run(
            [cli, "sing", "lofi piano", "--instrumental", "--model", "sketch", "--duration", "10"],
            mark,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        songs = sorted(where["songs"].glob("*.wav"))
        assert len(songs) == 1, (r.stdout, r.stderr)
        song_bytes = songs[0].read_bytes()

        # the upgrade, while the app runs: it is closed through its own quit path first
        msiexec(session, mark, "/i", lane.win_path(msi2))
        assert app.wait(60) == 0, app.output()
    finally:
        app.kill()
    assert not _answers(port)
    assert [p["version"] for p in products(session, mark)] == [v2]
    assert (where["program"] / "cantor-desktop.exe").is_file() and where["start_menu"].is_file()
    assert (where["data"] / "node.toml").read_bytes() == settings
    assert songs[0].read_bytes() == song_bytes

    # the upgraded program runs
    r = session.run([cli, "--version"], mark)
    assert r.returncode == 0 and r.stdout.startswith("cantor "), r.stdout + r.stderr

    # uninstall: the program goes, the musician's songs and settings stay
    msiexec(session, mark, "/x", lane.win_path(msi2))
    assert products(session, mark) == []
    assert not (where["program"] / "cantor-desktop.exe").exists()
    assert not where["start_menu"].exists()
    assert (where["data"] / "node.toml").read_bytes() == settings
    assert songs[0].read_bytes() == song_bytes


def lane_free_port() -> int:
    from cantor_desktop.system.net import free_port

    return free_port()


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_msi_is_per_user_and_upgrades_by_one_upgrade_code(msis):
    """What Windows Installer reads: no administrator needed, one UpgradeCode for every
    version, a downgrade refused, Cantor closed before InstallValidate on an upgrade and an
    uninstall."""
    import subprocess

    msi1, *_ = msis

    def table(name):
        return subprocess.run(
            ["msiinfo", "export", str(msi1), name], capture_output=True, text=True, check=True
        ).stdout

    assert "ALLUSERS" not in table("Property")
    assert UPGRADE_CODE in table("Upgrade") and "WIX_DOWNGRADE_DETECTED" in table("Upgrade")
    assert "NOT WIX_DOWNGRADE_DETECTED" in table("LaunchCondition")
    sequence = dict(
        line.split("\t")[0::2]
        for line in table("InstallExecuteSequence").splitlines()[3:]
        if line.count("\t") == 2
    )
    assert (
        int(sequence["CloseCantor"])
        < int(sequence["InstallValidate"])
        < int(sequence["RemoveExistingProducts"])
    )
    assert "--quit" in table("CustomAction")
    info = subprocess.run(
        ["msiinfo", "suminfo", str(msi1)], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"Source: \d+", info) and int(re.search(r"Source: (\d+)", info).group(1)) & 8
