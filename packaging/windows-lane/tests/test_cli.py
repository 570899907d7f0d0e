"""The CLI and the node on Windows, for real: platformdirs' Windows folders, the Windows
keyring backend, and a song made by ``cantor sing`` through a private node and the Sketch
engine, with nothing left running."""

from __future__ import annotations

import io
import json
import re

import lane
import soundfile as sf

PY = lane.PY


def free_port() -> int:
    from cantor_desktop.system.net import free_port as free

    return free()


def test_the_prefix_holds_exactly_the_locked_windows_packages():
    installed = lane.check_locked(lane.locked_requirements())
    assert installed["pywin32-ctypes"]  # keyring's Windows backend, by its win32 marker
    assert "secretstorage" not in installed and "jeepney" not in installed  # Linux only
    assert "cantor-desktop" in lane.installed_distributions()


def test_nothing_of_wine_lives_in_the_real_home():
    """The prefix's user folders are real folders inside it (Wine links them to $HOME
    otherwise), and Wine's HOME is the lane's own."""
    user_dirs = [
        p
        for p in (lane.DRIVE_C / "users").glob("*/*")
        if p.name in ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos")
    ]
    assert user_dirs and all(p.is_dir() and not p.is_symlink() for p in user_dirs)
    assert lane.base_env()["HOME"] == str(lane.WINE_HOME)


def test_every_bridge_names_the_gap_of_wine_it_covers():
    dll_dir = lane.wine_dll_dir()
    for bridge in lane.installed_bridges():
        assert bridge.gap_present(dll_dir), f"{bridge.name}: Wine has it now; drop the bridge"
        source = (lane.HERE / "bridges" / bridge.source).read_text()
        assert "Gap:" in source and "Drop it when" in source


def test_platformdirs_puts_settings_and_songs_in_the_windows_user_folders(session, mark):
    """No CANTOR_HOME: node.toml under %LOCALAPPDATA%\\Cantor, songs in Music\\Cantor."""
    r = session.run(
        [
            PY,
            "-c",
            (
                "from cantor_desktop.system.paths import paths; p = paths(); "
                "import json; print(json.dumps({'config': str(p.config_file), "
                "'songs': str(p.default_songs_dir), 'models': str(p.models_dir)}))"
            ),
        ],
        mark,
    )
    assert r.returncode == 0, r.stderr
    where = json.loads(r.stdout.strip().splitlines()[-1])
    assert re.fullmatch(
        r"C:\\users\\[^\\]+\\AppData\\Local\\Cantor\\node\.toml", where["config"], re.IGNORECASE
    ), where
    assert re.fullmatch(r"C:\\users\\[^\\]+\\Music\\Cantor", where["songs"], re.IGNORECASE), where
    assert where["models"].lower().startswith(where["config"].lower()[: -len("node.toml")])
    r = session.run([PY, "-m", "cantor_desktop", "config", "path"], mark)
    assert r.returncode == 0 and r.stdout.strip() == where["config"], r.stdout + r.stderr


def test_the_node_token_is_kept_by_the_windows_keyring(session, mark, win_home):
    _home, win = win_home
    probe = (
        "import keyring; from cantor_desktop.auth.access import read_token, token_file; "
        "print(type(keyring.get_keyring()).__name__, read_token(), token_file().exists())"
    )
    r = session.run([PY, "-m", "cantor_desktop", "node", "token"], mark, CANTOR_HOME=win)
    assert r.returncode == 0, r.stdout + r.stderr
    token = r.stdout.strip().splitlines()[-1]
    r = session.run([PY, "-c", probe], mark, CANTOR_HOME=win)
    backend, read, file_exists = r.stdout.split()
    assert backend == "WinVaultKeyring", r.stdout + r.stderr
    assert read == token and len(token) >= 32
    assert file_exists == "False"  # in the Windows Credential Manager, not a file


def test_cantor_sing_makes_a_song_through_a_private_node(session, mark, win_home):
    home, win = win_home
    out = home / "out"
    (home / "node.toml").write_text(f"[node]\nport = {free_port()}\n")
    r = session.run(
        [
            PY,
            "-m",
            "cantor_desktop",
            "sing",
            "warm lofi piano, vinyl crackle",
            "--instrumental",
            "--model",
            "sketch",
            "--duration",
            "12",
            "--format",
            "wav24",
            "-o",
            lane.win_path(out),
        ],
        mark,
        timeout=300,
        CANTOR_HOME=win,
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    songs = list(out.glob("*.wav"))
    assert len(songs) == 1, (r.stdout, r.stderr, list(out.iterdir()))
    info = sf.info(io.BytesIO(songs[0].read_bytes()))
    assert info.samplerate == 48000 and info.subtype == "PCM_24"
    assert abs(info.duration - 12) < 0.5
    # the private node and its engine are gone (the fixture fails the test otherwise)
