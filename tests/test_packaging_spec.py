"""Packaging sanity: the Qt filter, the library pruning on real Qt binaries, the frozen entry's
mode switch, the .desktop entry, the icons, the Windows version resource and the PATH wrapper."""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))

from bundle_filter import keep_qt_entry, prune_unneeded  # noqa: E402

ICONS = ROOT / "resources" / "icons"


@pytest.mark.parametrize(
    "dest, by_name, kept",
    [
        ("PySide6/Qt/translations/qtbase_de.qm", True, False),
        ("PySide6/Qt/qml/QtQuick/Controls/libqtquickcontrols2plugin.so", True, False),
        ("PySide6/Qt/lib/libQt6WebEngineCore.so.6", True, False),
        ("PySide6/Qt/lib/libQt6Quick3D.so.6", True, False),
        ("PySide6/Qt/lib/libQt6Pdf.so.6", True, False),
        ("PySide6/Qt/lib/libQt6Core.so.6", True, True),
        ("PySide6/Qt/lib/libQt6Multimedia.so.6", True, True),
        # playback is soundfile + QAudioSink: no FFmpeg plugin, so no QtQml/QtQuick, no FFmpeg
        ("PySide6/Qt/lib/libQt6Quick.so.6", True, False),
        ("PySide6/Qt/lib/libQt6Qml.so.6", True, False),
        ("PySide6/Qt/lib/libavcodec.so.63", True, False),
        ("PySide6/Qt/lib/libswresample.so.7", False, False),
        ("PySide6/avformat-61.dll", True, False),
        # on Linux the link walk decides about Qt's libraries, not the names
        ("PySide6/Qt/lib/libQt6Pdf.so.6", False, True),
        ("PySide6/Qt/plugins/platforms/libqxcb.so", True, True),
        ("PySide6/Qt/plugins/platforms/libqoffscreen.so", True, True),
        ("PySide6/Qt/plugins/platforms/libqeglfs.so", True, False),
        ("PySide6/Qt/plugins/platforms/libqvnc.so", True, False),
        ("PySide6/Qt/plugins/multimedia/libffmpegmediaplugin.so", True, False),
        ("PySide6/Qt/plugins/imageformats/libqsvg.so", True, True),
        ("PySide6/Qt/plugins/imageformats/libqpdf.so", True, False),
        ("PySide6/Qt/plugins/imageformats/libqtiff.so", True, False),
        ("PySide6/Qt/plugins/sqldrivers/libqsqlite.so", True, False),
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", True, False),
        ("PySide6/plugins/platforms/qwindows.dll", True, True),
        ("PySide6/translations/qtbase_fr.qm", True, False),
        ("PySide6/resources/qtwebengine_resources.pak", True, False),
        ("PySide6/plugins/multimedia/ffmpegmediaplugin.dll", True, False),
        ("PySide6/plugins/multimedia/windowsmediaplugin.dll", True, False),
        ("PySide6/Qt6Quick.dll", True, False),
        ("PySide6/Qt6Multimedia.dll", True, True),
        ("PySide6/plugins/imageformats/qjpeg.dll", True, True),
        ("PySide6/Qt6WebEngineCore.dll", True, False),
        ("PySide6/Qt6Widgets.dll", True, True),
        ("PySide6/Qt/lib/QtWebEngineCore.framework/Versions/A/QtWebEngineCore", True, False),
        ("PySide6/QtWidgets.abi3.so", False, True),
        ("PySide6/QtQuick3D.abi3.so", False, False),
        ("numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", True, True),
        ("libssl.so.3", True, True),
    ],
)
def test_qt_filter(dest, by_name, kept):
    assert keep_qt_entry(dest, by_name=by_name) is kept


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not shutil.which("readelf"),
    reason="ELF link walk: Linux with readelf",
)
def test_prune_keeps_what_real_qt_binaries_link_and_drops_the_rest():
    import PySide6

    qt = Path(PySide6.__file__).parent / "Qt"
    entries = [
        (
            "PySide6/Qt/plugins/platforms/libqoffscreen.so",
            str(qt / "plugins/platforms/libqoffscreen.so"),
            "BINARY",
        ),
        (
            "PySide6/QtWidgets.abi3.so",
            str(Path(PySide6.__file__).parent / "QtWidgets.abi3.so"),
            "EXTENSION",
        ),
    ]
    for name in (
        "libQt6Core.so.6",
        "libQt6Gui.so.6",
        "libQt6Widgets.so.6",
        "libQt6Pdf.so.6",
        "libQt6Quick3D.so.6",
    ):
        entries.append((f"PySide6/Qt/lib/{name}", str(qt / "lib" / name), "BINARY"))
    kept, dropped = prune_unneeded(entries)
    kept_names = {Path(d).name for d, *_ in kept}
    assert {
        "libQt6Core.so.6",
        "libQt6Gui.so.6",
        "libQt6Widgets.so.6",
        "libqoffscreen.so",
        "QtWidgets.abi3.so",
    } <= kept_names
    assert sorted(Path(d).name for d in dropped) == ["libQt6Pdf.so.6", "libQt6Quick3D.so.6"]


def _frozen_main(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop.bundle.frozen_main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_mode_switch_reaches_the_cli_and_its_commands():
    from cantor_desktop import __version__

    r = _frozen_main("--mode", "cli", "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"cantor {__version__}"
    r = _frozen_main("--mode", "cli", "config", "path")
    assert r.returncode == 0 and r.stdout.strip().endswith("node.toml")
    for mode in ("node", "sketch-server"):
        r = _frozen_main("--mode", mode, "--help")
        assert r.returncode == 0, r.stderr
        assert "--port" in r.stdout + r.stderr
    r = _frozen_main("--mode", "bogus")
    assert r.returncode == 2 and "unknown mode 'bogus'" in r.stderr
    r = _frozen_main("--mode")
    assert r.returncode == 2


FROZEN_LAUNCHER = """#!{python}
import runpy, sys
sys.frozen = True  # as PyInstaller's bootloader sets it, and runs its runtime hook
runpy.run_path({hook!r})
from cantor_desktop.bundle.frozen_main import main
sys.exit(main())
"""

SPAWNING_PARENT = """
import multiprocessing, os, sys
if __name__ == "__main__":
    sys.frozen = True  # the parent is a frozen Cantor too: its children get its command lines
    ctx = multiprocessing.get_context("spawn")
    ctx.set_executable(sys.argv[1])
    worker = ctx.Process(target=os.makedirs, args=(sys.argv[2],))
    worker.start()
    worker.join(30)
    if worker.exitcode is None:
        worker.kill()
    print(worker.exitcode, os.path.isdir(sys.argv[2]))
"""


def test_a_frozen_cantor_started_as_a_multiprocessing_child_runs_as_that(tmp_path):
    """frozen_main calls multiprocessing.freeze_support() first, which PyInstaller's own
    runtime hook (kept in the spec) turns into multiprocessing's worker or helper: a frozen
    Cantor started by multiprocessing never starts as the app."""
    hook = Path(pytest.importorskip("PyInstaller").__file__).parent / "hooks" / "rthooks"
    hook = hook / "pyi_rth_multiprocessing.py"
    assert "pyi_rth_multiprocessing" not in (ROOT / "packaging" / "cantor.spec").read_text()
    launcher = tmp_path / "cantor-desktop"
    launcher.write_text(FROZEN_LAUNCHER.format(python=sys.executable, hook=str(hook)))
    launcher.chmod(0o755)
    parent = tmp_path / "parent.py"
    parent.write_text(SPAWNING_PARENT)
    made = tmp_path / "made by the worker"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", CANTOR_HOME=str(tmp_path))
    from cantor_desktop.bundle.selftest import end_leftovers

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        # a child that started as the app instead would outlive a timeout: the run's home
        # names every process of it, and whatever is left is ended
        try:
            return subprocess.run(
                argv, input="", env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
            )
        finally:
            end_leftovers(tmp_path, grace=1)

    # a worker (--multiprocessing-fork); on POSIX, starting it starts the resource tracker
    # (-c "from multiprocessing.resource_tracker import main; main(fd)") from the same file
    r = run([sys.executable, str(parent), str(launcher), str(made)])
    assert r.stdout.split() == ["0", "True"], r.stderr
    # the tracker itself, as multiprocessing starts it: it reads its pipe to the end, exits 0
    tracker = run(
        [str(launcher), "-c", "from multiprocessing.resource_tracker import main;main(0)"]
    )
    assert tracker.returncode == 0 and tracker.stdout == "", tracker.stderr


def test_selfexec_children_of_a_frozen_build_are_the_build_itself(monkeypatch):
    from cantor_desktop.system import selfexec

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    for mode in selfexec.MODES:
        assert selfexec.self_argv(mode) == [sys.executable, "--mode", mode]


@pytest.fixture(scope="module")
def spec_lists() -> dict:
    """What cantor.spec hands PyInstaller besides the module graph: the spec's own code up
    to ``Analysis(…)``, run with PyInstaller's real hooks (collect_submodules, …)."""
    pytest.importorskip("PyInstaller.utils.hooks")
    text = (ROOT / "packaging" / "cantor.spec").read_text()
    preamble = text[: text.index("a = Analysis(")]
    env = {"SPECPATH": str(ROOT / "packaging"), "__file__": str(ROOT / "packaging" / "cantor.spec")}
    exec(compile(preamble, "cantor.spec", "exec"), env)  # noqa: S102 - our own spec
    return {
        "hidden": set(env["hiddenimports"]),
        "excludes": set(env["excludes"]),
        "datas": env["datas"],
    }


@pytest.mark.xdist_group("test_packaging_spec")  # shares the module's spec_lists
def test_every_hidden_import_of_the_spec_exists(spec_lists):
    # PyInstaller only warns about a hidden import it cannot find; the bundle then lacks it
    missing = sorted(m for m in spec_lists["hidden"] if importlib.util.find_spec(m) is None)
    assert not missing


@pytest.mark.xdist_group("test_packaging_spec")  # shares the module's spec_lists
def test_what_is_loaded_by_name_at_run_time_is_in_the_bundle(spec_lists):
    """The modules the module graph cannot see: the CLI's commands (imported by name), the
    uvicorn implementations the node's server picks from strings, keyring's backends (entry
    points; keyrings.alt is the tests' and excluded)."""
    from importlib.metadata import entry_points

    from cantor_desktop.cli.main import COMMAND_MODULES

    hidden = spec_lists["hidden"]
    commands = {f"cantor_desktop.cli.{name}" for name in COMMAND_MODULES}
    on_disk = {
        f"cantor_desktop.cli.{p.stem}" for p in (ROOT / "cantor_desktop" / "cli").glob("*_cmd.py")
    }
    assert on_disk == commands  # every command file is a command
    assert commands <= hidden
    # the node's server as node/server.py configures it, loaded: uvicorn imports the loop,
    # protocol and lifespan it picks from their names
    code = (
        "import sys, uvicorn\n"
        "from cantor_desktop.node.connections import Connections\n"
        "async def app(scope, receive, send): pass\n"
        "uvicorn.Config(app, host='127.0.0.1', port=0, log_config=None, access_log=False,\n"
        "               lifespan='on', http=Connections().protocol()).load()\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('uvicorn.')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    ).stdout.split()
    assert "uvicorn.lifespan.on" in loaded and any(".http." in m for m in loaded)
    assert set(loaded) <= hidden, sorted(set(loaded) - hidden)
    backends = {
        ep.module
        for ep in entry_points(group="keyring.backends")
        if not ep.module.startswith("keyrings.alt")
    }
    assert backends and backends <= hidden, sorted(backends - hidden)


@pytest.mark.xdist_group("test_packaging_spec")  # shares the module's spec_lists
def test_the_app_imports_without_what_the_spec_excludes(spec_lists):
    """Every Cantor module (the app's pages and the node included) imported in a fresh
    interpreter where the excluded modules cannot be found, as in the frozen build: an
    import that needs one fails here. (A library's optional import of one, caught by the
    library — httpx's command line and rich — is fine, and is what the bundle does.)"""
    code = (
        "import importlib, importlib.abc, pkgutil, sys\n"
        "EXCLUDED = set(sys.argv[1:])\n"
        "class Bundle(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in EXCLUDED or name.split('.')[0] in EXCLUDED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Bundle())\n"
        "import cantor_desktop\n"
        "for m in pkgutil.walk_packages(cantor_desktop.__path__, 'cantor_desktop.'):\n"
        "    if not m.name.endswith('.__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "print('\\n'.join(k for k, v in sys.modules.items() if v is not None))\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", code, *sorted(spec_lists["excludes"])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert "cantor_desktop.ui.main" in loaded and "cantor_desktop.node.server" in loaded
    assert not {x for x in spec_lists["excludes"] if x in loaded}


@pytest.mark.xdist_group("test_packaging_spec")  # shares the module's spec_lists
def test_the_data_cantor_reads_is_in_the_bundle(spec_lists):
    data = ROOT / "cantor_desktop" / "data"
    wanted = {
        p.relative_to(ROOT).parent.as_posix() + "/" + p.name
        for p in data.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    bundled = {Path(dest).as_posix() + "/" + Path(src).name for src, dest in spec_lists["datas"]}
    assert wanted and wanted <= bundled, sorted(wanted - bundled)


def test_desktop_entry():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(ROOT / "installer" / "linux" / "cantor.desktop")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Exec"] == "cantor-desktop"
    assert entry["Icon"] == "cantor"
    assert entry["Terminal"] == "false"
    assert entry["Categories"].endswith(";") and "Audio" in entry["Categories"].split(";")
    if shutil.which("desktop-file-validate"):
        subprocess.run(
            ["desktop-file-validate", str(ROOT / "installer" / "linux" / "cantor.desktop")],
            check=True,
        )


def test_icons_are_what_their_names_say():
    for png in ICONS.glob("cantor-*.png"):
        size = int(png.stem.split("-")[1])
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (size, size)
    ico = (ICONS / "cantor.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count >= 5
    icns = (ICONS / "cantor.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)


def test_windows_version_resource_parses():
    import ast

    text = (
        (ROOT / "packaging" / "windows_version_info.txt")
        .read_text()
        .replace("@VERSION_TUPLE@", "(0, 1, 0, 0)")
        .replace("@VERSION@", "0.1.0")
    )
    tree = ast.parse(text, mode="eval")
    assert tree.body.func.id == "VSVersionInfo" and "@" not in text
    # PyInstaller's own reader imports win32api: the Windows lane reads the version back
    # from the built executable (packaging/windows-lane/tests/test_bundle.py)


def test_path_wrapper_finds_the_bundle_relative_to_itself(tmp_path):
    """The /usr/bin wrapper of the .deb, unpacked anywhere, runs opt/cantor/cantor-desktop."""
    root = tmp_path / "root"
    (root / "opt" / "cantor").mkdir(parents=True)
    (root / "usr" / "bin").mkdir(parents=True)
    fake = root / "opt" / "cantor" / "cantor-desktop"
    fake.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    fake.chmod(0o755)
    template = (ROOT / "installer" / "linux" / "cantor-wrapper.sh").read_text()
    for name, mode in (("cantor", "--mode cli"), ("cantor-desktop", "")):
        wrapper = root / "usr" / "bin" / name
        wrapper.write_text(
            template.replace("@BUNDLE_REL@", "../../opt/cantor").replace("@MODE_ARGS@", mode)
        )
        wrapper.chmod(0o755)
    link = tmp_path / "cantor-link"
    os.symlink(root / "usr" / "bin" / "cantor", link)  # a symlink to the wrapper still works
    assert (
        subprocess.run([str(link), "sing", "a b"], capture_output=True, text=True).stdout
        == "--mode|cli|sing|a b|"
    )
    assert (
        subprocess.run(
            [str(root / "usr/bin/cantor-desktop"), "--self-test"], capture_output=True, text=True
        ).stdout
        == "--self-test|"
    )


def test_tarball_install_script_installs_and_uninstalls_per_user(tmp_path):
    """install.sh from an unpacked tarball layout (the bundle here is a tiny stand-in
    script; ci.sh runs the real bundle), then --uninstall, which leaves user data alone."""
    src = tmp_path / "cantor-0.1.0"
    (src / "cantor").mkdir(parents=True)
    (src / "share" / "icons").mkdir(parents=True)
    exe = src / "cantor" / "cantor-desktop"
    exe.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    exe.chmod(0o755)
    linux = ROOT / "installer" / "linux"
    shutil.copy(linux / "install.sh", src / "install.sh")
    for f in ("cantor.desktop", "cantor-wrapper.sh"):
        shutil.copy(linux / f, src / "share" / f)
    for f in [ICONS / "cantor.svg", *ICONS.glob("cantor-*.png")]:
        shutil.copy(f, src / "share" / "icons" / f.name)
    prefix = tmp_path / "home" / ".local"
    songs = prefix / "share" / "Cantor" / "songs"
    songs.mkdir(parents=True)
    (songs / "mine.wav").write_bytes(b"RIFF")
    env = dict(os.environ, PREFIX=str(prefix))
    subprocess.run(["sh", str(src / "install.sh")], env=env, check=True, capture_output=True)
    assert (prefix / "opt" / "cantor" / "cantor-desktop").is_file()
    assert (prefix / "share" / "icons" / "hicolor" / "48x48" / "apps" / "cantor.png").is_file()
    desktop = (prefix / "share" / "applications" / "cantor.desktop").read_text()
    assert f'Exec="{prefix}/opt/cantor/cantor-desktop"' in desktop
    out = subprocess.run(
        [str(prefix / "bin" / "cantor"), "--version"], capture_output=True, text=True
    ).stdout
    assert out == "--mode|cli|--version|"
    subprocess.run(
        ["sh", str(src / "install.sh"), "--uninstall"], env=env, check=True, capture_output=True
    )
    assert not (prefix / "opt" / "cantor").exists()
    assert not (prefix / "bin" / "cantor").exists()
    assert not (prefix / "share" / "applications" / "cantor.desktop").exists()
    assert (songs / "mine.wav").read_bytes() == b"RIFF"
