"""Settings: generated from the registry, validated, an edit on disk shows within a second."""

from __future__ import annotations

from cantor_desktop import config
from cantor_desktop.system.paths import paths
from cantor_desktop.ui.pages.settings import SettingsPage


def test_every_key_has_a_field_and_save_writes_node_toml(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    assert set(page.fields) == set(config.OPTIONS)
    page.fields["node.port"].setValue(8123)
    page.fields["songs.format"].setCurrentText("flac")
    assert page.save_button.isEnabled()
    assert page.save()
    cfg = config.load()
    assert cfg.get("node.port") == 8123 and cfg.get("songs.format") == "flac"


def test_invalid_value_is_refused_with_the_registry_reason(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    page.fields["engines.manifest"].setText("http://example.com/m.json")
    assert not page.save_button.isEnabled()
    assert "engines.manifest" in page.errors["engines.manifest"].text()


def test_an_edit_on_disk_shows_within_a_second(qtbot):
    """The page looks at node.toml every POLL_MS (at most a second) and shows an edit at the
    first look after it: counted in looks, not in wall-clock time (a loaded machine may run
    the timer late, which is not the page's doing)."""
    from cantor_desktop.ui.pages.settings import POLL_MS

    assert POLL_MS <= 1000
    page = SettingsPage()
    qtbot.addWidget(page)
    looks = [0]
    page.timer.timeout.connect(lambda: looks.__setitem__(0, looks[0] + 1))  # after _poll
    path = paths().config_file
    for edit, port in (
        (lambda: path.write_text("# mine\n[node]\nkeep_loaded = true\nport = 9001\n"), 9001),
        (lambda: config.update({"node.port": 9002}), 9002),
    ):  # a rename, as the CLI
        edit()
        looks[0] = 0
        qtbot.waitUntil(lambda: looks[0] >= 1, timeout=30_000)
        assert page.value("node.port") == port  # shown at the first look after it
    assert page.value("node.keep_loaded") is True


def test_a_malformed_file_is_shown_and_never_overwritten(qtbot):
    page = SettingsPage()
    qtbot.addWidget(page)
    path = paths().config_file
    path.write_text("[node\nport = 1\n")
    qtbot.waitUntil(lambda: not page.banner.isHidden(), timeout=30_000)  # at its next look
    assert "line 1" in page.banner.text()
    page.fields["node.port"].setValue(7000)
    assert not page.save_button.isEnabled()
    assert not page.save()
    assert path.read_text() == "[node\nport = 1\n"


def test_tokens_are_saved_to_the_keyring_off_the_gui_thread(qtbot, qloop):
    """Settings' node token: saved by a worker thread, with the outcome said on the page.
    Library's Hugging Face token belongs to the node's machine: with no node it is not
    saved here, and the page says why (tests/test_ui_library.py saves it on a node)."""
    import threading
    from support.ui import run, until
    from cantor_desktop.system import secrets
    from cantor_desktop.ui.node_link import REMOTE_TOKEN, NodeLink
    from cantor_desktop.ui.pages.library import LibraryPage
    from support.procs import free_port

    threads: list[str] = []
    real_set = secrets.set_secret

    def spy(name, value):
        threads.append(threading.current_thread().name)
        real_set(name, value)

    secrets.set_secret = spy
    try:
        page = SettingsPage()
        qtbot.addWidget(page)
        page.token.setText("remote-secret-1")
        page.token_save.click()
        run(qloop, until(lambda: page.status.text(), what="the outcome"))
        assert page.status.text() == "Token saved in the keyring"
        assert secrets.get_secret(REMOTE_TOKEN) == "remote-secret-1"
        link = NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False)
        lib = LibraryPage(link)
        qtbot.addWidget(lib)
        lib.hf_token.setText("hf_abcdefgh")
        lib.hf_save.click()
        assert lib.message.text() == (
            "Could not save the token: "
            "The node is not running; start it from the tray or the status bar"
        )
        assert secrets.get_secret(secrets.HF_TOKEN) is None
        run(qloop, link.shutdown())
    finally:
        secrets.set_secret = real_set
    assert threads and threading.main_thread().name not in threads


def test_the_wheel_scrolls_the_page_and_changes_no_value_it_was_not_given(qtbot):
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    page = SettingsPage()
    qtbot.addWidget(page)
    page.resize(700, 300)
    page.show()
    qtbot.waitExposed(page)
    combo, spin = page.fields["songs.format"], page.fields["node.port"]
    before = (combo.currentText(), spin.value())

    def wheel(widget) -> None:
        pos = QPointF(widget.rect().center())
        event = QWheelEvent(
            pos,
            QPointF(widget.mapToGlobal(pos.toPoint())),
            QPoint(0, 0),
            QPoint(0, -120),
            Qt.NoButton,
            Qt.NoModifier,
            Qt.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(widget, event)

    page.save_button.setFocus()
    wheel(combo)
    wheel(spin)
    assert (combo.currentText(), spin.value()) == before  # unfocused: nothing changed
    page.activateWindow()
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus, timeout=30_000)
    wheel(spin)
    assert spin.value() != before[1]  # focused: the wheel works


def test_the_default_model_is_a_choice_of_installed_models(qtbot, qloop):
    from cantor_desktop.ui.node_link import NodeLink

    config.update({"models.default": "acestep-v15-xl-base-Q8_0"})
    link = NodeLink(start_child=False)
    page = SettingsPage(link)
    qtbot.addWidget(page)
    link.models.listed = [
        {"name": "sketch", "state": "ready"},  # as the node lists them
        {"name": "acestep-v15-turbo-Q8_0", "state": "ready"},
        {"name": "acestep-v15-sft-Q8_0", "state": "available"},
    ]
    link.models.loaded.emit(link.models.listed)
    combo = page.fields["models.default"]
    items = [combo.itemData(i) for i in range(combo.count())]
    assert items == ["sketch", "acestep-v15-turbo-Q8_0", "acestep-v15-xl-base-Q8_0"]
    assert combo.currentText() == "acestep-v15-xl-base-Q8_0 (not installed)"  # kept, named
    combo.setCurrentIndex(1)
    page.save()
    assert config.load().get("models.default") == "acestep-v15-turbo-Q8_0"
