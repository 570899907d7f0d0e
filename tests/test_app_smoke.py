"""The main window opens offscreen, and a malformed node.toml is reported, not replaced."""

from cantor_desktop.paths import paths
from cantor_desktop.ui.window import MainWindow


def test_main_window_opens(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.windowTitle() == "Cantor"


def test_malformed_settings_are_shown_and_kept(qtbot):
    path = paths().config_file
    path.write_text("[node\n")
    window = MainWindow()
    qtbot.addWidget(window)
    assert "line 1" in window.statusBar().currentMessage()
    assert path.read_text() == "[node\n"


def test_qt_calls_do_not_drop_references_to_none_or_true(qtbot):
    """PySide6 6.12.0 on Python 3.11 returned None (and signal bools) without a reference:
    each void call dropped one and the process aborted once None's count reached zero."""
    import sys

    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel

    class Flag(QObject):
        changed = Signal(bool)
    label, flag = QLabel(), Flag()
    flag.changed.connect(lambda on: None)
    none, true = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(1000):
        label.setText("a")
        flag.changed.emit(True)
    assert sys.getrefcount(None) - none > -50 and sys.getrefcount(True) - true > -50
