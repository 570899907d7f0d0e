"""Settings: generated from the registry, validated, an edit on disk shows within a second."""

from __future__ import annotations

import time

from cantor_desktop import config
from cantor_desktop.paths import paths
from cantor_desktop.ui.pages.settings import SettingsPage


def test_every_key_has_a_field_and_save_writes_node_toml(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    assert set(page.fields) == set(config.OPTIONS)
    page.fields["node.port"].setValue(8123)
    page.fields["songs.format"].setCurrentText("flac")
    assert page.save_button.isEnabled()
    assert page.save()
    cfg = config.load()
    assert cfg.get("node.port") == 8123 and cfg.get("songs.format") == "flac"


def test_invalid_value_is_refused_with_the_registry_reason(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    page.fields["engines.manifest"].setText("http://example.com/m.json")
    assert not page.save_button.isEnabled()
    assert "engines.manifest" in page.errors["engines.manifest"].text()


def test_an_edit_on_disk_shows_within_a_second(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    path = paths().config_file
    path.write_text("# mine\n[node]\nkeep_loaded = true\nport = 9001\n")
    start = time.monotonic()
    qtbot.waitUntil(lambda: page.value("node.port") == 9001, timeout=1500)
    assert time.monotonic() - start < 1.2
    assert page.value("node.keep_loaded") is True
    config.update({"node.port": 9002})  # atomic rename, like the CLI does
    qtbot.waitUntil(lambda: page.value("node.port") == 9002, timeout=1500)


def test_a_malformed_file_is_shown_and_never_overwritten(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    path = paths().config_file
    path.write_text("[node\nport = 1\n")
    qtbot.waitUntil(lambda: not page.banner.isHidden(), timeout=1500)
    assert "line 1" in page.banner.text()
    page.fields["node.port"].setValue(7000)
    assert not page.save_button.isEnabled()
    assert not page.save()
    assert path.read_text() == "[node\nport = 1\n"
