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
from support.ui import close_shell, offline_shell

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


def misnamed_rows(root: QWidget) -> list[str]:
    """Rows of a form whose field a screen reader calls other than the row's label says
    (a label beside a row of several widgets names none of them by itself)."""
    from PySide6.QtWidgets import QFormLayout, QLabel, QLayout

    wrong = []
    for form in root.findChildren(QFormLayout):
        for row in range(form.rowCount()):
            label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            if label is None or field is None or not isinstance(label.widget(), QLabel):
                continue
            said = label.widget().text().replace("&", "")
            widget = field.widget()
            if widget is None and isinstance(field.layout(), QLayout):
                items = (field.layout().itemAt(i) for i in range(field.layout().count()))
                widget = next((i.widget() for i in items if isinstance(i.widget(), CONTROLS)), None)
            if not isinstance(widget, CONTROLS) or isinstance(widget, QAbstractButton):
                continue  # a button says what it does; a panel of its own is checked above
            face = QAccessible.queryAccessibleInterface(widget)
            name = face.text(QAccessible.Text.Name) if face is not None else ""
            if isinstance(widget, QComboBox) and name == widget.currentText():
                name = said if label.widget().buddy() is widget else name  # read with its label
            if name != said:
                wrong.append(f"{said!r} row: its {type(widget).__name__} is called {name!r}")
    return wrong


@pytest.fixture
def shell(qapp, qloop, cantor_home):
    s = offline_shell(qapp)
    yield s
    close_shell(s)


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
        assert misnamed_rows(window.pages.currentWidget()) == [], page
        checked += sum(
            isinstance(w, CONTROLS) and w.isVisibleTo(window) for w in window.findChildren(QWidget)
        )
    assert checked > 60  # the pages' controls were found


def test_every_control_of_the_dialogs_has_a_name(shell, qtbot):
    from cantor_desktop.ui.export_dialog import ExportDialog
    from cantor_desktop.ui.extend_dialog import ExtendDialog
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
        ExtendDialog("Add 20 s after the song"),
    ]
    for dialog in dialogs:
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        assert unnamed(dialog) == [], type(dialog).__name__
