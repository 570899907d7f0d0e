"""Settings without Qt: labels and groups, what changed and what the registry refuses, the
keys only the node's own machine may set, the default-model choice."""

from __future__ import annotations

from cantor_desktop import config
from cantor_desktop.models.catalogue import SKETCH_DISPLAY
from cantor_desktop.views import settings


def test_every_key_has_a_label_a_group_and_a_tooltip():
    for key in config.OPTIONS:
        assert settings.label(key) and settings.group(key)
        assert settings.tooltip(key).endswith(f"node.toml key: {key}")
    assert settings.label("node.port") == "Port" and settings.group("export.rate").startswith(
        "Export"
    )


def test_changes_and_what_the_registry_refuses():
    loaded = {"node.port": 7823, "engines.manifest": "", "app.node_url": ""}
    values = {**loaded, "node.port": 8000, "engines.manifest": "http://example.com/m.json"}
    changed = settings.changes(values, loaded)
    assert changed == {"node.port": 8000, "engines.manifest": "http://example.com/m.json"}
    refused = settings.problems(changed)
    assert (
        list(refused) == ["engines.manifest"] and "engines.manifest" in refused["engines.manifest"]
    )
    assert settings.changes({**loaded, "app.node_url": ""}, loaded) == {}


def test_a_remote_nodes_own_keys_are_set_on_its_machine_and_shown_as_its_own():
    assert settings.local_only_hint("songs.dir", remote=False) == ""
    hint = settings.local_only_hint("songs.dir", remote=True)
    assert hint == "Set on the node's machine: cantor config set songs.dir VALUE"
    assert settings.local_only_hint("app.node_url", remote=True) == ""  # ours, always
    ours = {"node.keep_loaded": False, "app.node_url": "http://far:7823"}
    theirs = {"node.keep_loaded": True, "app.node_url": "x", "unknown.key": 1}
    assert settings.shown_values(ours, theirs, remote=True) == {
        "node.keep_loaded": True,
        "app.node_url": "http://far:7823",
    }
    assert settings.shown_values(ours, theirs, remote=False) == ours
    assert settings.saved(True) == "Saved on the node" and settings.saved(False) == "Saved"


def test_the_default_model_is_chosen_among_the_installed_ones(tmp_path):
    models = [
        {"name": "acestep-v15-turbo-Q8_0", "state": "ready"},
        {"name": "x", "state": "partial"},
    ]
    assert settings.model_choices(models, "gone-model") == [
        (SKETCH_DISPLAY, "sketch"),
        ("acestep-v15-turbo-Q8_0", "acestep-v15-turbo-Q8_0"),
        ("gone-model (not installed)", "gone-model"),
    ]
    assert settings.stamp(tmp_path / "none.toml") is None
    (tmp_path / "node.toml").write_text("[node]\n")
    assert settings.stamp(tmp_path / "node.toml") is not None
    assert settings.malformed("line 1").endswith("`cantor config`:\nline 1")
