"""The Windows lane's tests drive Wine from the Linux side (``packaging/windows-lane/run``).

They are skipped, with the reason, when the lane is not set up. One Xvfb and one Wine
session serve them all; each test gets a marker in its processes' environment (so "nothing
left running" is exact) and, where it needs one, a CANTOR_HOME of its own on the prefix's
drive C:.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import lane
import winproc

LANE_HOMES = lane.DRIVE_C / "lane"


def pytest_collection_modifyitems(config, items):
    why = lane.ready()
    if why:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=why))
    # the tests of the frozen bundle last: it is built meanwhile (see ``session``)
    items.sort(key=lambda item: "bundle" in getattr(item, "fixturenames", ()))


BUILD: dict = {}


def _bundle_wanted(items) -> bool:
    return any("bundle" in getattr(item, "fixturenames", ()) for item in items)


@pytest.fixture(scope="session")
def session(request):
    """The lane's display (``run``'s Xvfb, else one of its own) and Wine session; at the
    end, Wine's own processes of the prefix (wineserver, services, explorer) are stopped."""
    xvfb = None if os.environ.get("DISPLAY") else winproc.Xvfb()
    display = xvfb.display if xvfb else os.environ["DISPLAY"]
    builder = ThreadPoolExecutor(1, thread_name_prefix="bundle")
    try:
        lane.sync_checkout()  # the drivers the tests run, as they are in the checkout now
        lane.start_session(lane.base_env(display))
        if _bundle_wanted(request.session.items):
            # PyInstaller under Wine is the lane's longest step, and mostly waits on Wine:
            # it runs while the app, CLI and node tests run
            BUILD["future"] = builder.submit(lane.build_bundle, lane.base_env(display))
        yield winproc.Session(display)
    finally:
        if "future" in BUILD:
            BUILD["future"].cancel()
            concurrent.futures.wait([BUILD["future"]])
        builder.shutdown()
        lane.wineserver("-k")
        if xvfb:
            xvfb.stop()


@pytest.fixture
def mark(request):
    """This test's marker; whatever of it still runs at the end fails the test (and is
    ended)."""
    value = winproc.new_mark()
    yield value
    left = winproc.wait_gone(value, 15)
    if left:
        winproc.end(left)
        pytest.fail(f"processes left running after the test: {left}")


@pytest.fixture
def win_home(request):
    """A CANTOR_HOME of the test's own on drive C: (its Linux path, its Windows path)."""
    name = request.node.name.replace("[", "-").replace("]", "")[:60]
    home = LANE_HOMES / f"{name}-{time.monotonic_ns() % 10**6}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home, lane.win_path(home)


@pytest.fixture(scope="session")
def bundle(session):
    """The frozen Windows bundle (built once per session by PyInstaller under Wine, reused
    while its inputs are unchanged): its folder, and how it was made."""
    future = BUILD.get("future")
    result = future.result() if future else lane.build_bundle(lane.base_env(session.display))
    return lane.BUNDLE, result


@pytest.fixture(scope="session")
def signer(tmp_path_factory):
    """A throw-away code-signing certificate (openssl: a CA and a leaf for codeSigning, its
    PKCS#12 with a password) for installer/windows/sign.py: (sign, verify) of a file."""
    import subprocess

    sys.path.insert(0, str(lane.TOP / "installer" / "windows"))
    import sign

    folder = tmp_path_factory.mktemp("signing")
    password = "lane-" + os.urandom(6).hex()

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
        "ca.pem", "-days", "2", "-subj", "/CN=Cantor lane test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
        "-subj", "/CN=Cantor lane test signer",
    )  # fmt: skip
    (folder / "ext").write_text(
        "extendedKeyUsage=codeSigning\nkeyUsage=critical,digitalSignature\n"
    )
    openssl(
        "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "ext",
    )  # fmt: skip
    openssl(
        "pkcs12", "-export", "-out", "leaf.p12", "-inkey", "leaf.key", "-in", "leaf.pem",
        "-certfile", "ca.pem", "-passout", f"pass:{password}",
    )  # fmt: skip

    def sign_file(path: Path) -> str:
        sign.sign(path, folder / "leaf.p12", password)
        return sign.verify(path, folder / "ca.pem")

    return sign_file
