"""What a screen reader is told: every control a user can reach on every page and in every
dialog has a name, read through Qt's accessibility interface (what AT-SPI, UI Automation
and VoiceOver are given), not through the widget's own properties."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)
from support.procs import free_port

from cantor_desktop.song.record import Song

PAGES = ("Compose", "Songs", "Library", "Hardware & Backends", "Settings")
CONTROLS = (
    QAbstractButton,
    QLineEdit,
    QTextEdit,
    QPlainTextEdit,
    QComboBox,
    QAbstractSpinBox,
    QAbstractSlider,
    QAbstractItemView,
)


def _part_of_a_compound(widget: QWidget) -> bool:
    """A combo box's popup list or a spin box's or combo's own line edit: the compound
    control carries the name."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, (QComboBox, QAbstractSpinBox)):
            return True
        parent = parent.parentWidget()
    return False


def unnamed(root: QWidget) -> list[str]:
    """The controls shown in ``root`` that take focus and whose accessible name has no
    word in it (empty, or a bare symbol such as "×")."""
    found = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, CONTROLS) or not widget.isVisibleTo(root):
            continue
        if widget.focusPolicy() == Qt.FocusPolicy.NoFocus or _part_of_a_compound(widget):
            continue
        face = QAccessible.queryAccessibleInterface(widget)
        name = face.text(QAccessible.Text.Name) if face is not None else ""
        if not any(c.isalpha() for c in name):
            shown = widget.text() if isinstance(widget, QAbstractButton) else ""
            found.append(f"{type(widget).__name__} {shown!r} in {type(widget.parent()).__name__}")
    return found


@pytest.fixture
def shell(qapp, qloop, cantor_home):
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.node_link import NodeLink

    s = Shell(qapp, NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
    s.window.resize(1200, 760)
    s.window.show()
    yield s
    s.window.shutdown()
    s.window.close()


def _song() -> Song:
    return Song.from_json(
        {
            "id": "00000000000000a1",
            "state": "done",
            "created": 1_700_000_000,
            "request": {"caption": "night drive", "model": "sketch", "seed": -1},
            "takes": [{"n": 1, "audio": "/nowhere/a.wav", "seed": 5, "duration": 12.5}],
        }
    )


def test_every_control_on_every_page_has_a_name(shell, qtbot):
    window = shell.window
    window.songs.model.set_songs([_song()])
    checked = 0
    for page in PAGES:
        window.show_page(page)
        qtbot.waitUntil(lambda p=page: window.sidebar.currentItem().text() == p)
        assert unnamed(window) == [], page
        checked += sum(
            isinstance(w, CONTROLS) and w.isVisibleTo(window) for w in window.findChildren(QWidget)
        )
    assert checked > 60  # the pages' controls were found


def test_every_control_of_the_dialogs_has_a_name(shell, qtbot):
    from cantor_desktop.ui.export_dialog import ExportDialog
    from cantor_desktop.ui.found_models_dialog import FoundModelsDialog
    from cantor_desktop.ui.part_dialog import PartDialog
    from cantor_desktop.ui.stems_dialog import StemsDialog

    song = _song()
    take = song.takes[0]
    link = shell.window.link
    dialogs = [
        StemsDialog(link, song, take),
        PartDialog(link, song, take, "lego"),
        PartDialog(link, song, take, "complete"),
        ExportDialog([(song, take)], shell.window.songs.files),
        FoundModelsDialog(link.models, lambda *_: None),
    ]
    for dialog in dialogs:
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        assert unnamed(dialog) == [], type(dialog).__name__
