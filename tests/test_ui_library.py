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
    assert "MB /" in page._bar(row).format() and page.table.item(row, 4).text().endswith("/s")
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
