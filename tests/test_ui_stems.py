"""Stems…, Add a layer… and Complete… on the Songs page against real nodes: one extract
song per chosen track, titled {title}_{track}, listed under their song and selected and
dragged out together under those names; without a base model the dialog says so with the
size the node names and pulls it from the Library's own pull; a layer takes the waveform's
selection."""

from __future__ import annotations

import os

import pytest
from PySide6.QtWidgets import QDialog

from support.ui import run, start_node, until

from cantor_desktop.song.request import TRACKS
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.songs import SongsPage


def _page(qtbot, qloop, url: str) -> tuple[NodeLink, SongsPage]:
    link = NodeLink(url=url, start_child=False)
    page = SongsPage(link)
    qtbot.addWidget(page)
    page.resize(1000, 700)
    run(qloop, link.connection.open())
    return link, page


def _song(qloop, link, request: dict):
    made = run(qloop, link.songs.submit(request))
    run(
        qloop,
        until(
            lambda: link.songs.by_id[made.id].state in ("done", "failed"),
            timeout=60,
            what="the song",
        ),
        timeout=70,
    )
    song = link.songs.by_id[made.id]
    assert song.state == "done", song.error
    return song


def _node_songs(qloop, link) -> dict:
    return {s["id"]: s for s in run(qloop, link.connection.client.songs())}


def test_stems_one_song_per_track_under_their_song_dragged_out_as_a_set(qtbot, qloop, node):
    link, page = _page(qtbot, qloop, node.url)
    song = _song(qloop, link, {"caption": "lofi piano rain", "duration": 10, "model": "sketch"})
    page.select(song.id, 1)
    dialog = page.open_stems()
    assert dialog.tracks() == ["drums", "bass"]  # an instrumental: no vocals asked
    dialog.all.click()
    assert dialog.tracks() == list(TRACKS) and dialog.make.text() == "Make 12 stems"
    dialog.all.click()
    assert dialog.tracks() == [] and not dialog.make.isEnabled()
    dialog.choose(["bass", "drums"])
    assert dialog.notice.model == "sketch" and dialog.notice.ready
    assert "Sketch" in dialog.notice.text.text() and not dialog.notice.pull.isVisible()
    assert dialog.make.isEnabled() and dialog.make.text() == "Make 2 stems"
    dialog.make.click()
    run(qloop, until(lambda: dialog.result() == QDialog.Accepted, what="the stems sent"))
    assert "2 stem(s) queued" in page.note.text()

    def stems_done():
        mine = [s for s in link.songs.by_id.values() if s.request.get("task") == "extract"]
        return len(mine) == 2 and all(s.state == "done" and s.title for s in mine) and mine

    stems = run(qloop, until(stems_done, timeout=60, what="two titled stems"), timeout=70)
    recorded = [
        s for s in _node_songs(qloop, link).values() if s["request"].get("task") == "extract"
    ]
    assert sorted((s["request"]["track"], s["title"]) for s in recorded) == [
        ("bass", "lofi-piano-rain_bass"),
        ("drums", "lofi-piano-rain_drums"),
    ]
    assert all(
        s["request"]["source"] == {"song": song.id, "take": 1} and s["request"]["model"] == "sketch"
        for s in recorded
    )

    # under their song, saying what they are
    rows = [page.model.row(n) for n in range(page.model.rowCount())]
    assert [(r.song.id, r.depth) for r in rows][0] == (song.id, 0)
    assert sorted(r.label for r in rows[1:]) == ["Stem: bass", "Stem: drums"]
    assert all(r.depth == 1 for r in rows[1:])
    # one action selects them all; one drag hands them out as {title}_{track}
    page.select(song.id, 1)
    assert page.select_stems() == 2
    assert sorted(r.song.id for r in page.view.selected_rows()) == sorted(s.id for s in stems)
    paths = page.view.drag_paths()
    named = {os.path.basename(p): p for p in paths}
    assert sorted(named) == ["lofi-piano-rain_bass.wav", "lofi-piano-rain_drums.wav"]
    by_track = {s.request["track"]: s for s in stems}
    assert os.path.samefile(
        named["lofi-piano-rain_drums.wav"], by_track["drums"].takes[0].audio
    )  # a link, not a copy
    mime = page.view.drag_mime_data()
    assert [u.toLocalFile() for u in mime.urls()] == paths
    # from a stem, its siblings are selected the same way
    page.select(by_track["bass"].id, 1)
    assert page.select_stems() == 2
    # renamed by the musician: the drag follows the new title
    link.songs.change(by_track["drums"].id, title="kick and snare")
    run(
        qloop,
        until(
            lambda: link.songs.by_id[by_track["drums"].id].title == "kick and snare",
            what="the rename",
        ),
    )
    page.select(song.id, 1)
    page.select_stems()
    assert sorted(os.path.basename(p) for p in page.view.drag_paths()) == [
        "kick and snare.wav",
        "lofi-piano-rain_bass.wav",
    ]
    page.shutdown()
    run(qloop, link.shutdown())


@pytest.fixture
def turbo_node(monkeypatch, cantor_home, tmp_path):
    """A node whose ACE-Step engine is the Sketch, a hub with turbo and base on 127.0.0.1."""
    from support.edit_nodes import hub_with_turbo_and_base, sketch_as_acestep
    from support.hub import ModelHub

    sketch_as_acestep(cantor_home, tmp_path)
    with ModelHub() as hub:
        hub_with_turbo_and_base(hub)
        monkeypatch.setenv("HF_ENDPOINT", hub.base_url)
        n = start_node()
        try:
            yield n
        finally:
            n.stop()


def test_without_a_base_model_the_dialog_says_so_with_its_size_and_pulls_it(
    qtbot, qloop, turbo_node
):
    from cantor_desktop.client.nodeclient import NodeError
    from cantor_desktop.units import human_size

    link, page = _page(qtbot, qloop, turbo_node.url)

    async def pull(name):
        return [e async for e in link.connection.client.pull(name)]

    assert run(qloop, pull("acestep-v15-turbo"), timeout=60)[-1].type == "done"
    song = _song(qloop, link, {"caption": "lofi piano", "duration": 10})
    assert song.model.startswith("acestep-v15-turbo")
    run(qloop, link.models.refresh())

    # the node's own word for it: 422 naming the model and its size
    async def ask():
        try:
            await link.connection.client.queue_song(
                {
                    "caption": "x",
                    "task": "extract",
                    "track": "drums",
                    "source": {"song": song.id, "take": 1},
                }
            )
        except NodeError as exc:
            return exc

    refusal = run(qloop, ask())
    assert refusal.status == 422 and refusal.field == "model"
    offer = next(m for m in link.models.listed if m["name"] == "acestep-v15-base-Q8_0")
    size = human_size(offer["download_bytes"])
    assert f"({size})" in refusal.message

    # the dialog knows before sending: it says so with that size and offers the pull
    page.select(song.id, 1)
    dialog = page.open_stems()
    notice = dialog.notice
    assert not notice.ready and not dialog.make.isEnabled()
    assert "need a base model" in notice.text.text() and size in notice.text.text()
    assert "ACE-Step 1.5 Base (Q8_0)" in notice.text.text()
    assert not notice.pull.isHidden() and notice.pull.text() == f"Download it ({size})"
    events = []
    link.pulls.changed.connect(lambda name, e: events.append((name, e.type)))
    notice.pull.click()
    assert not notice.pull.isEnabled() and not dialog.make.isEnabled()
    run(qloop, until(lambda: notice.ready, timeout=60, what="the base model"), timeout=70)
    assert ("acestep-v15-base-Q8_0", "done") in events  # the Library's own pull
    assert notice.model == "acestep-v15-base-Q8_0" and notice.pull.isHidden()
    assert "base model acestep-v15-base-Q8_0" in notice.text.text()
    dialog.choose(["drums"])
    dialog.make.click()
    run(qloop, until(lambda: dialog.result() == QDialog.Accepted, what="the stem sent"))
    (stem,) = [
        s for s in _node_songs(qloop, link).values() if s["request"].get("task") == "extract"
    ]
    assert stem["request"]["model"] == "acestep-v15-base-Q8_0"
    assert stem["request"]["track"] == "drums"
    page.shutdown()
    run(qloop, link.shutdown())


def test_a_refusal_the_app_could_not_foresee_is_shown_with_the_pull_offer(qtbot, qloop, turbo_node):
    """The dialog opened before the app had read the node's models: it sends, the node
    refuses (no base model), the dialog shows the node's words and then offers the pull."""
    link, page = _page(qtbot, qloop, turbo_node.url)

    async def pull(name):
        return [e async for e in link.connection.client.pull(name)]

    assert run(qloop, pull("acestep-v15-turbo"), timeout=60)[-1].type == "done"
    song = _song(qloop, link, {"caption": "lofi piano", "duration": 10})
    link.models.listed = []  # not read yet
    page.select(song.id, 1)
    dialog = page.open_stems()
    assert dialog.notice.ready and dialog.make.isEnabled()
    dialog.make.click()
    run(qloop, until(lambda: not dialog.notice.ready, what="the node's refusal"))
    assert "needs a base model" in dialog.notice.text.text()
    assert "cantor pull acestep-v15-base" in dialog.notice.text.text()
    assert dialog.result() != QDialog.Accepted and not dialog.make.isEnabled()
    run(qloop, until(lambda: not dialog.notice.pull.isHidden(), what="the pull offer"))
    assert dialog.notice.pull.text().startswith("Download it (")
    assert "needs a base model" in dialog.notice.text.text()  # the node's words stay
    assert not [
        s for s in _node_songs(qloop, link).values() if s["request"].get("task") == "extract"
    ]  # nothing was queued
    page.shutdown()
    run(qloop, link.shutdown())


def test_add_a_layer_takes_the_selection_and_complete_names_the_part(qtbot, qloop, node):
    from PySide6.QtCore import QPoint, Qt

    link, page = _page(qtbot, qloop, node.url)
    song = _song(qloop, link, {"caption": "lofi piano rain", "duration": 20, "model": "sketch"})
    page.show()
    qtbot.waitExposed(page)
    page.select(song.id, 1)
    editor = page.editor
    assert page.layer.isEnabled() and page.stems.isEnabled()
    x5, x9 = int(editor.x_of(5.0)), int(editor.x_of(9.0))
    qtbot.mousePress(editor, Qt.LeftButton, pos=QPoint(x5, 40))
    qtbot.mouseMove(editor, QPoint(x9, 40))
    qtbot.mouseRelease(editor, Qt.LeftButton, pos=QPoint(x9, 40))
    start, end = editor.region
    layer = page.open_part("lego")
    assert layer.track.currentData() == "guitar" and layer.region.isChecked()
    assert not layer.go.isEnabled()  # a caption first
    layer.track.setCurrentIndex(TRACKS.index("brass"))
    layer.caption.setText("muted trumpet line")
    assert layer.go.isEnabled()
    layer.go.click()
    run(qloop, until(lambda: layer.result() == QDialog.Accepted, what="the layer sent"))
    page.select(song.id, 1)  # the list changed: the new version came
    complete = page.open_part("complete")
    assert complete.region is None and complete.caption.text() == "lofi piano rain"
    complete.track.setCurrentIndex(TRACKS.index("keyboard"))
    complete.caption.setText("a full band around the piano")
    complete.go.click()
    run(qloop, until(lambda: complete.result() == QDialog.Accepted, what="complete sent"))
    recorded = {s["request"].get("task"): s["request"] for s in _node_songs(qloop, link).values()}
    lego = recorded["lego"]
    assert lego["track"] == "brass" and lego["caption"] == "muted trumpet line"
    assert lego["region"] == {"start": start, "end": end} and abs(start - 5) <= 0.3
    assert lego["source"] == {"song": song.id, "take": 1} and lego["model"] == "sketch"
    done = recorded["complete"]
    assert done["track"] == "keyboard" and done["caption"] == "a full band around the piano"
    assert "region" not in done
    # without a selection a layer covers the whole song
    page.select(song.id, 1)
    editor.clear()
    whole = page.open_part("lego")
    assert not whole.region.isChecked() and not whole.region.isEnabled()
    whole.caption.setText("shaker")
    assert "region" not in whole.request()
    whole.reject()
    page.shutdown()
    run(qloop, link.shutdown())
