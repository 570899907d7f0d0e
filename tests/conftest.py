"""Shared fixtures: every test gets its own CANTOR_HOME; Qt runs offscreen."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from support.signed_manifests import TEST_PUBLIC   # tests/ is on sys.path (rootdir conftest)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def cantor_home(tmp_path, monkeypatch) -> Path:
    """A fresh CANTOR_HOME per test; the keyring is a real file keyring inside it."""
    home = tmp_path / "cantor-home"
    home.mkdir()
    monkeypatch.setenv("CANTOR_HOME", str(home))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("CANTOR_MANIFEST_URL", raising=False)
    monkeypatch.setenv("CANTOR_MANIFEST_PUBKEY", TEST_PUBLIC)   # manifests the tests sign
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def python_exe() -> str:
    return sys.executable
