"""The app connected to a member of a real pool (a real redis-server, three real nodes with
Sketch engines; tests/support/pool_nodes.py), as an app on another machine is: with the
pool's token. Hardware & Backends lists every member with its backend and models, Compose
sends a song to the member chosen and it is made there, and Redis stopped shows "pool
unreachable" on the page, the status line and the tray until it is back."""

from __future__ import annotations

import pytest
from support.pool_nodes import TOKEN, TURBO, ThreeNodePool
from support.redis_server import require
from support.ui import run, until

from cantor_desktop.system.secrets import set_secret
from cantor_desktop.song.record import SongState
from cantor_desktop.ui.node_link import REMOTE_TOKEN, NodeLink

# one pool for the module's tests (the last one stops its Redis): one xdist worker runs them
pytestmark = pytest.mark.xdist_group("test_ui_pool")


@pytest.fixture(scope="module")
def pool3(tmp_path_factory):
    require()
    with ThreeNodePool(tmp_path_factory.mktemp("uipool")) as (redis, members):
        yield redis, members


def connected(qloop, member) -> NodeLink:
    """An app's link to ``member`` with the pool's token, connected, its pool read."""
    set_secret(REMOTE_TOKEN, TOKEN)
    link = NodeLink(url=member.url, start_child=False)
    run(qloop, link.connection.open())
    assert link.connection.state == "idle", link.connection.detail
    run(
        qloop, until(lambda: link.pool.view is not None and link.pool.view.members, what="the pool")
    )
    return link


def usable_rows(combo) -> set[str]:
    """The data of the rows of a combo box's list that can be picked (the rest greyed)."""
    from PySide6.QtCore import Qt

    model = combo.model()
    return {
        combo.itemData(i)
        for i in range(combo.count())
        if model.flags(model.index(i, 0)) & Qt.ItemIsEnabled
    }


def test_hardware_page_lists_every_member_with_its_backend_and_models(qtbot, qloop, pool3):
    from cantor_desktop.ui.pages.hardware import HardwarePage

    _redis, (alpha, _bravo, _charlie) = pool3
    link = connected(qloop, alpha)
    page = HardwarePage(link)
    qtbot.addWidget(page)
    page.show()
    panel = page.pool
    run(qloop, until(lambda: len(panel.names()) == 3, what="three members listed"))
    assert panel.isVisible()
    assert panel.names() == ["alpha", "bravo", "charlie"]
    rows = {
        panel.names()[r]: {c: panel.cell(r, c) for c in ("Node", "State", "Backend", "Models")}
        for r in range(3)
    }
    assert rows["alpha"]["Node"] == "alpha (this node)"
    assert {r["State"] for r in rows.values()} == {"alive"}
    assert rows["alpha"]["Models"] == rows["bravo"]["Models"] == "sketch"
    assert rows["charlie"]["Models"] == f"{TURBO}, sketch"
    assert rows["alpha"]["Backend"] == rows["bravo"]["Backend"] == "Sketch only"
    assert rows["charlie"]["Backend"] not in ("Sketch only", "—", "")  # its ACE-Step backend
    assert panel.problem.isHidden()
    assert "3 members" in panel.summary.text()
    assert "pool" not in link.status_line()
    # what the app polls: members and lanes without the songs' records; the state alone
    lean = run(qloop, link.connection.client.pool(songs=False))
    assert len(lean["members"]) == 3 and "songs" not in lean and "lanes" in lean
    brief = run(qloop, link.connection.client.pool(brief=True))
    assert brief["state"] == "connected" and brief["members"] == 3 and "lanes" not in brief
    assert "songs" in run(
        qloop, link.connection.client.pool()
    )  # `cantor pool status`'s whole answer
    run(qloop, link.shutdown())


def test_compose_sends_the_song_to_the_member_chosen_and_it_is_made_there(qtbot, qloop, pool3):
    from cantor_desktop.ui.pages.compose import ComposePage
    from cantor_desktop.views.compose import ANY_NODE
    from cantor_desktop.views.song_records import facts

    _redis, (alpha, _bravo, _charlie) = pool3
    link = connected(qloop, alpha)
    page = ComposePage(link)
    qtbot.addWidget(page)
    assert page._song_grid.isRowVisible(page.node)
    names = {page.node.itemData(i) for i in range(page.node.count())}
    assert page.node.itemText(0) == ANY_NODE and names == {"", "alpha", "bravo", "charlie"}
    assert usable_rows(page.node) == names
    # a model only charlie has (alpha, the node the app drives, has it not): the others
    # are greyed out, saying why; choosing one anyway is named on the form
    turbo = page.model.findData(TURBO)
    assert turbo > 0 and "charlie" in page.model.itemText(turbo)
    page.model.setCurrentIndex(turbo)
    assert usable_rows(page.node) == {"", "charlie"}  # any member, or the one that has it
    assert page.node.itemText(page.node.findData("bravo")) == f"bravo — no {TURBO}"
    page.node.setCurrentIndex(page.node.findData("bravo"))
    assert not page.generate.isEnabled()
    assert f"Node bravo does not have {TURBO}" in page.problem.text()
    # Sketch songs sent to bravo are made on bravo (three: any member could take one)
    page.model.setCurrentIndex(page.model.findData("sketch"))
    page.node.setCurrentIndex(page.node.findData("bravo"))
    page.instrumental.setChecked(True)
    page.duration.setText("10")
    ids: list[str] = []
    page.generated.connect(ids.append)
    for k in range(3):
        page.caption.setPlainText(f"lofi piano for bravo {k}")
        assert page.generate.isEnabled(), page.problem.text()
        page.generate.click()
        run(qloop, until(lambda k=k: len(ids) > k, what="the song to be queued"))
    songs = run(
        qloop,
        until(
            lambda: (
                all((s := link.songs.get(i)) is not None and s.is_finished for i in ids)
                and [link.songs.by_id[i] for i in ids]
            ),
            timeout=120,
            what="the songs to be made",
        ),
    )
    assert [s.state for s in songs] == [SongState.DONE] * 3, [s.error for s in songs]
    assert {s.node["name"] for s in songs} == {"bravo"}
    assert "on bravo" in facts(songs[0], songs[0].takes[0])  # Songs says where it was made
    run(qloop, link.shutdown())


def test_redis_stopped_shows_pool_unreachable_until_it_is_back(qtbot, qloop, pool3):
    """(The module's last test: it stops the pool's Redis.)"""
    from cantor_desktop.ui.pages.compose import ComposePage
    from cantor_desktop.ui.tray import Tray
    from cantor_desktop.ui.window import MainWindow

    redis, (alpha, bravo, _charlie) = pool3
    link = connected(qloop, alpha)
    window = MainWindow(link)
    qtbot.addWidget(window)
    window.populate()
    window.show()
    window.show_page("Hardware & Backends")
    page = window.hardware
    tray = Tray(link)
    # another app, on bravo, with no page of the pool open: it reads only the pool's state
    other = connected(qloop, bravo)
    banner = page.pool.problem
    assert banner.isHidden() and "pool unreachable" not in tray.menu.status.text()
    redis.kill9()
    try:
        run(qloop, until(lambda: not banner.isHidden(), timeout=30, what="pool unreachable"))
        assert banner.text().startswith(f"Pool unreachable: {redis.url} does not answer")
        assert "pool unreachable" in link.status_line()
        assert "pool unreachable" in tray.menu.status.text()  # the tray's line (and tooltip)
        assert "pool unreachable" in window.state_label.text()  # the status bar
        assert window.dot.property("cantorTone") == "warning"
        assert page.pool.cell(0, "State") == "unknown"
        # a song asked for meanwhile: the node's reason on the form, nothing queued
        compose = ComposePage(link)
        qtbot.addWidget(compose)
        compose.caption.setPlainText("while Redis is away")
        compose.instrumental.setChecked(True)
        compose.generate.click()
        run(qloop, until(lambda: "Could not queue" in compose.problem.text(), what="refusal"))
        assert "pool unreachable" in compose.problem.text()
        run(qloop, until(lambda: "pool unreachable" in other.status_line(), timeout=30))
        assert [m.name for m in other.pool.view.members] == ["alpha", "bravo", "charlie"]  # kept
    finally:
        redis.start()  # the same folder and port: the members reconnect by themselves
    run(qloop, until(lambda: banner.isHidden(), timeout=60, what="the pool to be back"))
    assert "pool unreachable" not in tray.menu.status.text()
    assert "pool" not in window.state_label.text()
    assert window.dot.property("cantorTone") != "warning"
    run(qloop, until(lambda: page.pool.cell(0, "State") == "alive", timeout=30, what="alive"))
    run(qloop, until(lambda: "pool" not in other.status_line(), timeout=30, what="bravo's"))
    run(qloop, other.shutdown())
    run(qloop, link.shutdown())
