"""Library against real nodes: the catalogue, a pull with live typed progress, pause and
resume (the node's downloader carries on from the .part file), a failed download offering
Retry, discarding partial files through the node, import by path (this home's node) and by
upload (a node of another home), the Hugging Face token kept by the node, the model
recommended for the node's machine."""

from __future__ import annotations

import base64

import pytest

from support.ui import run, until

from cantor_desktop.models import gguf
from cantor_desktop.models.events import PullEvent
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.library import LibraryPage

MODEL = "acestep-v15-turbo-Q8_0"
DIT = "acestep-v15-turbo-Q8_0.gguf"
SIZE = 8 * 1024 * 1024


@pytest.fixture
def small_lm(cantor_home):
    """The hub's set has the 0.6B language model: the node picks that size (not by RAM)."""
    (cantor_home / "node.toml").write_text('[models]\nlm = "0.6B"\n')


@pytest.fixture
def hub(monkeypatch, small_lm):
    from support.hub import ModelHub

    with ModelHub() as h:
        for name in h.add_set(size=SIZE):
            h.cdn.throttle(h.cdn_path(name), 4 * 1024 * 1024)
        monkeypatch.setenv("HF_ENDPOINT", h.base_url)
        yield h


def _page(qtbot, qloop, url: str) -> tuple[NodeLink, LibraryPage]:
    link = NodeLink(url=url, start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    run(qloop, link.connection.open())
    run(qloop, until(lambda: MODEL in page.rows or len(page.rows) > 1, what="the catalogue"))
    return link, page


def _buttons(page: LibraryPage, name: str) -> list[str]:
    from PySide6.QtWidgets import QPushButton

    cell = page.table.cellWidget(page.rows[name], 6)
    return [b.text() for b in cell.findChildren(QPushButton)]


def _click(page: LibraryPage, name: str, label: str) -> None:
    from PySide6.QtWidgets import QPushButton

    cell = page.table.cellWidget(page.rows[name], 6)
    next(b for b in cell.findChildren(QPushButton) if b.text() == label).click()


def _parts(home) -> list[str]:
    folder = home / "models" / "acestep"
    return sorted(p.name for p in folder.glob("*.part")) if folder.exists() else []


def test_pull_pause_resume_from_the_part_file(qtbot, qloop, hub, node, cantor_home):
    link, page = _page(qtbot, qloop, node.url)
    row = page.rows[MODEL]
    assert "to get" in page.table.item(row, 1).text()
    events: list[PullEvent] = []
    link.pulls.changed.connect(lambda name, e: events.append(e))
    page.pull(MODEL)
    assert _buttons(page, MODEL) == ["Pause", "Cancel"]
    run(
        qloop,
        until(
            lambda: any(e.file == DIT and e.file_received > SIZE // 4 for e in events),
            what="a quarter of the first file",
        ),
    )
    assert all(isinstance(e, PullEvent) for e in events)  # typed, node to page
    assert [e.type for e in events][:2] == ["catalogue", "plan"]
    assert "MiB /" in page._bar(row).format() and page.table.item(row, 4).text().endswith("/s")
    page.pause(MODEL)
    run(qloop, until(lambda: any(e.type == "paused" for e in events), what="pause"))
    run(qloop, until(lambda: page.table.item(row, 2).text() == "paused", what="paused state"))
    run(qloop, until(lambda: _buttons(page, MODEL) == ["Resume", "Discard"], what="Resume"))
    assert _parts(cantor_home)
    before = len(hub.cdn.requests_for(hub.cdn_path(DIT)))
    events.clear()
    _click(page, MODEL, "Resume")  # pulling again continues the .part file
    run(qloop, until(lambda: any(e.type == "done" for e in events), timeout=60, what="the files"))
    assert sum(e.type == "file_done" for e in events) == 4  # DiT, text encoder, VAE, LM
    ranges = [r.header("range") for r in hub.cdn.requests_for(hub.cdn_path(DIT))[before:]]
    assert any(r and r.startswith("bytes=") and r != "bytes=0-" for r in ranges), ranges
    run(qloop, until(lambda: _buttons(page, MODEL) == ["Remove"], what="Remove"))
    assert page.table.item(row, 2).text() == "ready"
    run(qloop, link.shutdown())


def test_a_failed_download_offers_retry_and_retry_finishes_it(qtbot, qloop, hub, node, cantor_home):
    hub.cdn.fail(hub.cdn_path(DIT), 404, times=1)  # the CDN fails once
    link, page = _page(qtbot, qloop, node.url)
    events: list[PullEvent] = []
    link.pulls.changed.connect(lambda name, e: events.append(e))
    reloads: list[int] = []
    link.models.loaded.connect(lambda _m: reloads.append(len(events)))
    page.pull(MODEL)
    run(qloop, until(lambda: any(e.type == "failed" for e in events), what="the failure"))
    row = page.rows[MODEL]
    assert page.table.item(row, 2).text() == "failed"
    assert "HTTP 404" in page.table.item(row, 2).toolTip()
    assert _buttons(page, MODEL) == ["Retry"]  # no Pause, no Cancel
    assert (
        page.message.text().startswith(f"Could not download {MODEL}: ")
        and page.message.property("cantorTone") == "danger"
    )
    run(qloop, until(lambda: any(n == len(events) for n in reloads), what="the list again"))
    assert _buttons(page, MODEL) == ["Retry"]  # still, after the list reloads
    events.clear()
    _click(page, MODEL, "Retry")
    run(
        qloop,
        until(lambda: any(e.is_terminal for e in events), timeout=60, what="the retry"),
        timeout=70,
    )
    assert events[-1].type == "done", events[-1]
    run(qloop, until(lambda: _buttons(page, MODEL) == ["Remove"], what="Remove"))
    assert not _parts(cantor_home)
    run(qloop, link.shutdown())


def test_discard_removes_the_partial_files_through_the_node(qtbot, qloop, hub, node, cantor_home):
    link, page = _page(qtbot, qloop, node.url)
    events: list[PullEvent] = []
    link.pulls.changed.connect(lambda name, e: events.append(e))
    page.pull(MODEL)
    run(qloop, until(lambda: any(e.file_received > SIZE // 4 for e in events), what="bytes"))
    _click(page, MODEL, "Cancel")  # stop, then delete what arrived
    run(
        qloop,
        until(lambda: "partly downloaded file" in page.message.text(), what="the discard"),
        timeout=30,
    )
    assert not _parts(cantor_home)
    assert (cantor_home / "models" / "acestep").exists()
    run(qloop, until(lambda: _buttons(page, MODEL) == ["Download"], what="Download again"))
    page.cancel(MODEL)  # nothing left: it says so, nothing fails
    run(
        qloop,
        until(
            lambda: "nothing partly downloaded" in page.message.text(), what="nothing to discard"
        ),
    )
    run(qloop, link.shutdown())


def test_a_pull_whose_engine_step_failed_shows_the_model_ready_and_what_to_do(qtbot, qloop):
    """The node's final ``done`` event with engine_ready false: the row reads ready and
    the page says what is missing and where to go next."""
    from cantor_desktop.views.library import done_message

    link = NodeLink(url="http://127.0.0.1:9", start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    page.set_models(
        [
            {
                "name": MODEL,
                "state": "not downloaded",
                "size_bytes": 0,
                "download_bytes": SIZE,
                "variant": "turbo",
                "quant": "Q8_0",
            }
        ]
    )
    event = PullEvent(
        "done", MODEL, engine_ready=False, engine_error="no backend runs on this machine."
    )
    page.on_pull_event(MODEL, event)
    assert page.table.item(page.rows[MODEL], 2).text() == "ready"
    assert page.message.text() == done_message(MODEL, event)
    assert done_message(MODEL, event) == (
        f"{MODEL}: Model ready. No engine yet: no backend runs on this machine "
        "— Hardware & Backends → Find the best backend"
    )
    assert done_message(MODEL, PullEvent("done", MODEL, engine_ready=True)).endswith("ready.")


@pytest.mark.parametrize("width", [680, 1000])
def test_the_action_column_stays_in_view_and_long_names_elide(qtbot, qloop, width):
    """About 900 px of window leaves the table ~650 px: no sideways scrolling, actions seen."""
    from PySide6.QtCore import Qt

    link = NodeLink(url="http://127.0.0.1:9", start_child=False)
    page = LibraryPage(link)
    qtbot.addWidget(page)
    page.set_models(
        [
            {
                "name": f"{MODEL}-with-a-very-long-suffix-{i}",
                "state": "partial",
                "size_bytes": SIZE,
                "download_bytes": SIZE,
                "display_name": "ACE-Step 1.5 Turbo, a long title",
            }
            for i in range(3)
        ]
    )
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
    # both buttons of a stopped download fit in the action column
    cell = table.cellWidget(0, 6)
    assert cell.sizeHint().width() <= h.sectionSize(6)


def test_import_by_path_through_this_homes_node(qtbot, qloop, node, cantor_home, tmp_path):
    dit = gguf.write_header_only(tmp_path / "my-dit.gguf", gguf.ARCH_DIT)
    (tmp_path / "broken.gguf").write_bytes(b"GGUF\x03")
    link, page = _page(qtbot, qloop, node.url)
    assert not link.connection.remote
    page.import_files([str(dit), str(tmp_path / "broken.gguf")])
    run(qloop, until(lambda: "my-dit" in page.rows, what="the imported model"))
    run(qloop, until(lambda: page.message.text().startswith("Imported 1 of 2"), what="outcome"))
    assert "broken.gguf: " in page.message.text() and "GGUF" in page.message.text()
    registry = (cantor_home / "models" / "library.json").read_text()
    assert str(dit) in registry  # adopted where it is
    assert not (cantor_home / "models" / "acestep" / "my-dit.gguf").exists()
    run(qloop, link.shutdown())


def test_import_to_a_remote_node_uploads_into_its_models_folder(
    qtbot, qloop, cantor_home, tmp_path
):
    from cantor_desktop.system.secrets import set_secret
    from cantor_desktop.ui.node_link import REMOTE_TOKEN
    from support.hub import model_bytes
    from test_node_library_routes import their_node

    theirs = their_node(tmp_path)
    run(qloop, theirs.start())
    try:
        set_secret(REMOTE_TOKEN, theirs.proc.token)
        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / DIT).write_bytes(model_bytes(DIT, 2 * 1024 * 1024))
        (mine / "photo.gguf").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 5000)
        link, page = _page(qtbot, qloop, theirs.url)
        assert link.connection.remote
        page.import_files([str(mine / DIT), str(mine / "photo.gguf")])
        run(
            qloop,
            until(lambda: page.message.text().startswith("Imported"), what="outcome"),
            timeout=30,
        )
        text = page.message.text()
        assert text.startswith("Imported 1 of 2 file(s) into the node's models folder"), text
        assert "photo.gguf: " in text and "not a GGUF" in text
        landed = theirs.home / "models" / "acestep" / DIT
        assert landed.read_bytes() == (mine / DIT).read_bytes()
        assert sorted(p.name for p in landed.parent.iterdir()) == [DIT]  # photo never sent
        assert not (cantor_home / "models").exists() or not any(
            p.is_file() for p in (cantor_home / "models").rglob("*")
        )
        assert "on the node's machine" in page.disk.text()
        run(qloop, link.shutdown())
    finally:
        run(qloop, theirs.stop())


def test_the_hf_token_field_stores_on_the_node_and_never_shows_it(
    qtbot, qloop, cantor_home, tmp_path
):
    from cantor_desktop.system import secrets
    from cantor_desktop.ui.node_link import REMOTE_TOKEN
    from test_node_library_routes import their_node

    secret = "hf_" + "x7" * 20
    theirs = their_node(tmp_path)
    run(qloop, theirs.start())
    try:
        secrets.set_secret(REMOTE_TOKEN, theirs.proc.token)
        link, page = _page(qtbot, qloop, theirs.url)
        run(qloop, until(lambda: page.hf_state.text() == "not set", what="the token state"))
        assert page.hf_token.text() == "" and not page.hf_remove.isEnabled()
        page.hf_token.setText(secret)
        page.hf_save.click()
        run(qloop, until(lambda: page.hf_state.text() == "✓ set", what="saved"))
        assert page.hf_token.text() == "" and page.hf_remove.isEnabled()
        assert "node's machine" in page.message.text()
        status = run(qloop, link.connection.client.hf_token())
        assert status == {"set": True, "source": "keyring", "note": ""}
        assert secrets.get_secret(secrets.HF_TOKEN) is None  # not in this machine's keyring
        stored = (tmp_path / "their-xdg" / "python_keyring" / "keyring_pass.cfg").read_text()
        assert base64.b64encode(secret.encode()).decode() in stored  # in the node's keyring
        page.hf_remove.click()
        run(qloop, until(lambda: page.hf_state.text() == "not set", what="removed"))
        page.hf_token.setText("bad token with spaces")
        page.hf_save.click()
        run(
            qloop,
            until(
                lambda: page.message.text().startswith("Could not save the token"),
                what="the refusal",
            ),
        )
        assert page.message.property("cantorTone") == "danger"
        run(qloop, link.shutdown())
    finally:
        run(qloop, theirs.stop())


def test_the_recommended_model_is_marked_from_the_nodes_machine(qtbot, qloop, node):
    """The node's /v1/system of this machine (no GPU here): Turbo Q8_0 is marked and the
    banner says why; a machine with a large GPU moves the mark to XL Turbo."""
    from cantor_desktop.models.advice import Machine, recommend

    link, page = _page(qtbot, qloop, node.url)
    run(
        qloop,
        until(
            lambda: link.backends.system and page.view_model.recommended, what="the recommendation"
        ),
    )
    expected = recommend(
        Machine.from_system(link.backends.system), [n for n in page.rows if n != "sketch"]
    )
    assert page.view_model.recommended == expected
    row = page.rows[expected.name]
    assert page.table.item(row, 0).text().startswith("★ ")
    assert "Recommended for this machine" in page.table.item(row, 0).toolTip()
    assert page.table.item(row, 0).font().bold()
    assert expected.reason in page.advice_text.text() and page.advice.isVisibleTo(page)
    assert not page.table.isRowHidden(row)
    others = [n for n in page.rows if n not in (expected.name, "sketch")]
    assert all("★" not in page.table.item(page.rows[n], 0).text() for n in others)
    # every row says what it is for
    turbo = page.table.item(page.rows[MODEL], 0)
    assert "8 steps" in turbo.text() and "Q8_0" in turbo.toolTip()
    # a machine with a 24 GiB GPU (the same answer, another machine)
    gpu = {
        **link.backends.system,
        "hardware": {
            **link.backends.system["hardware"],
            "gpus": [{"name": "big", "vendor": "nvidia", "vram_mib": 24576}],
        },
        "families": {"acestep": {"pinned": "cuda12", "default": "cuda12"}},
    }
    link.backends.system = gpu
    link.backends.system_loaded.emit(gpu)
    assert page.view_model.recommended.name == "acestep-v15-xl-turbo-Q8_0"
    assert page.table.item(page.rows["acestep-v15-xl-turbo-Q8_0"], 0).text().startswith("★ ")
    assert "★" not in page.table.item(row, 0).text()
    # quantisations other than Q8_0 are folded away until asked for
    q4 = page.rows["acestep-v15-turbo-Q4_K_M"]
    assert page.table.isRowHidden(q4)
    page.every_quant.setChecked(True)
    assert not page.table.isRowHidden(q4)
    run(qloop, link.shutdown())


def test_sizes_are_named_in_the_binary_units_they_are_counted_in():
    # the app said "23.5 GB" for 25,276,518,400 bytes (23.5 GiB, 25.3 GB) while the CLI
    # said "23.5 GiB": the same figure, named correctly in both
    from cantor_desktop.units import human_size
    from cantor_desktop.views.transfer import human_bytes

    assert human_bytes(25_276_518_400) == "23.5 GiB" == human_size(25_276_518_400)
    assert human_bytes(48 * 1024 * 1024) == "48.0 MiB"
    assert human_bytes(512) == "512 B" and human_bytes(None) == "?"


def test_models_on_this_machine_are_adopted_from_the_hugging_face_cache(
    qtbot, qloop, cantor_home, tmp_path, monkeypatch
):
    """The Library's "Models on this machine…": the node finds a VAE in the Hugging Face
    cache and a text encoder in a folder the musician adds, the musician adopts them, the
    library lists them, and the cache's file is the library's (one copy on disk)."""
    import hashlib

    from support.ui import start_node

    from cantor_desktop.models import catalogue as cat

    hf_home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    head = gguf.write_header_only(tmp_path / "vae-head.gguf", gguf.ARCH_VAE).read_bytes()
    data = head + b"\x01" * 4096
    repo = hf_home / "hub" / ("models--" + cat.REPO.replace("/", "--"))
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    snapshot = repo / "snapshots" / ("1" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "vae-BF16.gguf").symlink_to(f"../../blobs/{blob.name}")
    node = start_node()
    try:
        link, page = _page(qtbot, qloop, node.url)
        dialog = page.find_elsewhere()
        run(qloop, until(lambda: dialog.table.rowCount() == 1, what="the cache's file"))
        assert dialog.table.item(0, 0).text() == "vae-BF16.gguf"
        assert dialog.table.item(0, 1).text() == "Hugging Face cache"
        assert dialog.picked() == [str(snapshot / "vae-BF16.gguf")]
        assert "you need not download" in dialog.summary.text()
        dialog.adopt_button.click()
        run(qloop, until(lambda: page.message.text().startswith("Adopted"), what="outcome"))
        assert page.message.text().startswith("Adopted 1 of 1 file(s)")
        run(
            qloop,
            until(
                lambda: (
                    dialog.table.rowCount() == 1
                    and dialog.table.item(0, 3).text() == "Already in the library"
                ),
                what="the file in the library",
            ),
        )
        assert not dialog.adopt_button.isEnabled()
        mine = cantor_home / "models" / "acestep" / "vae-BF16.gguf"
        assert mine.stat().st_ino == blob.stat().st_ino
        dialog.close()
        run(qloop, link.shutdown())
    finally:
        node.stop()
