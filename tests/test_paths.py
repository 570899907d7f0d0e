"""CANTOR_HOME relocates every folder; without it platformdirs decides."""

from __future__ import annotations

import platformdirs

from cantor_desktop import config
from cantor_desktop.system.paths import paths


def test_cantor_home_relocates_every_folder(cantor_home):
    p = paths()
    for path in (
        p.config_file,
        p.engines_dir,
        p.models_dir,
        p.state_dir,
        p.logs_dir,
        p.default_songs_dir,
        p.cache_dir,
        p.queue_file,
    ):
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


def test_every_cache_and_library_file_comes_from_paths(cantor_home):
    # every module asks paths() for its files
    from cantor_desktop.install import manifest, trial
    from cantor_desktop.models import catalogue, library
    from cantor_desktop.node import runner
    from cantor_desktop.ui import waveform

    p = paths()
    cache, models = cantor_home / "cache", cantor_home / "models"
    assert p.sketch_models_dir == cache / "sketch-models" == runner.sketch_models_dir()
    assert p.waveforms_dir == cache / "waveforms" == waveform.cache_dir()
    assert p.probe_models_dir == cache / "probe-models" == trial.probe_models_dir()
    assert p.engine_downloads_dir == cache / "engines" and p.locks_dir == cache / "locks"
    assert manifest._cache_file("https://example.org/m.json").parent == cache
    assert p.library_file == models / "library.json" == library._registry_file()
    assert p.hashes_file == models / "hashes.json" == library._hashes_file()
    assert (
        p.catalogue_file("acestep") == models / "catalogue-acestep.json" == catalogue.cache_file()
    )
