"""node.toml: round trips, malformed files, bad values, concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tomlkit

from cantor_desktop import config
from cantor_desktop.system.paths import paths

USER_FILE = """\
# my settings, by hand
[node]
port = 7900   # not the default
mystery = "kept"

[extra_table]
answer = 42
"""


def test_comments_and_unknown_keys_survive_a_round_trip(cantor_home):
    path = paths().config_file
    path.write_text(USER_FILE)
    config.update({"node.keep_loaded": True, "songs.format": "flac"})
    text = path.read_text()
    assert "# my settings, by hand" in text
    assert "# not the default" in text
    assert 'mystery = "kept"' in text
    assert "[extra_table]\nanswer = 42" in text
    cfg = config.load()
    assert cfg.get("node.port") == 7900
    assert cfg.get("node.keep_loaded") is True
    assert cfg.get("songs.format") == "flac"
    # order kept: the user's [node] table still comes first
    assert text.index("[node]") < text.index("[extra_table]")


@pytest.mark.parametrize(
    "text, line, col",
    [
        ("[node]\nport = \n", 2, 8),
        ('[node]\nhost = "127.0.0.1"\n[node\n', 3, 6),
        ("[node]\nport = 7823\nport = 7824\n", 3, None),
    ],
)
def test_malformed_file_reports_position_and_is_left_byte_identical(cantor_home, text, line, col):
    path = paths().config_file
    path.write_bytes(text.encode())
    before = path.read_bytes()
    with pytest.raises(config.ConfigError) as err:
        config.load()
    assert err.value.line == line
    if col is not None:
        assert err.value.col == col
    assert f"line {line}" in str(err.value)
    with pytest.raises(config.ConfigError):
        config.update({"node.keep_loaded": True})
    assert path.read_bytes() == before
    cfg, problem = config.load_or_defaults()
    assert problem is not None and cfg.get("node.port") == 7823
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "body, key, allowed",
    [
        ("[node]\nport = 99999\n", "node.port", "1 to 65535"),
        ('[backends]\nacestep = "cuda13"\n', "backends.acestep", '"cuda12"'),
        ('[node]\nkeep_loaded = "yes"\n', "node.keep_loaded", "true or false"),
    ],
)
def test_bad_values_are_refused_with_the_key_name(cantor_home, body, key, allowed):
    path = paths().config_file
    path.write_text(body)
    before = path.read_bytes()
    with pytest.raises(config.ConfigError) as err:
        config.load()
    assert key in str(err.value) and allowed in str(err.value)
    assert err.value.key == key
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "key, text",
    [
        ("node.port", "99999"),
        ("backends.acestep", "cuda13"),
        ("node.keep_loaded", "maybe"),
        ("engines.manifest", "http://example.com/m.json"),
        ("songs.format", "ogg"),
    ],
)
def test_set_refuses_bad_values_and_writes_nothing(cantor_home, key, text):
    path = paths().config_file
    path.write_text(USER_FILE)
    before = path.read_bytes()
    with pytest.raises(config.ConfigError) as err:
        config.set_from_text(key, text)
    assert key in str(err.value)
    assert path.read_bytes() == before


def test_cli_config_set_get_and_errors(cantor_home):
    def cantor(*args):
        return subprocess.run(
            [sys.executable, "-m", "cantor_desktop", *args], capture_output=True, text=True
        )

    assert cantor("config", "path").stdout.strip() == str(cantor_home / "node.toml")
    assert cantor("config", "set", "node.keep_loaded", "on").returncode == 0
    assert cantor("config", "get", "node.keep_loaded").stdout.strip() == "true"
    bad = cantor("config", "set", "node.port", "99999")
    assert bad.returncode == 2 and "node.port" in bad.stderr and "65535" in bad.stderr
    unknown = cantor("config", "get", "node.nope")
    assert unknown.returncode == 2 and "node.nope" in unknown.stderr
    assert cantor("--version").stdout.startswith("cantor ")


FLIPPER = """
import sys
from cantor_desktop import config
key = sys.argv[1]
for i in range(200):
    config.update({key: i % 2 == 0 if key.endswith("keep_loaded") else ("wav16", "flac")[i % 2]})
"""


def test_two_processes_flip_different_keys_and_the_file_always_parses(cantor_home):
    path = paths().config_file
    path.write_text(USER_FILE)
    procs = [
        subprocess.Popen([sys.executable, "-c", FLIPPER, key])
        for key in ("node.keep_loaded", "songs.format")
    ]
    reads = 0
    while any(p.poll() is None for p in procs):
        tomlkit.parse(path.read_text())  # must parse at every moment
        reads += 1
    assert all(p.returncode == 0 for p in procs)
    assert reads > 10
    cfg = config.load()
    assert cfg.get("node.keep_loaded") is False  # i = 199 → odd → False
    assert cfg.get("songs.format") == "flac"  # i = 199 → odd → "flac"
    assert "# my settings, by hand" in path.read_text()


def test_a_huge_bad_value_gives_a_short_message(cantor_home):
    path = paths().config_file
    path.write_text('[songs]\nformat = "' + "x" * 1_000_000 + '"\n')
    with pytest.raises(config.ConfigError) as err:
        config.load()
    assert "songs.format" in str(err.value) and len(str(err.value)) < 600


def test_verbose_works_before_and_after_the_command(cantor_home):
    for args in (["-v", "config", "path"], ["config", "-v", "path"]):
        done = subprocess.run(
            [sys.executable, "-m", "cantor_desktop", *args], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(cantor_home / "node.toml")


def _cantor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_config_unset_gives_the_default_back_and_keeps_the_rest(cantor_home):
    path = paths().config_file
    path.write_text(USER_FILE)
    assert _cantor("config", "get", "node.port").stdout.strip() == "7900"
    done = _cantor("config", "unset", "node.port")
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    assert "port = " not in text  # gone from the file …
    assert _cantor("config", "get", "node.port").stdout.strip() == "7823"  # … the default
    assert "# my settings, by hand" in text and 'mystery = "kept"' in text
    assert "[extra_table]\nanswer = 42" in text
    before = path.read_bytes()
    again = _cantor("config", "unset", "node.port")  # not set: nothing to do
    assert again.returncode == 0 and path.read_bytes() == before
    unknown = _cantor("config", "unset", "node.nope")
    assert unknown.returncode == 2 and "node.nope" in unknown.stderr
    assert path.read_bytes() == before


def test_cli_config_show_lists_every_setting_with_its_value_and_what_is_allowed(cantor_home):
    paths().config_file.write_text(USER_FILE)
    assert _cantor("config", "set", "songs.format", "flac").returncode == 0
    shown = _cantor("config", "show")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line.split(" = ", 1)[0] for line in lines] == list(config.OPTIONS)
    values = {}
    for line in lines:
        key, rest = line.split(" = ", 1)
        value, allowed = rest.split("    # ", 1)
        values[key] = json.loads(value)
        assert allowed == config.OPTIONS[key].allowed()
    cfg = config.load()
    assert values == {key: cfg.get(key) for key in config.OPTIONS}
    assert values["node.port"] == 7900 and values["songs.format"] == "flac"  # the file's
    assert values["node.keep_loaded"] is False  # a default
    paths().config_file.write_text("[node\n")
    broken = _cantor("config", "show")
    assert broken.returncode == 2 and "line 1" in broken.stderr and not broken.stdout


def test_reading_settings_leaves_tomlkit_for_a_save(cantor_home):
    """The app reads node.toml at start-up with the standard library's parser; tomlkit, which
    keeps comments for a save, is imported only by a save (~1 MiB of the idle window), and
    the export module only by an [export] setting."""
    import subprocess
    import sys

    path = paths().config_file
    path.write_text(
        '# mine\n[node]\nport = 7900\nkeep_loaded = true\n[songs]\nformat = "flac"\n', "utf-8"
    )
    code = (
        "import sys; from cantor_desktop import config; c = config.load(); "
        "print(c.get('node.port'), c.get('node.keep_loaded'), c.get('songs.format'), "
        "'tomlkit' in sys.modules, 'cantor_desktop.export' in sys.modules); "
        "config.update({'node.port': 7901}); print('tomlkit' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\n")
    assert out[:2] == ["7900 True flac False False", "True"]
    assert path.read_text("utf-8").startswith("# mine\n[node]\nport = 7901\n")


def test_export_formats_come_from_the_export_module_when_asked(cantor_home):
    from cantor_desktop import export

    opt = config.option("export.format")
    assert opt.choice_list() == tuple(export.FORMATS)
    with pytest.raises(config.ConfigError, match='allowed: "wav24", "wav32"'):
        config.update({"export.format": "ogg"})
    assert config.update({"export.format": "flac"}).get("export.format") == "flac"


def test_what_tomlkit_read_before_is_still_read(cantor_home):
    """tomllib reads TOML 1.0; tomlkit, which read node.toml before, also takes TOML 1.1 (a
    trailing comma or a line break in an inline table). Such a file still loads, and saves."""
    path = paths().config_file
    path.write_text('[node]\nport = 7900\n[engines]\nacestep = { path = "/opt/ace",\n }\n', "utf-8")
    cfg = config.load()
    assert cfg.get("node.port") == 7900
    assert config.update({"node.port": 7901}).get("node.port") == 7901
    assert config.load().get("node.port") == 7901


def test_a_file_with_a_byte_order_mark_gets_the_position_of_its_error(cantor_home):
    path = paths().config_file
    path.write_bytes("\ufeff[node]\nport = 7900\nhost = \n".encode("utf-8"))
    with pytest.raises(config.ConfigError) as err:
        config.load()
    assert (err.value.line, err.value.col) == (3, 8) and "line 3, column 8" in str(err.value)
