"""Shared fixtures: every test gets its own CANTOR_HOME; Qt runs offscreen.

The helpers the tests share live in tests/support/ (``support.procs``: free_port, alive,
gone, answers, wait_until; ``support.node``: a node process; ``support.ui``: the qasync
loop and waits); the fixtures among them are loaded here, for every test."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

# A shell without job control (a script, `cmd &`, some CI runners) starts its background
# jobs with SIGINT ignored, and every child inherits that: the CLI children of the Ctrl+C
# tests would then never see their Ctrl+C. Give them SIGINT as a terminal would.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from support.signed_manifests import TEST_PUBLIC  # noqa: E402 - tests/ is on sys.path
from support.skips import register as register_skip_watch  # noqa: E402
from support.ui import node, qloop  # noqa: E402,F401 - fixtures for every test module


@pytest.fixture(autouse=True)
def cantor_home(tmp_path, monkeypatch) -> Path:
    """A fresh CANTOR_HOME per test; the keyring is a real file keyring inside it."""
    home = tmp_path / "cantor-home"
    home.mkdir()
    monkeypatch.setenv("CANTOR_HOME", str(home))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("CANTOR_MANIFEST_URL", raising=False)
    monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", TEST_PUBLIC)  # manifests the tests sign
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return home


def pytest_configure(config):
    """CANTOR_SKIPS=STAGE: a skip that tests/skips_allowed.txt does not allow fails the run
    (support/skips.py)."""
    register_skip_watch(config)
