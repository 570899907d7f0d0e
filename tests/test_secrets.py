"""secrets: a real file keyring (conftest) and the no-keyring case."""

from __future__ import annotations

import keyring.backends.fail
import keyring.core
import pytest

from cantor_desktop.system import secrets
from cantor_desktop.models import hub


def no_keyring(monkeypatch):
    """What keyring picks on a machine with no backend at all: its fail.Keyring."""
    monkeypatch.setattr(keyring.core, "_keyring_backend", keyring.backends.fail.Keyring())


def test_set_get_delete_roundtrip():
    assert secrets.get_secret("hf_token") is None
    secrets.set_secret("hf_token", "  hf_abc  ")
    assert secrets.get_secret("hf_token") == "hf_abc"
    secrets.set_secret("hf_token", "hf_new")
    assert secrets.get_secret("hf_token") == "hf_new"
    assert secrets.delete_secret("hf_token") is True
    assert secrets.get_secret("hf_token") is None
    assert secrets.delete_secret("hf_token") is False


def test_empty_secret_refused():
    with pytest.raises(ValueError):
        secrets.set_secret("hf_token", "   ")


def test_no_keyring_gives_clear_error(monkeypatch):
    no_keyring(monkeypatch)
    with pytest.raises(secrets.NoKeyringError) as err:
        secrets.set_secret("hf_token", "x")
    assert "no OS keyring is available here; set HF_TOKEN instead" in str(err.value)
    with pytest.raises(secrets.NoKeyringError):
        secrets.get_secret("hf_token")


def test_hf_token_env_wins_and_keyring_missing_is_fine(monkeypatch):
    secrets.set_secret(secrets.HF_TOKEN, "hf_keyring")
    assert hub.token() == "hf_keyring"
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert hub.token() == "hf_env"
    assert hub.auth_headers() == {"Authorization": "Bearer hf_env"}
    monkeypatch.delenv("HF_TOKEN")
    no_keyring(monkeypatch)
    assert hub.token() is None and hub.auth_headers() == {}


def test_no_keyring_message_names_the_right_variable(monkeypatch):
    no_keyring(monkeypatch)
    with pytest.raises(secrets.NoKeyringError, match="set CANTOR_NODE_TOKEN instead"):
        secrets.get_secret("node-token")
    with pytest.raises(secrets.NoKeyringError, match="cannot be stored"):
        secrets.set_secret("remote-node-token", "abc")
