"""The menu bar as each OS has it: roles that put About, Settings… and Quit where macOS
looks for them, the platform's standard shortcuts shown in its own text, the Song menu
following the selection, and "menu bar" or "system tray" as the OS says it. The platform
is named to the window (Qt's key bindings stay this machine's: those are compared with
what Qt says for each standard key)."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtGui import QAction, QKeySequence
from support.procs import free_port
from support.ui import make_wav

from cantor_desktop.song.record import Song
from cantor_desktop.ui import shortcuts
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.window import MainWindow

PLATFORMS = ["darwin", "win32", "linux"]
NATIVE = QKeySequence.NativeText


def window_for(qtbot, platform: str) -> MainWindow:
    link = NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False)
    w = MainWindow(link, platform=platform)
    qtbot.addWidget(w)
    return w


def every_action(w: MainWindow) -> list[QAction]:
    return [a for menu in w.menu_bar.menus.values() for a in menu.actions() if a.text()]


def shown(action: QAction) -> str:
    """The text without its Alt-key letter's & (as a menu shows it)."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_about_settings_and_quit_have_their_roles_and_nothing_else_moves(qtbot, platform):
    w = window_for(qtbot, platform)
    titles = [m.title().replace("&", "") for m in w.menu_bar.menus.values()]
    assert titles == ["File", "Edit", "Song", "Window", "Help"]
    roles = {shown(a): a.menuRole() for a in every_action(w)}
    assert roles.pop("About Cantor") == QAction.AboutRole
    assert roles.pop("Settings…") == QAction.PreferencesRole
    assert roles.pop("Exit" if platform == "win32" else "Quit Cantor") == QAction.QuitRole
    assert roles.pop("About Qt") == QAction.AboutQtRole
    # "Settings", "Use these settings" … are not guessed into macOS's application menu
    assert set(roles.values()) == {QAction.NoRole}
    menus = w.menu_bar.menus
    assert [a.text() for a in menus["File"].actions() if a.text()][:3] == [
        "Export…",
        "Show in folder",
        "Copy path",
    ]
    song = [a.text() for a in menus["Song"].actions() if a.text()]
    assert song[0] == "Generate" and {"Play / Pause", "Repaint…", "Stems…"} <= set(song)
    help_ = [shown(a) for a in menus["Help"].actions() if a.text()]
    assert help_[:2] == ["Cantor Help", "Node Log"]
    window = [shown(a) for a in menus["Window"].actions() if a.text()]
    assert window[:2] == ["Minimize", "Zoom"] and "Songs" in window
    assert ("Settings" in window) == (platform == "darwin")  # else it is in Edit


@pytest.mark.parametrize("platform", PLATFORMS)
def test_shortcuts_are_the_platforms_standard_keys(qtbot, platform):
    w = window_for(qtbot, platform)
    a = w.menu_bar.actions
    songs = w.song_actions
    std = QKeySequence.keyBindings
    assert songs["find"].shortcuts() == [k for k in std(QKeySequence.Find) if not k.isEmpty()]
    assert a["close"].shortcuts() == std(QKeySequence.Close)
    assert a["quit"].shortcuts() == [k for k in std(QKeySequence.Quit) if not k.isEmpty()]
    assert a["help"].shortcuts() == std(QKeySequence.HelpContents)
    prefs = [k for k in std(QKeySequence.Preferences) if not k.isEmpty()]
    assert a["preferences"].shortcuts() == (prefs or [QKeySequence("Ctrl+,")])
    trash = songs["trash"].shortcuts()
    assert trash[: len(std(QKeySequence.Delete))] == std(QKeySequence.Delete)
    # the Finder's ⌘⌫ (Ctrl is ⌘ on a Mac) moves to the trash there, and only there
    assert (QKeySequence("Ctrl+Backspace") in trash) == (platform == "darwin")
    assert (a["minimize"].shortcuts() == [QKeySequence("Ctrl+M")]) == (platform == "darwin")
    assert w.compose.generate_action.shortcuts()[0] == QKeySequence("Ctrl+Return")


def test_tooltips_and_menus_show_shortcuts_in_the_platforms_own_text(qtbot):
    """Never a spelling written into a string ("Ctrl+Enter" on a Mac): what Qt writes for
    the action's real key, ⌘↩ there."""
    w = window_for(qtbot, sys.platform)
    generate = w.compose.generate_action
    native = generate.shortcuts()[0].toString(NATIVE)
    w.compose.caption.setPlainText("dusty boom bap")  # a valid form: the plain tooltip
    assert w.compose.generate.toolTip() == f"Generate ({native})"
    for action in every_action(w):
        keys = action.shortcuts()
        if keys:
            assert f"({keys[0].toString(NATIVE)})" in action.toolTip(), action.text()
    w.show_page("Songs")
    find = w.song_actions["find"].shortcuts()[0].toString(NATIVE)
    assert w.songs.search.placeholderText().endswith(f"({find})")
    for text in (w.compose.generate.toolTip(), w.songs.search.placeholderText()):
        assert "Ctrl+Enter" not in text


def test_the_song_menu_follows_the_selection_and_says_why(qtbot, tmp_path):
    w = window_for(qtbot, sys.platform)
    stems = w.song_actions["stems"]
    assert not stems.isEnabled() and "Songs page" in stems.toolTip()  # page not built yet
    assert w.menu_bar.menus["Song"].toolTipsVisible()
    w.show_page("Songs")
    assert not stems.isEnabled() and "Select a take" in stems.toolTip()
    song = Song.from_json(
        {
            "id": "00000000000000aa",
            "state": "done",
            "created": 1.7e9,
            "request": {"caption": "menu song", "model": "sketch"},
            "takes": [{"audio": make_wav(tmp_path / "m.wav"), "seed": 1, "duration": 1.0}],
        }
    )
    w.songs.model.set_songs([song])
    w.songs.select(song.id, 1)
    assert stems.isEnabled() and "\n—" not in stems.toolTip()
    assert w.songs.stems.isEnabled()  # the page's button is the same action's face
    menu = w.songs.context_menu()
    assert w.song_actions["trash"] in menu.actions()  # the list's menu: the same actions


def test_find_and_the_window_menu_go_to_their_pages(qtbot):
    w = window_for(qtbot, sys.platform)
    w.show()
    qtbot.waitExposed(w)
    w.song_actions["find"].trigger()
    assert w.pages.currentWidget() is w.songs
    w.menu_bar.actions["page:Library"].trigger()
    assert w.pages.currentWidget() is w.library
    w.menu_bar.actions["preferences"].trigger()
    assert w.pages.currentWidget() is w.settings_page
    quits = []
    w.quit_requested.connect(lambda: quits.append(True))
    w.menu_bar.actions["quit"].trigger()
    assert quits == [True]


@pytest.mark.parametrize(
    "platform, word", [("darwin", "menu bar"), ("win32", "system tray"), ("linux", "system tray")]
)
def test_the_tray_is_called_what_the_os_calls_it(qtbot, monkeypatch, platform, word):
    assert shortcuts.tray_word(platform) == word
    monkeypatch.setattr(sys, "platform", platform)
    w = window_for(qtbot, platform)
    w.keep_in_tray = True
    w.show()
    w.close()
    assert w.statusBar().currentMessage() == f"Cantor keeps running in the {word}"


@pytest.mark.parametrize("platform", ["win32", "linux"])
def test_every_menu_item_has_its_own_alt_key_letter(qtbot, platform):
    """Windows and Linux reach a menu item with Alt and a letter: each of the bar's own
    items has one, and no two in a menu share it; Windows says Exit, not Quit. (The Song
    menu's items are the Songs page's actions, whose text its buttons show too.)"""
    w = window_for(qtbot, platform)
    w.menu_bar.fill(w.song_actions)
    own = {a for name, a in w.menu_bar.actions.items() if not name.startswith("song:")}
    for title, menu in w.menu_bar.menus.items():
        letters = []
        for a in menu.actions():
            if a in own and a.text():
                assert "&" in a.text(), f"{title}: {a.text()} has no Alt-key letter"
                text = a.text().replace("&&", "")
                letters.append(text[text.index("&") + 1].lower())
        assert len(letters) == len(set(letters)), f"{title}: {letters}"
    assert w.menu_bar.actions["quit"].text() == ("E&xit" if platform == "win32" else "&Quit Cantor")
    pages = [shown(a) for a in w.menu_bar.menus["Window"].actions() if a.text()]
    assert "Hardware & Backends" in pages  # its & a letter, not a mnemonic
