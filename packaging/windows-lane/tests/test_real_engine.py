"""The real engine on Windows: ace-server.exe, the CPU build cross-compiled for Windows
(../shared/engines/…-cpu-x64-windows.zip, its sha256 checked against the README there), run
by the Windows node under Wine with the fabricated model set the real-engine tests write
(tests/real_engine/fabricated.py). A whole song is made and its WAV served; and
``taskkill /F`` of the node ends the real engine with it (the node's kill-on-close Job
Object, which its children inherit)."""

from __future__ import annotations

import io
import os
import re
import sys
import time
import wave
import zipfile
from pathlib import Path

import httpx
import lane
import pytest
import winproc
from test_node import start_node

ROOT = Path(__file__).resolve().parents[3]
ENGINES = ROOT.parent / "shared" / "engines"
SONG_TIMEOUT = 600  # s: the whole song under Wine on a busy 2-core machine
MODELS = ("lm", "turbo", "text_enc", "vae")


def _archive() -> Path:
    found = sorted(ENGINES.glob("ace-server-*-cpu-x64-windows.zip"))
    if not found:
        pytest.skip(f"no Windows engine build in {ENGINES} (CI has ../shared beside the clone)")
    archive = found[0]
    readme = (ENGINES / "README.md").read_text("utf-8")
    after = readme[readme.index(archive.name) :]
    want = re.search(r"sha256 ([0-9a-f]{64})", after).group(1)  # type: ignore[union-attr]
    import hashlib

    have = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert have == want, f"{archive.name} has sha256 {have}; its README says {want}"
    return archive


@pytest.fixture(scope="module")
def windows_engine() -> str:
    """ace-server.exe unpacked on the prefix's drive C: (its Windows path)."""
    folder = lane.DRIVE_C / "lane" / "engine-cpu"
    with zipfile.ZipFile(_archive()) as zf:
        zf.extractall(folder)
    exe = next(folder.rglob("ace-server.exe"))
    return lane.win_path(exe)


@pytest.fixture(scope="module")
def fabricated():
    sys.path.insert(0, str(ROOT / "tests"))
    from real_engine import fabricated as fab

    return fab.model_set()


def _home_with_models(win_home, fabricated, engine: str, port_hint: str = "") -> str:
    """node.toml naming the real engine, and the fabricated models in the home's library
    (hard links: the set is about 1.7 GB)."""
    home, win = win_home
    library = home / "models" / "acestep"
    library.mkdir(parents=True)
    for key in MODELS:
        src = fabricated.files[key]
        try:
            os.link(src, library / src.name)
        except OSError:
            import shutil

            shutil.copy2(src, library / src.name)
    turbo = fabricated.files["turbo"].stem
    (home / "node.toml").write_text(
        f"[engines.acestep]\npath = '{engine}'\n\n"
        f'[models]\ndefault = "{turbo}"\nlm = "0.6B"\n\n'
        f"[songs]\ndir = '{win}\\songs'\nformat = \"wav16\"\n",
        "utf-8",
    )
    return turbo


def real_engines() -> list[winproc.Found]:
    """Every ace-server.exe running (the node starts it with an environment of its own,
    without the test's marker; the lane runs one test at a time)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if "ace-server.exe" in cmd.lower() and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(winproc.Found(int(entry.name), cmd.strip()))
    return found


def _gone(timeout: float) -> list[winproc.Found]:
    deadline = time.monotonic() + timeout
    while (left := real_engines()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _wait_done(url: str, headers: dict, song_id: str) -> dict:
    deadline = time.monotonic() + SONG_TIMEOUT
    while time.monotonic() < deadline:
        song = httpx.get(f"{url}/v1/songs/{song_id}", headers=headers, timeout=30).json()
        if song["state"] in ("done", "failed", "cancelled"):
            return song
        time.sleep(0.5)
    raise AssertionError(f"song {song_id} not finished in {SONG_TIMEOUT} s: {song}")


def test_a_whole_song_on_the_real_windows_engine(
    session, mark, win_home, windows_engine, fabricated
):
    turbo = _home_with_models(win_home, fabricated, windows_engine)
    node, url, headers = start_node(session, mark, win_home[1])
    try:
        r = httpx.post(
            url + "/v1/songs",
            json={"caption": "a quiet piano", "duration": 10, "model": turbo, "seed": 7},
            headers=headers,
            timeout=60,
        )
        assert r.status_code == 202, r.text
        song = _wait_done(url, headers, r.json()["id"])
        assert song["state"] == "done", song.get("error")
        assert song["engine"]["backend"] == "cpu" and "ace-server" not in str(song["error"])
        audio = httpx.get(f"{url}/v1/songs/{song['id']}/audio", headers=headers, timeout=60)
        assert audio.status_code == 200
        with wave.open(io.BytesIO(audio.content)) as w:
            assert w.getframerate() == 48000 and w.getnframes() > 48000 * 5
    finally:
        node.kill()
    assert not _gone(20), "the real engine outlived its node"


def test_taskkill_of_the_node_ends_the_real_engine(
    session, mark, win_home, windows_engine, fabricated
):
    turbo = _home_with_models(win_home, fabricated, windows_engine)
    node, url, headers = start_node(session, mark, win_home[1])
    try:
        r = httpx.post(
            url + "/v1/songs",
            json={"caption": "a long drone", "duration": 600, "model": turbo},
            headers=headers,
            timeout=60,
        )
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 240
        engine = []
        while time.monotonic() < deadline and not engine:
            engine = real_engines()
            time.sleep(0.3)
        assert engine, f"the real engine never started: {winproc.processes(mark)}"
        nodes = [f for f in winproc.processes(mark) if f.role == "node"]
        assert nodes, winproc.processes(mark)
        # the node is the only python.exe this test runs (the engine is ace-server.exe)
        r = session.run(["taskkill", "/F", "/IM", "python.exe"], mark, timeout=60)
        assert r.returncode == 0, r
    finally:
        node.kill()
    left = _gone(20)
    assert not left, f"the real engine outlived its node: {left}"
