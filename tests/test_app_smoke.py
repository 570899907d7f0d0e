"""The main window opens offscreen, and a malformed node.toml is reported, not replaced."""

from cantor_desktop.system.paths import paths
from cantor_desktop.ui.window import MainWindow


def test_main_window_opens_paints_and_every_page_is_reached(qtbot):
    """Offscreen: the window paints (its first-paint signal fires and the picture is not
    blank), the sidebar lists the five pages and each row shows its own page, built on
    first use, and the status bar says the node's state."""
    from PySide6.QtWidgets import QWidget

    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.window import PAGES

    window = MainWindow(NodeLink(start_child=False))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.first_painted, timeout=30_000):
        window.show()
    assert window.windowTitle() == "Cantor"
    image = window.grab().toImage()
    colours = {
        image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)
    }
    assert len(colours) > 10  # text, a sidebar, widgets: not one fill
    assert [window.sidebar.item(i).text() for i in range(window.sidebar.count())] == list(PAGES)
    shown = []
    for row, name in enumerate(PAGES):
        window.sidebar.setCurrentRow(row)
        page = window.pages.currentWidget()
        assert page is window.page(name) and type(page) is not QWidget  # the real page
        assert page.isVisible()
        shown.append(type(page).__name__)
    assert shown == ["ComposePage", "SongsPage", "LibraryPage", "HardwarePage", "SettingsPage"]
    assert window.state_label.text() == window.link.status_line() == "Node stopped"


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
