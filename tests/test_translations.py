"""The app's languages: the compiled translations are what Qt's tools make of the sources,
every string the code marks is translated, and the window speaks German and Japanese when
asked (its own strings and Qt's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cantor_desktop.ui import translation

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("i18n/cantor_*.ts"))
BIN = Path(sys.executable).parent


def _messages(ts: Path) -> dict[tuple[str, str], ET.Element]:
    found = {}
    for context in ET.parse(ts).getroot().iter("context"):
        name = context.findtext("name") or ""
        for message in context.iter("message"):
            found[(name, message.findtext("source") or "")] = message
    return found


def test_every_shipped_language_has_its_sources_and_its_compiled_file():
    assert [ts.stem for ts in SOURCES] == [f"cantor_{code}" for code in translation.SHIPPED[1:]]
    for ts in SOURCES:
        assert (translation.FOLDER / f"{ts.stem}.qm").is_file(), ts.stem


@pytest.mark.parametrize("ts", SOURCES, ids=lambda p: p.stem)
def test_the_compiled_file_is_what_lrelease_makes_of_the_sources(ts, tmp_path):
    made = tmp_path / f"{ts.stem}.qm"
    subprocess.run(
        [str(BIN / "pyside6-lrelease"), "-silent", str(ts), "-qm", str(made)], check=True
    )
    assert made.read_bytes() == (translation.FOLDER / made.name).read_bytes(), (
        "run scripts/translations.sh"
    )


@pytest.mark.parametrize("ts", SOURCES, ids=lambda p: p.stem)
def test_every_string_the_code_marks_is_translated(ts, tmp_path):
    """lupdate over the package finds no string the sources lack, and none is unfinished."""
    copy = tmp_path / ts.name
    shutil.copy(ts, copy)
    code = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "cantor_desktop/*.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    subprocess.run(
        [str(BIN / "pyside6-lupdate"), "-no-obsolete", "-locations", "none"]
        + [str(ROOT / c) for c in code]
        + ["-ts", str(copy)],
        check=True,
        capture_output=True,
    )
    updated, committed = _messages(copy), _messages(ts)
    assert set(updated) == set(committed), "run scripts/translations.sh and translate"
    unfinished = [
        key
        for key, message in updated.items()
        if (message.find("translation").get("type") or "") == "unfinished"  # type: ignore[union-attr]
    ]
    assert unfinished == []
    # every string belongs to the class whose tr() asks for it (lupdate loses the class
    # after some constructs: docs/upstream.md)
    assert [source for context, source in updated if not context] == []


def test_the_language_is_the_setting_then_the_environment_then_the_system(monkeypatch):
    monkeypatch.setenv("CANTOR_LANGUAGE", "ja")
    assert translation.chosen("de", ["en-US"]) == "de"
    assert translation.chosen("", ["en-US"]) == "ja"
    monkeypatch.delenv("CANTOR_LANGUAGE")
    assert translation.chosen("", ["fr-FR", "de-AT", "en"]) == "de"
    assert translation.chosen("", ["ja_JP"]) == "ja"
    assert translation.chosen("", ["fr-FR"]) == "en"


@pytest.fixture
def window(qapp, qloop, cantor_home):
    from support.ui import close_shell, offline_shell

    def make(language: str):
        translation.install(qapp, language)
        shell = offline_shell(qapp)
        made.append(shell)
        return shell.window

    made: list = []
    yield make
    translation.install(qapp, "en")
    for shell in made:
        close_shell(shell)


@pytest.mark.parametrize(
    "language, pages, generate, cancel",
    [
        (
            "de",
            ["Komponieren", "Songs", "Bibliothek", "Hardware & Backends", "Einstellungen"],
            "Erzeugen",
            "Abbrechen",
        ),
        (
            "ja",
            ["作曲", "曲", "ライブラリ", "ハードウェアとバックエンド", "設定"],
            "生成",
            "キャンセル",
        ),
    ],
)
def test_the_window_speaks_the_language_asked_for(window, language, pages, generate, cancel):
    from PySide6.QtWidgets import QDialogButtonBox

    w = window(language)
    assert [w.sidebar.item(i).text() for i in range(w.sidebar.count())] == pages
    assert w.compose.generate.text() == generate
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)  # Qt's own strings too
    assert box.button(QDialogButtonBox.StandardButton.Cancel).text().replace("&", "") == cancel
    # each menu's Alt letters stay one per item in the language
    for menu in w.menu_bar.menus.values():
        letters = [
            a.text().split("&")[1][0].lower()
            for a in menu.actions()
            if "&" in a.text().replace("&&", "")
        ]
        assert len(letters) == len(set(letters)), [a.text() for a in menu.actions()]
