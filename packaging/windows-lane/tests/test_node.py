"""A headless node on Windows (``cantor node``), with its engine running a song: ``POST
/v1/node/shutdown`` ends both with exit 0; a node killed outright takes its engine with it
(the node sits in its own kill-on-close Job Object, which its children inherit)."""

from __future__ import annotations

import time

import httpx
import lane
import winproc

PY = lane.PY
STARTUP = 240  # s: a busy 2-core machine under Wine


def free_port() -> int:
    from cantor_desktop.system.net import free_port as free

    return free()


def start_node(session, mark, win):
    port = free_port()
    node = session.start(
        [PY, "-m", "cantor_desktop", "node", "--port", str(port)],
        mark,
        CANTOR_HOME=win,
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        assert node.proc.poll() is None, node.output()
        try:
            if httpx.get(url + "/v1/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    token = (lane.unix_path(win) / "state" / "node-token").read_text().strip()
    return node, url, {"Authorization": f"Bearer {token}"}


def engine_running(url, headers, mark) -> list[winproc.Found]:
    """A long sketch song queued; its engine (a child of the node) is up."""
    r = httpx.post(
        url + "/v1/songs",
        json={"caption": "slow drone", "duration": 600, "model": "sketch"},
        headers=headers,
        timeout=30,
    )
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = [f for f in winproc.processes(mark) if f.role == "engine"]
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"no engine started: {winproc.processes(mark)}")


def test_shutdown_through_the_api_ends_node_and_engine_with_exit_0(session, mark, win_home):
    _home, win = win_home
    node, url, headers = start_node(session, mark, win)
    try:
        engine_running(url, headers, mark)
        assert httpx.post(url + "/v1/node/shutdown", timeout=5).status_code == 401  # token
        r = httpx.post(url + "/v1/node/shutdown", headers=headers, timeout=30)
        assert r.status_code in (200, 202), r.text
        assert node.wait(120) == 0, node.output()
    finally:
        node.kill()
    assert not winproc.wait_gone(mark, 20)


def test_a_killed_node_takes_its_engine_with_it(session, mark, win_home):
    _home, win = win_home
    node, url, headers = start_node(session, mark, win)
    try:
        engine_running(url, headers, mark)
        # killed outright: Wine ends the Windows process behind it as TerminateProcess does
        node.kill()
    finally:
        node.kill()
    left = winproc.wait_gone(mark, 15)
    assert not left, f"the engine outlived its killed node: {left}"
