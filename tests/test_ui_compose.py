"""Compose: live validation with the node's rules, the Instrumental sentinel, the queue."""

from __future__ import annotations

import httpx

from cantor_desktop.auth.access import bearer, read_token

from support.ui import run, until

from cantor_desktop.views.compose_form import ComposeForm
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.compose import ComposePage


def make_page(qtbot, url=None):
    link = NodeLink(url=url, start_child=False)
    page = ComposePage(link)
    qtbot.addWidget(page)
    return link, page


def test_invalid_fields_block_generate_with_the_reason(qtbot, qloop):
    link, page = make_page(qtbot)
    assert not page.generate.isEnabled()
    assert page.problem.text() == ""  # an untouched form says nothing in red …
    assert "Caption is required" in page.generate.toolTip()  # … Generate says why it waits
    page.caption.setPlainText("x")
    page.caption.setPlainText("")  # typed, then cleared: now it is said
    assert "Caption" in page.problem.text() and "required" in page.problem.text()
    page.caption.setPlainText("dusty boom bap, vinyl crackle")
    assert page.generate.isEnabled() and page.problem.text() == ""
    page.bpm.setText("400")
    assert not page.generate.isEnabled()
    assert "BPM must be from 30 to 300" in page.problem.text()  # the label's own name
    page.bpm.setText("92")
    page.key.setCurrentText("H minor")
    assert not page.generate.isEnabled() and "Key" in page.problem.text()
    page.key.setCurrentText("f# min")
    page.duration.setText("5")
    assert "Duration must be from 10 to 600" in page.problem.text()
    page.duration.setText("")
    assert page.generate.isEnabled()
    body = page.form().validated()
    assert body["key"] == "F# minor" and body["bpm"] == 92 and "duration" not in body


def test_seed_lock_shows_the_seed_and_random_sends_minus_one(qtbot, qloop):
    link, page = make_page(qtbot)
    page.caption.setPlainText("ambient pads")
    assert page.form().validated()["seed"] == -1
    page.seed_lock.setChecked(True)
    seed = int(page.seed.text())
    assert page.form().validated()["seed"] == seed


def test_instrumental_switch_sends_the_sentinel_and_keeps_lyrics(qtbot, qloop, node):
    from cantor_desktop.ui.pages.hardware import HardwarePage

    link, page = make_page(qtbot, node.url)
    run(qloop, link.connection.open())
    # a node in no pool: no Node choice here, no Pool section on Hardware & Backends
    assert link.backends.system and link.pool.view is None
    assert not page._song_grid.isRowVisible(page.node)
    hardware = HardwarePage(link)
    qtbot.addWidget(hardware)
    hardware.show()
    assert hardware.pool.isHidden()
    page.caption.setPlainText("sea shanty, stomping")
    page.lyrics.setPlainText("[Verse]\nheave away")
    page.instrumental.setChecked(True)
    assert not page.lyrics.isEnabled()
    assert page.lyrics.toPlainText() == "[Verse]\nheave away"
    ids = []
    page.generated.connect(ids.append)
    page.generate.click()
    run(qloop, until(lambda: ids, what="the song to be queued"))
    sent = httpx.get(f"{node.url}/v1/songs/{ids[0]}", headers=bearer(read_token())).json()
    assert sent["request"]["lyrics"] == "[Instrumental]"
    assert sent["request"]["caption"] == "sea shanty, stomping"
    page.instrumental.setChecked(False)
    assert page.lyrics.isEnabled()
    assert page.form().validated()["lyrics"] == "[Verse]\nheave away"
    run(qloop, link.shutdown())


def test_use_these_settings_round_trip():
    params = {
        "caption": "waltz",
        "lyrics": "[Instrumental]",
        "bpm": 90,
        "duration": 30.0,
        "time_signature": 3,
        "key": "A minor",
        "model": "sketch",
        "format": "flac",
        "batch": 2,
    }
    form = ComposeForm.from_settings(params, seed=1234)
    body = form.validated()
    assert body["seed"] == 1234 and body["time_signature"] == 3 and body["duration"] == 30.0
    assert body["lyrics"] == "[Instrumental]" and body["batch"] == 2 and body["format"] == "flac"


def test_no_node_at_the_address_is_said_in_words(qtbot, qloop):
    from support.procs import free_port

    url = f"http://127.0.0.1:{free_port()}"
    link = NodeLink(url=url, start_child=False)
    run(qloop, link.connection.open())
    assert link.connection.state == "error" and url in link.status_line()
    link, page = make_page(qtbot, url)
    page.caption.setPlainText("anything")
    page.generate.click()
    run(qloop, until(lambda: "Could not queue" in page.problem.text(), what="the reason"))
    problem = page.problem.text()
    assert problem.startswith("Could not queue the song")
    # what is wrong and what to do about it
    assert problem.endswith("The node is not running; start it from the tray or the status bar")


def test_status_line_does_not_call_an_uninstalled_backend_ready(qtbot, qloop, node):
    # a fresh machine: the auto choice is only installable; the status bar said
    # "Node ready — backend cpu" as if an engine were there
    link = NodeLink(url=node.url, start_child=False)
    run(qloop, link.connection.open())
    run(qloop, until(lambda: link.backends.system, what="the system"))
    line = link.status_line()
    assert line.startswith("Node ready") and "no ACE-Step engine yet" in line, line
    assert "can be installed" in line and "— backend " not in line
    fam = link.backends.system["families"]["acestep"]
    for row in fam["backends"]:
        row["installed"] = row["name"] == fam["default"]
    assert f"backend {fam['default']}" in link.status_line()
    run(qloop, link.shutdown())


def test_a_cover_carries_its_source_and_strength_explained(qtbot, qloop):
    link, page = make_page(qtbot)
    page.caption.setPlainText("the same song as a string quartet")
    page.set_cover({"song": "0123456789abcdef", "take": 2}, "dusty boom bap")
    assert page.starting.isVisibleTo(page) and "dusty boom bap" in page.cover_label.text()
    page.strength.setValue(40)
    assert "40 % of the steps hear the source" in page.strength_words.text()
    body = page.form().validated()
    assert body["task"] == "cover" and body["source"] == {"song": "0123456789abcdef", "take": 2}
    assert body["strength"] == 0.4
    page.set_reference({"upload": "fedcba9876543210"}, "my guitar.wav")
    assert page.form().validated()["reference"] == {"upload": "fedcba9876543210"}
    page.cover_clear.click()
    body = page.form().validated()
    assert "task" not in body and "source" not in body and "reference" in body


def test_fields_are_outlined_when_they_hold_something_wrong_or_generate_was_asked(qtbot, qloop):
    from cantor_desktop.ui.theme import invalid_outline

    BAD_FIELD = invalid_outline()
    link, page = make_page(qtbot)
    assert page.problem.text() == ""  # nothing said of an untouched form …
    assert page.caption.styleSheet() == ""  # … and no field is red yet
    page.bpm.setText("400")
    assert page.bpm.styleSheet() == BAD_FIELD  # something wrong in it: outlined now
    assert "BPM" in page.problem.text() and "Caption" not in page.problem.text()
    page.on_generate()  # Generate (Ctrl+Enter) asked for
    assert page.caption.styleSheet() == BAD_FIELD and not page.generate.isEnabled()
    assert "Caption" in page.problem.text()
    page.caption.setPlainText("dusty boom bap")
    page.bpm.setText("92")
    assert page.caption.styleSheet() == "" and page.bpm.styleSheet() == ""


def test_the_advanced_section_is_built_when_first_needed_and_loses_nothing(qtbot, qloop):
    from cantor_desktop.ui.compose_advanced import ADVANCED_ROWS
    from cantor_desktop.views.compose_form import ADVANCED_FIELDS

    assert sorted(name for name, _label, _tip in ADVANCED_ROWS) == sorted(ADVANCED_FIELDS)
    link, page = make_page(qtbot)
    assert page._advanced is None  # folded at start: not built
    assert page.form().steps == "" and page.form().advanced_set == 0
    page.set_adapters([{"name": "tape", "made_for": "the 2B DiT", "dit": "2B"}])
    assert page._advanced is None  # kept for when it is built
    form = page.form()
    form.steps, form.adapter = "12", "tape"
    page.set_form(form)  # "Use these settings": built to show them
    assert page._advanced is not None
    combo = page.adv_fields["adapter"]
    assert [combo.itemText(i) for i in range(combo.count())] == ["none", "tape"]
    assert page.form().steps == "12" and page.form().adapter == "tape"
    assert "(3 set)" in page.advanced_toggle.text()  # steps, the adapter and its scale
    page.advanced_toggle.setChecked(True)  # unfolded: the same section shows
    assert page.adv_fields["steps"].isVisibleTo(page)


def test_the_queue_is_a_line_until_the_first_song_then_a_row_each(qtbot, qloop):
    from cantor_desktop.song.record import Song, SongState

    link, page = make_page(qtbot)
    assert page.queue.tree is None and page.queue.empty.isVisibleTo(page)
    page.show_song(Song(id="old", request={"caption": "an old song"}, state=SongState.DONE))
    assert page.queue.tree is None  # history is the Songs page's
    page.show_song(
        Song(id="s1", request={"caption": "first"}, state=SongState.RUNNING, progress=0.25)
    )
    assert page.queue.row_count() == 1 and not page.queue.empty.isVisibleTo(page)
    assert page.queue_progress("s1") == 0.25
    page.show_song(
        Song(id="s1", request={"caption": "first"}, state=SongState.FAILED, progress=0.25)
    )
    assert page.queue.tree.itemWidget(page.queue._rows["s1"], 4).text() == "Retry"


def test_the_node_choice_follows_the_pool_and_names_a_member_that_cannot_make_the_song(
    qtbot, qloop
):
    """(Pool views as the node reads them; tests/test_ui_pool.py drives a real pool.)"""
    from cantor_desktop.client.pool_view import PoolView

    def pool(*members):
        return PoolView.from_json(
            {
                "state": "connected",
                "url": "redis://studio:6379/0",
                "node": {"id": "a", "name": "alpha"},
                "members": [
                    {"id": n[0], "name": n, "alive": True, "models": list(models)}
                    for n, models in members
                ],
            }
        )

    link, page = make_page(qtbot)
    page.caption.setPlainText("lofi")
    page.instrumental.setChecked(True)
    assert not page._song_grid.isRowVisible(page.node) and page.chosen_node() is None
    page.set_pool(pool(("alpha", ["sketch"]), ("bravo", ["sketch"])))
    assert page._song_grid.isRowVisible(page.node)
    page.node.setCurrentIndex(page.node.findData("bravo"))
    assert page.chosen_node() == "bravo" and page.generate.isEnabled()
    # bravo leaves the pool: still chosen, marked, and Generate says why it waits
    page.set_pool(pool(("alpha", ["sketch"])))
    assert page.node.currentText() == "bravo — not in the pool now"
    assert not page.generate.isEnabled()
    assert "Node bravo is not in the pool now" in page.problem.text()
    page.set_pool(pool(("alpha", ["sketch"]), ("bravo", ["sketch"])))  # back
    assert page.node.currentText() == "bravo" and page.generate.isEnabled()
    # the node leaves the pool (restarted without one): the choice goes, any member it is
    page.set_pool(None)
    assert not page._song_grid.isRowVisible(page.node) and page.chosen_node() is None
    assert page.generate.isEnabled()


def test_a_greyed_out_choice_is_shown_but_skipped_and_refilling_leaves_no_stale_items(qtbot, qapp):
    """The Node list's rows (ui/choice_list.py): a member that cannot make the song is
    listed but the arrow keys pass over it; refilled again and again, the list leaves no
    item wrapper behind for a C++ item that clear() deleted."""
    from shiboken6 import Shiboken

    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QWidget

    from cantor_desktop.ui import theme
    from cantor_desktop.ui.choice_list import Choice, ChoiceList
    from cantor_desktop.ui.widgets import ComboBox

    combo = ComboBox()
    qtbot.addWidget(combo)
    choices = ChoiceList(combo)
    combo.setModel(choices)
    for n in range(50):
        choices.set_rows(
            [
                Choice("Any node", ""),
                Choice(f"bravo {n}", "bravo", False),
                Choice("charlie", "charlie"),
            ]
        )
    assert [combo.itemText(i) for i in range(3)] == ["Any node", "bravo 49", "charlie"]
    combo.setCurrentIndex(0)
    combo.setFocus()
    qtbot.keyClick(combo, Qt.Key_Down)
    assert combo.currentData() == "charlie"  # bravo, greyed out, passed over
    assert combo.findData("bravo") == 1
    assert not [w for w in Shiboken.getAllValidWrappers() if type(w).__name__ == "QStandardItem"]
    assert all(isinstance(w, QWidget) for w in theme.every_widget())
    theme.apply(qapp, theme.wanted_scheme())


def test_a_long_cover_or_reference_title_never_widens_the_window(qtbot):
    from cantor_desktop.ui.window import MainWindow

    link = NodeLink(start_child=False)
    window = MainWindow(link)
    qtbot.addWidget(window)
    window.show_page("Compose")
    window.resize(window.minimumSizeHint().width(), 700)
    window.show()
    qtbot.waitExposed(window)
    size, least = window.size(), window.minimumSizeHint()
    title = "a very long song title that goes on and on " * 8
    page = window.compose
    page.set_cover({"song": "0" * 16, "take": 1}, title)
    page.set_reference({"upload": "1" * 16}, title)
    # (the Starting from box shows, so the window may grow taller; never wider)
    assert window.width() == size.width()
    assert window.minimumSizeHint().width() <= least.width()
    for label in (page.cover_label, page.reference_label):
        assert label.shown_text().endswith("…")
        assert "a very long song title" in label.toolTip()  # the whole of it, on hover


def test_tab_leaves_the_caption_and_the_lyrics_and_their_labels_lead_to_them(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    link, page = make_page(qtbot)
    page.show()
    qtbot.waitExposed(page)
    page.caption.setFocus()
    qtbot.keyClicks(page.caption, "warm pads")
    qtbot.keyClick(page.caption, Qt.Key.Key_Tab)
    assert page.caption.toPlainText() == "warm pads"  # no tab character in the caption
    assert not page.caption.hasFocus()
    page.lyrics.setFocus()
    qtbot.keyClick(page.lyrics, Qt.Key.Key_Tab)
    assert "\t" not in page.lyrics.toPlainText() and not page.lyrics.hasFocus()
    buddies = {label.text(): label.buddy() for label in page.findChildren(QLabel) if label.buddy()}
    assert buddies["&Caption"] is page.caption and buddies["&Lyrics"] is page.lyrics


def test_no_button_is_named_only_by_a_symbol(qtbot):
    """A screen reader reads a button's accessible name, else its text: a bare "×" or "✕"
    says nothing; every such button on Compose and the first-run banner has a name."""
    from PySide6.QtWidgets import QAbstractButton

    from cantor_desktop.ui.pages.firstrun import ReadinessBanner

    link, page = make_page(qtbot)
    banner = ReadinessBanner()
    qtbot.addWidget(banner)
    for widget in (page, banner):
        for button in widget.findChildren(QAbstractButton):
            words = button.accessibleName() or button.text().replace("&", "")
            assert any(c.isalpha() for c in words), (type(widget).__name__, button.text())
