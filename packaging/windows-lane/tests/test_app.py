"""Cantor Desktop on Windows under Wine, on a display (Xvfb, Wine's virtual desktop with its
taskbar and notification area): first paint, the node child, a song made from Compose, the
tray's "Song ready" balloon, a second launch handing over through the named pipe, and every
way the app ends — the tray's Quit, a logout, being killed — leaving nothing running."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx
import lane
import pytest
import winproc

PY = lane.PY
DRIVERS = lane.SRC / "packaging" / "windows-lane" / "drivers"  # the checkout's copy on C:
APP = lane.win_path(DRIVERS / "app.py")
END_SESSION = lane.win_path(DRIVERS / "end_session.py")
SCREENSHOTS = lane.TOP / "docs" / "screenshots"
SHOTS_ON_C = lane.WORK / "screenshots"


def screenshot(app, page: str, timeout: float, **options) -> dict:
    """The whole Windows desktop with ``page`` shown, saved by the app to C:, then copied to
    docs/screenshots/windows-<page>.png."""
    SHOTS_ON_C.mkdir(parents=True, exist_ok=True)
    name = f"windows-{page.lower()}.png"
    shot = app.ask(
        "screenshot",
        timeout,
        cmd="screenshot",
        page=page,
        path=lane.win_path(SHOTS_ON_C / name),
        **options,
    )
    if shot["saved"]:
        shutil.copyfile(SHOTS_ON_C / name, SCREENSHOTS / name)
    return shot


STARTED = time.time()
STARTUP = 180  # s: the first start under Wine on a busy 2-core machine compiles modules


def free_port() -> int:
    from cantor_desktop.system.net import free_port as free

    return free()


def start_app(session, mark, win, port=None) -> winproc.WinProcess:
    """The app, as a double-click starts it, in this test's home (on a free port: written to
    its node.toml first, so it never takes the default 7823)."""
    home = lane.unix_path(win)
    if port is not None:
        (home / "node.toml").write_text(f'[node]\nhost = "127.0.0.1"\nport = {port}\n')
    return session.start(
        [PY, APP], mark, CANTOR_HOME=win, PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring"
    )


def roles(mark) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for found in winproc.processes(mark):
        out.setdefault(found.role, []).append(found.pid)
    return out


def wait_roles(mark, want: set[str], timeout: float) -> dict[str, list[int]]:
    deadline = time.monotonic() + timeout
    while not want <= set(seen := roles(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return seen


def test_compose_a_song_tray_balloon_second_launch_and_screenshots(session, mark, win_home):
    home, win = win_home
    port = free_port()
    app = start_app(session, mark, win, port)
    try:
        painted = app.wait_event("painted", STARTUP)
        node = app.wait_event("node", STARTUP)
        assert node["url"] == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{node['url']}/v1/health", timeout=10).json()["status"] == "ok"
        status = app.ask("status", cmd="status")
        assert status["visible"] and status["tray"] and status["link"] == "idle", status
        assert set(roles(mark)) >= {"app", "node"}

        caption = "bright synth pop, claps, warm bass"
        assert app.ask("composed", cmd="compose", caption=caption, duration=12)["problem"] == ""
        done = app.wait_event("song_done", 300)
        assert done["caption"] == caption
        song = lane.unix_path(done["path"])
        assert song.is_file() and song.stat().st_size > 12 * 48000 * 2
        assert song.is_relative_to(home)
        balloons = []
        deadline = time.monotonic() + 30
        while caption not in balloons and time.monotonic() < deadline:
            balloons = app.ask("balloons", cmd="balloons")["texts"]
        assert caption in balloons  # the tray's "Song ready" balloon, shown by Windows
        shot = screenshot(app, "Compose", 60, settle=0.5)
        assert shot["saved"], shot

        # a second launch finds the first through its named pipe, asks it for its window
        # and exits 0 without a window of its own
        app.ask("hidden", cmd="hide")
        assert not app.ask("status", cmd="status")["visible"]
        second = session.start(
            [PY, APP], mark, CANTOR_HOME=win, PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring"
        )
        assert second.wait(120) == 0, second.output()
        second.events()
        assert not any(e.startswith('{"event": "painted"') for e in second.seen), second.seen
        deadline = time.monotonic() + 30
        while not app.ask("status", cmd="status")["visible"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert app.ask("status", cmd="status")["visible"]
        assert "another launch asked for the window" in (home / "logs" / "app.log").read_text()

        # Songs draws the song's waveform (its peaks computed off the GUI thread)
        app.ask("page", cmd="page", page="Songs")
        deadline = time.monotonic() + 120
        while (
            not app.ask("waveform", cmd="waveform", path=done["path"])["known"]
            and time.monotonic() < deadline
        ):
            time.sleep(1)
        shot = screenshot(app, "Songs", 120, waveform=done["path"])
        assert shot["saved"] and shot["waveform"], shot  # the song's waveform, drawn
        shot = screenshot(app, "Library", 60)
        assert shot["saved"], shot
        app.ask("quitting", cmd="tray_quit")
        assert app.wait(120) == 0, app.output()
        assert painted["seconds"] > 0
    finally:
        app.kill()


def test_quit_from_the_tray_leaves_nothing_and_the_app_starts_again(session, mark, win_home):
    _home, win = win_home
    port = free_port()
    for attempt in ("first", "again after Quit"):
        app = start_app(session, mark, win, port)
        try:
            node = app.wait_event("node", STARTUP)
            assert httpx.get(f"{node['url']}/v1/health", timeout=10).status_code == 200, attempt
            app.ask("quitting", cmd="tray_quit")
            assert app.wait(120) == 0, (attempt, app.output())
        finally:
            app.kill()
        left = winproc.wait_gone(mark, 20)
        assert not left, (attempt, left)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{node['url']}/v1/health", timeout=3)


def _song_running(app, mark, seconds=600) -> dict[str, list[int]]:
    """A long song on its way: the node has started its engine (the sketch engine)."""
    app.ask("composed", cmd="compose", caption="slow ambient drone, pads", duration=seconds)
    seen = wait_roles(mark, {"app", "node", "engine"}, 120)
    assert {"app", "node", "engine"} <= set(seen), seen
    return seen


def test_a_logout_ends_the_app_node_and_engine_with_exit_0(session, mark, win_home):
    home, win = win_home
    app = start_app(session, mark, win, free_port())
    try:
        painted = app.wait_event("painted", STARTUP)
        app.wait_event("node", STARTUP)
        _song_running(app, mark)
        r = session.run([PY, END_SESSION, str(painted["pid"])], mark, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert app.wait(120) == 0, app.output()
    finally:
        app.kill()
    assert "the session is ending; quitting" in (home / "logs" / "app.log").read_text()
    assert not winproc.wait_gone(mark, 20)


def test_killing_the_app_ends_its_node_and_engine(session, mark, win_home):
    """Task Manager's End task (TerminateProcess): the node sits in the app's kill-on-close
    Job Object, the engine in the node's, so both end with the app."""
    _home, win = win_home
    app = start_app(session, mark, win, free_port())
    try:
        painted = app.wait_event("painted", STARTUP)
        app.wait_event("node", STARTUP)
        _song_running(app, mark)
        r = session.run(["taskkill", "/F", "/PID", str(painted["pid"])], mark, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert app.wait(60) != 0
    finally:
        app.kill()
    left = winproc.wait_gone(mark, 15)
    assert not left, f"still running after the app was killed: {left}"


def test_screenshots_are_pngs_of_the_whole_windows_desktop():
    """(Made by the first test of this file in this run: the copies on C: are new, and
    docs/screenshots holds them.)"""
    import struct

    for page in ("compose", "songs", "library"):
        made = SHOTS_ON_C / f"windows-{page}.png"
        data = made.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == lane.DESKTOP_SIZE  # the whole desktop
        assert made.stat().st_mtime > STARTED
        assert Path(SCREENSHOTS / made.name).read_bytes() == data
