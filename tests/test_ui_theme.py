"""Cantor's look: light and dark follow the system (live), every colour comes from the one
palette module, and every page's text reads at 4.5:1 or more in both schemes, measured on
the rendered window (tests/support/contrast.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from support.contrast import MINIMUM, check_window, ground_of
from support.procs import free_port
from support.ui import close_shell, offline_shell

from cantor_desktop.song.record import Song
from cantor_desktop.ui import theme

UI = Path(__file__).resolve().parents[1] / "cantor_desktop" / "ui"
PAGES = ("Compose", "Songs", "Library", "Hardware & Backends", "Settings")

COLOUR_LITERAL = re.compile(
    r"""(["'][^"'\n]*#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?(?:[0-9a-fA-F]{2})?\b[^"'\n]*["'])"""
    r"""|QColor\(\s*["'\d]"""
    r"""|Qt\.(?:GlobalColor\.)?(?:white|black|red|green|blue|gray|grey|darkGray|lightGray|yellow)\b"""
    r"""|\bcolor\s*:"""
)


def test_no_page_or_widget_names_a_colour_of_its_own():
    """Every colour is theme.py's: a hex colour, a QColor made from a literal, a named Qt
    colour or a style sheet's ``color:`` anywhere else in the UI is a defect."""
    found = []
    for path in sorted(UI.rglob("*.py")):
        if path.name == "theme.py":
            continue
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            code = line.split("  #", 1)[0] if not line.lstrip().startswith("#") else ""
            if COLOUR_LITERAL.search(code):
                found.append(f"{path.relative_to(UI)}:{n}: {line.strip()}")
    assert found == []


def test_every_text_colour_of_both_schemes_reads_on_every_ground_it_is_used_on():
    for c in (theme.LIGHT, theme.DARK):
        grounds = [c.window, c.surface, c.surface_alt, c.selection, c.panel, c.raised]
        for tone in ("text", "muted", "danger", "warning", "success"):
            for ground in grounds:
                ratio = theme.contrast(getattr(c, tone), ground)
                assert ratio >= MINIMUM, (c.scheme, tone, ground, ratio)
        assert theme.contrast(c.on_accent, c.accent) >= MINIMUM, c.scheme
        assert theme.contrast(c.panel_text, c.panel) >= MINIMUM, c.scheme
        assert theme.contrast(c.alarm_text, c.alarm) >= MINIMUM, c.scheme
        assert theme.contrast(c.accent_ink, c.window) >= MINIMUM, c.scheme
        assert theme.contrast(c.favourite, c.surface) >= 3.0, c.scheme  # a glyph, not text
        from cantor_desktop.ui.songs_model import SongDelegate

        saved = theme._current
        theme._current = c
        try:  # the Songs list paints its own rows: their grounds and texts
            for selected in (False, True):
                for band in (0, 1):
                    for failed in (False, True):
                        ground, title, facts = SongDelegate.row_colours(selected, band, failed)
                        assert theme.contrast(title, ground) >= MINIMUM
                        assert theme.contrast(facts, ground) >= MINIMUM
        finally:
            theme._current = saved


def test_the_contrast_check_finds_light_text_on_a_pale_panel(qtbot, qapp):
    """The check can fail: the first-run banner as it was (#eef4fc behind labels that kept
    the palette's text colour) in a dark scheme has white text on a pale ground."""
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

    theme.apply(qapp, "dark")
    try:
        window = QWidget()
        qtbot.addWidget(window)
        outer = QVBoxLayout(window)
        old_banner = QFrame()
        palette = old_banner.palette()
        palette.setColor(QPalette.Window, QColor("#eef4fc"))  # the old code's own colour
        old_banner.setPalette(palette)
        old_banner.setAutoFillBackground(True)
        QVBoxLayout(old_banner).addWidget(QLabel("ACE-Step is not set up yet."))
        outer.addWidget(old_banner)
        window.resize(400, 120)
        window.show()
        qtbot.waitExposed(window)
        low, measured = check_window(window)
        assert measured == 1
        assert len(low) == 1 and low[0].ground == "#eef4fc" and low[0].ratio < 1.5, low
        # and the same label in today's banner reads
        theme.paint_panel(old_banner, "info")
        low, _ = check_window(window)
        assert low == []
    finally:
        theme.apply(qapp, theme.wanted_scheme())


def _songs() -> list[Song]:
    def song(i: int, **extra) -> Song:
        data = {
            "id": f"{i:016x}",
            "state": "done",
            "created": 1_700_000_000 + i,
            "request": {"caption": f"warm lo-fi piano {i}, rain", "model": "sketch", "bpm": 80},
            "takes": [{"audio": f"/nowhere/{i}.wav", "seed": i, "duration": 30.0}],
        }
        data.update(extra)
        return Song.from_json(data)

    return [
        song(1),
        song(2, favourite=True),
        song(3, state="failed", error="the engine ran out of memory", takes=[]),
        song(4, state="running", stage="synth", progress=0.4, takes=[]),
    ]


@pytest.fixture
def shell(qapp, qloop, cantor_home):
    s = offline_shell(qapp)
    yield s
    theme.apply(qapp, theme.wanted_scheme())
    close_shell(s)


def _busy(window) -> None:
    """Each page with what a user sees on it: songs (one failed, one running, one
    selected), an error and a warning in the Library, a malformed node.toml in Settings."""
    songs = window.songs
    songs.model.set_songs(_songs())
    songs.view.selectionModel().select(songs.model.index(1, 0), QItemSelectionModel.ClearAndSelect)
    songs.note.fail("fetch the song from the node", "refused")
    window.library.message.fail("download acestep-v15-turbo-Q8_0", "HTTP 404.")
    window.settings_page.banner.setText("node.toml is not valid (line 1, column 6)")
    window.settings_page.banner.show()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_reads_at_4_5_to_1_in_both_schemes(shell, qapp, qtbot, scheme):
    window = shell.window
    _busy(window)
    theme.apply(qapp, scheme)
    for name in PAGES:
        window.show_page(name)
        qtbot.wait(50)
        low, measured = check_window(window)
        assert measured >= 8, name  # the page's texts were found and measured
        assert low == [], f"{scheme} {name}:\n" + "\n".join(map(str, low))
    # what the Songs list paints itself, sampled where it is painted: a row's ground is
    # the one row_colours names for it
    window.show_page("Songs")
    view = window.songs.view
    image = view.viewport().grab().toImage()
    rect = view.visualRect(window.songs.model.index(1, 0))
    assert ground_of(image, rect) == theme.colours().selection


def test_the_scheme_follows_the_system_live(shell, qapp, monkeypatch):
    """A switch in the system's settings re-colours the open window at once: the palette,
    the toned labels, the panels."""
    from PySide6.QtGui import QPalette

    monkeypatch.delenv("CANTOR_APPEARANCE", raising=False)
    window = shell.window
    hints = qapp.styleHints()
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.colours() is theme.DARK
    assert qapp.palette().color(QPalette.Window).name() == theme.DARK.window
    banner = window.banner.palette().color(QPalette.Window).name()
    assert banner == theme.DARK.panel
    dot = window.dot.palette().color(QPalette.WindowText).name()
    assert dot in {getattr(theme.DARK, t) for t in theme.NODE_STATE_TONES.values()}
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
    assert theme.colours() is theme.LIGHT
    assert window.banner.palette().color(QPalette.Window).name() == theme.LIGHT.panel
    assert window.dot.palette().color(QPalette.WindowText).name() != dot
    monkeypatch.setenv("CANTOR_APPEARANCE", "dark")  # pinned: the system's switch is not heard
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
    assert theme.colours() is theme.LIGHT  # (not re-applied until asked)
    theme.install(qapp)
    assert theme.colours() is theme.DARK


def test_digits_line_up(qapp):
    """Times, BPM and sizes in columns: the application font asks for tabular digits."""
    from PySide6.QtGui import QFont

    theme.install(qapp)
    assert QFont.Tag("tnum") in qapp.font().featureTags()


def test_check_boxes_have_an_edge_that_shows_on_a_dark_window(qapp):
    """Their class palette's window (Fusion draws their edge a shade darker) is lighter than
    the window in the dark scheme: set by class name, which PySide6 takes only as a str
    (docs/upstream.md)."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    window = QPalette.ColorRole.Window
    try:
        theme.apply(qapp, "dark")
        boxes = QApplication.palette("QCheckBox").color(window)
        assert boxes.lightness() > qapp.palette().color(window).lightness()
        assert QApplication.palette("QRadioButton").color(window) == boxes
    finally:
        theme.apply(qapp, theme.wanted_scheme())


def test_a_scheme_change_after_a_window_is_gone_reaches_only_what_is_left(qapp, qloop):
    """The pages hear a scheme change through the theme's notifier, which outlives them:
    a page that was deleted is not called (its connection ended with it)."""
    from PySide6.QtCore import QCoreApplication, QEvent

    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.window import MainWindow

    for _ in range(2):
        window = MainWindow(NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
        window.page("Library")  # built: the pages that listen are Compose and Library
        window.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    for scheme in ("dark", "light"):
        theme.apply(qapp, scheme)  # no call into a deleted page (pytest-qt fails on one)


WALK_WHILE_GARBAGE_WAITS = """
import gc, sys
from PySide6.QtWidgets import QApplication, QComboBox, QSpinBox, QTableWidget, QWidget
from cantor_desktop.ui import theme

mid_walk = []  # collections started while every_widget() ran


def watch(phase, info):
    frame = sys._getframe().f_back
    while frame is not None:
        if phase == "start" and frame.f_code is theme.every_widget.__code__:
            mid_walk.append(info["generation"])
        frame = frame.f_back


app = QApplication(sys.argv)
kept = [QTableWidget() for _ in range(30)]  # inner widgets Python has not seen yet
gc.callbacks.append(watch)
for _ in range(20):
    gone = QWidget()
    for _ in range(10):
        QTableWidget(gone), QComboBox(gone), QSpinBox(gone)
    gone.me = gone  # a cycle: only the cyclic collector deletes it, whenever it runs
    del gone
    gc.set_threshold(1, 1, 1)  # it runs at every allocation: mid-conversion too
    widgets = theme.every_widget()
    gc.set_threshold(700, 10, 10)
    assert all(isinstance(w, QWidget) for w in widgets), "not a widget"
    assert not any(w.property("cantorTone") for w in widgets)
    del widgets
    gc.collect()
theme.apply(app, "dark")
print("walked", len(theme.every_widget()), "collections mid-walk", len(mid_walk))
assert not mid_walk, f"{len(mid_walk)} collections while the list was made"
"""


def test_the_walk_over_every_widget_survives_a_collection_that_deletes_widgets(tmp_path):
    """theme.apply() walks QApplication.allWidgets(). A garbage collection while PySide
    converts that list deleted widgets still on it, and the walk read freed memory (a
    segfault, or a QStandardItem where a widget was; CI, 2026-12-02): theme.every_widget()
    holds the collector off while the list is made. Run in a process of its own, since
    the failure is a crash."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "CANTOR_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", WALK_WHILE_GARBAGE_WAITS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("walked ")


def test_windows_high_contrast_keeps_the_systems_colours(qapp, qtbot, monkeypatch):
    """With High Contrast on, Windows' own colours are the only ones: no palette of ours,
    no toned label or panel, no tinted cell; asked only on Windows."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QFrame, QLabel, QTableWidgetItem

    assert not theme.asks_for_high_contrast(qapp, "linux")
    assert theme.asks_for_high_contrast(qapp, "win32") is False  # this machine's hint: off
    system = QPalette(qapp.palette())
    theirs = QPalette()  # what the system would give: Qt's standard palette here
    theirs.setColor(QPalette.ColorRole.Window, theirs.color(QPalette.ColorRole.WindowText))
    monkeypatch.setattr(theme, "_high_contrast", True)
    monkeypatch.setattr(theme, "_system_palette", theirs)
    try:
        theme.apply(qapp, "dark")
        assert qapp.palette().color(QPalette.ColorRole.Window) == theirs.color(
            QPalette.ColorRole.Window
        )
        label, panel, item = QLabel("muted"), QFrame(), QTableWidgetItem("x")
        qtbot.addWidget(label)
        qtbot.addWidget(panel)
        theme.tone(label, "danger")
        theme.paint_panel(panel, "alarm")
        theme.item_tone(item, "danger")
        assert label.palette().color(QPalette.ColorRole.WindowText) == qapp.palette().color(
            QPalette.ColorRole.WindowText
        )
        assert panel.palette().color(QPalette.ColorRole.Window) == qapp.palette().color(
            QPalette.ColorRole.Window
        )
        assert item.data(Qt.ItemDataRole.ForegroundRole) is None
    finally:
        monkeypatch.setattr(theme, "_high_contrast", False)
        qapp.setPalette(system)
        theme.apply(qapp, theme.wanted_scheme())


def test_high_contrast_is_asked_without_a_deleted_object_on_first_use():
    """The first ask in a fresh process (where PySide6's chained call fails:
    docs/upstream.md) answers, and says no High Contrast on this machine."""
    import subprocess
    import sys

    code = (
        "from PySide6.QtWidgets import QApplication\n"
        "from cantor_desktop.ui import theme\n"
        "app = QApplication([])\n"
        "print(theme.asks_for_high_contrast(app, 'win32'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-500:]
