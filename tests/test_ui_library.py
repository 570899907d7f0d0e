"""Library: the catalogue from a real node, a pull with live progress, pause and resume
(the node's downloader carries on from the .part file), cancel, and the disk line."""

from __future__ import annotations

import pytest

from test_ui_helpers import node, qloop, run, until  # noqa: F401

from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.library import LibraryPage

MODEL = "acestep-v15-turbo-Q8_0"
DIT = "acestep-v15-turbo-Q8_0.gguf"
SIZE = 8 * 1024 * 1024


@pytest.fixture
def hub(monkeypatch):
    from support.hub import ModelHub
    with ModelHub() as h:
        for name in h.add_set(size=SIZE):
            h.server.throttle(h.cdn_path(name), 4 * 1024 * 1024)
        monkeypatch.setenv("HF_ENDPOINT", h.base_url)
        yield h


def test_pull_pause_resume_from_the_part_file(qtbot, qloop, hub, node):
    link = NodeLink(url=node.url, start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    run(qloop, link._connect())
    run(qloop, until(lambda: MODEL in page.rows, what="the catalogue"))
    row = page.rows[MODEL]
    assert "to get" in page.table.item(row, 1).text()
    events: list[dict] = []
    link.pull_event.connect(lambda name, e: events.append(e))
    page.pull(MODEL)
    run(qloop, until(lambda: any(e.get("file") == DIT and (e.get("file_received") or 0) > SIZE // 4
                                 for e in events), what="a quarter of the first file"))
    assert "MiB /" in page._bar(row).format() and page.table.item(row, 4).text().endswith("/s")
    page.pause(MODEL)
    run(qloop, until(lambda: any(e.get("state") == "paused" for e in events), what="pause"))
    run(qloop, until(lambda: page.table.item(row, 2).text() == "partial", what="partial state"))
    assert page.table.cellWidget(row, 6).findChildren(type(page.hf_save))[0].text() == "Resume"
    before = len(hub.server.requests_for(hub.cdn_path(DIT)))
    events.clear()
    page.pull(MODEL)  # resume: pulling again continues the .part file
    run(qloop, until(lambda: sum(1 for e in events if e.get("type") == "file_done") >= 3,
                     timeout=60, what="the files"), timeout=70)
    ranges = [r.header("range") for r in hub.server.requests_for(hub.cdn_path(DIT))[before:]]
    assert any(r and r.startswith("bytes=") and r != "bytes=0-" for r in ranges), ranges
    run(qloop, link.shutdown())


def test_a_pull_whose_engine_step_failed_shows_the_model_ready_and_what_to_do(qtbot, qloop):
    """The node's final ``done`` event with engine_ready false: the row reads installed and
    the page says what is missing and where to go next."""
    from cantor_desktop.ui.pages.library import done_message
    link = NodeLink(url="http://127.0.0.1:9", start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    page.set_models([{"name": MODEL, "state": "available", "size": SIZE}])
    event = {"state": "done", "engine_ready": False,
             "engine_error": "no backend runs on this machine."}
    page.on_pull_event(MODEL, event)
    assert page.table.item(page.rows[MODEL], 2).text() == "installed"
    assert page.message.text() == done_message(MODEL, event)
    text = done_message(MODEL, {"state": "done", "engine_ready": False,
                                "engine_error": "no backend runs on this machine."})
    assert text == (f"{MODEL}: Model ready. No engine yet: no backend runs on this machine "
                    "— Hardware & Backends → Find the best backend")
    assert done_message(MODEL, {"state": "done", "engine_ready": True}).endswith("ready.")


@pytest.mark.parametrize("width", [680, 1000])
def test_the_action_column_stays_in_view_and_long_names_elide(qtbot, qloop, width):
    """About 900 px of window leaves the table ~650 px: no sideways scrolling, actions seen."""
    from PySide6.QtCore import Qt
    link = NodeLink(url="http://127.0.0.1:9", start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    page.set_models([{"name": f"{MODEL}-with-a-very-long-suffix-{i}", "state": "available",
                      "size": SIZE, "display_name": "ACE-Step 1.5 Turbo, a long title"}
                     for i in range(3)])
    page.resize(width, 500)
    page.show()
    qtbot.waitExposed(page)
    table = page.table
    h = table.horizontalHeader()
    right = h.sectionViewportPosition(6) + h.sectionSize(6)
    assert right <= table.viewport().width() and table.horizontalScrollBar().maximum() == 0
    assert h.sectionSize(0) >= 150 and h.sectionSize(6) >= 120
    assert table.textElideMode() == Qt.ElideRight and not table.wordWrap()
    assert h.isSectionHidden(4) == (table.width() < 880)  # Speed hidden only when narrow
    assert table.item(0, 0).toolTip().startswith(f"{MODEL}-with-a-very-long-suffix-0")
