"""CANTOR_HOME relocates every folder; without it platformdirs decides."""

from __future__ import annotations

import platformdirs

from cantor_desktop import config
from cantor_desktop.paths import paths


def test_cantor_home_relocates_every_folder(cantor_home):
    p = paths()
    for path in (p.config_file, p.engines_dir, p.models_dir, p.state_dir, p.logs_dir,
                 p.default_songs_dir, p.cache_dir, p.queue_file):
        assert cantor_home in path.parents
    assert p.config_file == cantor_home / "node.toml"
    assert p.engine_backend_dir("acestep", "cpu") == cantor_home / "engines" / "acestep" / "cpu"
    assert config.load().songs_dir() == cantor_home / "songs"


def test_without_cantor_home_platformdirs_decide(monkeypatch):
    monkeypatch.delenv("CANTOR_HOME")
    p = paths()
    dirs = platformdirs.PlatformDirs("Cantor", appauthor=False)
    assert str(p.config_dir) == dirs.user_config_dir
    assert str(p.data_dir) == dirs.user_data_dir
    assert str(p.logs_dir) == dirs.user_log_dir
    assert p.models_dir.parent == p.data_dir
