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
