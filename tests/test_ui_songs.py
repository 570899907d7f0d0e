"""Songs: model/view with many songs, waveform peaks cached, drag carries file URLs (copy)."""

from __future__ import annotations

import os

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt

from support.node import wait_for
from support.ui import make_wav, run, until

from cantor_desktop.ui import waveform
from cantor_desktop.ui.node_link import NodeLink
from cantor_desktop.ui.pages.songs import SongsPage
from cantor_desktop.song.record import Song


def record(i: int, path: str | None = None, *more: str) -> Song:
    return Song.from_json(
        {
            "id": f"{i:016x}",
            "state": "done",
            "created": 1_700_000_000 + i,
            "request": {
                "caption": f"song {i}",
                "model": "sketch",
                "seed": -1,
                "bpm": 90 + i % 100,
                "lyrics": "[Instrumental]",
            },
            "takes": [
                {"n": n + 1, "audio": a, "seed": 1000 + i + n, "duration": 12.5}
                for n, a in enumerate([path, *more])
                if a
            ],
        }
    )


def page(qtbot) -> SongsPage:
    p = SongsPage(NodeLink(start_child=False))
    qtbot.addWidget(p)
    p.resize(900, 600)
    return p


def test_songs_are_newest_first_and_a_drag_carries_file_urls_with_copy(qtbot, tmp_path):
    a = make_wav(tmp_path / "a.wav")
    b = make_wav(tmp_path / "b.wav")
    p = page(qtbot)
    p.model.set_songs([record(1, a), record(2, b)])
    assert p.model.row(0).song.caption == "song 2" and p.model.row(0).take.seed == 1002
    p.view.selectionModel().select(p.model.index(1, 0), QItemSelectionModel.ClearAndSelect)
    mime = p.view.drag_mime_data()
    assert [u.toLocalFile() for u in mime.urls()] == [os.path.abspath(a)]
    assert all(u.isLocalFile() for u in mime.urls())
    assert p.view.defaultDropAction() == Qt.CopyAction
    assert p.model.flags(p.model.index(0, 0)) & Qt.ItemIsDragEnabled


def test_waveform_peaks_are_computed_in_the_background_once_and_cached(qtbot, qloop, tmp_path):
    path = make_wav(tmp_path / "w.wav", seconds=3.0)
    p = page(qtbot)
    p.model.set_songs([record(1, path)])
    p.show()
    qtbot.waitExposed(p)
    ready = []
    p.store.ready.connect(ready.append)
    run(qloop, until(lambda: ready, what="waveform"))
    peaks = p.store.get(path)
    assert peaks is not None and len(peaks) == waveform.BINS
    assert peaks[-1] > peaks[0] * 3  # the test tone swells: the shape is the file's
    assert waveform.cached_peaks(path) is not None
    assert any(waveform.cache_dir().iterdir())
    from cantor_desktop.ui.theme import colours

    image = p.view.viewport().grab().toImage()
    wave = colours().wave
    painted = sum(
        1
        for x in range(0, image.width(), 2)
        for y in range(0, 64, 2)
        if image.pixelColor(x, y).name() == wave
    )
    assert painted > 10  # the waveform is painted


def test_ten_thousand_songs_reach_the_view_a_batch_at_a_time_as_it_scrolls(qtbot):
    """The page opens on the rows a screen needs, not 10,000: the model hands the view a
    batch, the view asks for more as it scrolls to the end, and a song far down the list
    is fetched when it is selected from elsewhere (the tray, Compose). The time it takes
    is a figure of bench/app.py."""
    p = page(qtbot)
    records = [record(i) for i in range(10_000)]
    p.show()
    qtbot.waitExposed(p)
    p.model.set_songs(records)
    batch = p.model.BATCH
    assert p.model.rowCount() == batch and p.model.canFetchMore()
    assert p.model.shown_songs() == 10_000 and p.count.text() == "10000 songs"
    assert p.model.row(0).song.caption == "song 9999"  # newest first
    bar = p.view.verticalScrollBar()
    for _ in range(3):  # the user scrolls to the end of what is there: more arrive
        bar.setValue(bar.maximum())
        qtbot.wait(20)
    assert p.model.rowCount() >= 2 * batch
    oldest = records[0].id
    assert p.model.row_of(oldest) == -1  # not handed to the view yet …
    p.select(oldest)  # … until it is asked for
    assert p.current().id == oldest and p.model.row_of(oldest) == 9_999
    captions = [p.model.row(n).song.caption for n in range(p.model.rowCount())]
    assert captions == [f"song {i}" for i in range(9_999, -1, -1)]  # every song, in order


def test_move_to_trash_removes_the_song(qtbot, tmp_path, monkeypatch):
    (tmp_path / "xdg").mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    path = make_wav(tmp_path / "t.wav")
    p = page(qtbot)
    p.model.set_songs([record(1, path)])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    moved = p.trash_selected(confirm=False)
    assert moved == [record(1).id]
    assert not os.path.exists(path) and p.model.rowCount() == 0


def test_play_without_an_audio_device_says_so(qtbot, tmp_path):
    from PySide6.QtMultimedia import QMediaDevices

    p = page(qtbot)
    p.model.set_songs([record(1, make_wav(tmp_path / "p.wav"))])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    p.toggle_play()
    if QMediaDevices.audioOutputs():
        assert p.play.text() == "Pause"
    else:
        assert p.note.text() == "Could not play: there is no audio output device"
        assert p.play.text() == "Play"


def test_decode_for_the_audio_sink_keeps_the_length(tmp_path):
    from cantor_desktop.ui.player import decode

    path = make_wav(tmp_path / "d.wav", seconds=2.0, rate=44100)
    pcm = decode(path)
    assert (pcm.rate, pcm.channels) == (44100, 2)
    assert len(pcm.data) == 2 * 44100 * 2 * 2 and pcm.duration_ms == 2000
    mixed = decode(path, rate=48000, channels=1)  # a device that wants another format
    assert (mixed.rate, mixed.channels) == (48000, 1)
    assert abs(mixed.duration_ms - 2000) <= 1
    import numpy as np

    samples = np.frombuffer(mixed.data, dtype="<i2")
    assert 0.3 * 32767 < np.abs(samples).max() <= 32767  # the tone, not silence


def test_player_seek_and_stop_move_in_the_decoded_buffer(qtbot, tmp_path):
    from cantor_desktop.ui.player import Player, decode

    path = make_wav(tmp_path / "s.wav", seconds=2.0, rate=44100)
    player = Player()
    player.path = path
    positions = []
    player.position_changed.connect(positions.append)
    player._on_decoded(path, decode(path))  # what the decoder thread hands over
    assert player.duration_ms == 2000 and player.state == "stopped"
    player.seek(1500)
    assert positions[-1] == 1500 and player.position_ms() == 1500
    assert player._buffer.pos() == int(1.5 * 44100) * 4
    player.stop()
    assert player._buffer.pos() == 0 and player.position_ms() == 0
    player.shutdown()


def test_a_song_whose_file_is_not_here_is_fetched_from_the_node_once(qtbot, qloop, node):
    """A node on another machine, played by one real node whose song path is not here."""
    import dataclasses

    from cantor_desktop.system.paths import paths

    link = NodeLink(url=node.url, start_child=False)
    p = SongsPage(link)
    qtbot.addWidget(p)
    p.resize(900, 600)
    run(qloop, link.connection.open())
    finished: list[str] = []
    link.songs.finished.connect(lambda song: finished.append(song.id))
    made = run(qloop, link.songs.submit({"caption": "far away", "duration": 10, "model": "sketch"}))
    # the song's own "done" event has been folded in (and its song_updated sent): nothing
    # about this song follows that could overwrite the row planted below. Its state alone
    # can read "done" earlier, from a list refresh, with the done event still to come.
    run(qloop, until(lambda: made.id in finished, timeout=60, what="the song's done event"))
    original = link.songs.by_id[made.id].path
    name = os.path.basename(original)
    song = link.songs.by_id[made.id]
    far = dataclasses.replace(
        song, takes=[dataclasses.replace(song.takes[0], audio=f"/no/such/node/disk/{name}")]
    )
    p.model.set_songs([far])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    assert p.play.isEnabled() and p.trash.isEnabled() and not p.reveal.isEnabled()
    assert p.view.drag_mime_data() is None  # nothing here yet: the fetch starts
    assert p.files.fetching(far)
    cached = paths().remote_songs_dir / name
    run(qloop, until(lambda: p.files.local(far), what="the fetched audio"))
    assert p.files.local(far) == str(cached)
    with open(original, "rb") as a, open(cached, "rb") as b:
        assert a.read() == b.read()
    mime = p.view.drag_mime_data()
    assert [u.toLocalFile() for u in mime.urls()] == [str(cached)]
    assert p.reveal.isEnabled() and p.copy.isEnabled()
    p.show()
    qtbot.waitExposed(p)
    run(qloop, until(lambda: p.store.known(str(cached)), what="the waveform of the copy"))
    # Move to trash: the node forgets the song and deletes its file; the copy goes too
    assert p.trash_selected(confirm=False) == [far.id]
    assert not cached.exists() and p.model.rowCount() == 0

    async def node_forgot():
        items = await link.connection.client.songs()
        return not any(d.get("id") == far.id for d in items)

    run(qloop, wait_for(node_forgot, what="the node to forget the song"), timeout=30)
    assert not os.path.exists(original)
    p.shutdown()
    run(qloop, link.shutdown())


def test_every_take_has_its_row_plays_drags_and_trash_takes_them_all(qtbot, tmp_path):
    """Takes 2 wrote _take1 and _take2, but Songs showed take 1 only, and trash left take 2."""
    os.makedirs(os.environ["XDG_DATA_HOME"], exist_ok=True)  # the trash lives there
    one, two = make_wav(tmp_path / "s_take1.wav"), make_wav(tmp_path / "s_take2.wav")
    for wav in (one, two):
        open(os.path.splitext(wav)[0] + ".json", "w").write("{}")
    other = make_wav(tmp_path / "other.wav")
    p = page(qtbot)
    p.model.set_songs([record(1, one, two), record(2, other)])
    rows = [p.model.row(n) for n in range(p.model.rowCount())]
    assert [(r.song.caption, r.take.n, r.first) for r in rows] == [
        ("song 2", 1, True),
        ("song 1", 1, True),
        ("song 1", 2, False),
    ]
    assert rows[2].label == "Take 2" and rows[2].take.seed == 1002
    # the second take drags its own file
    p.view.selectionModel().select(p.model.index(2, 0), QItemSelectionModel.ClearAndSelect)
    assert [u.toLocalFile() for u in p.view.drag_mime_data().urls()] == [os.path.abspath(two)]
    # trash from the second take's row takes the whole song: both takes and both sidecars
    assert p.trash_selected(confirm=False) == [record(1).id]
    assert not any(os.path.exists(f) for f in (one, two, one[:-4] + ".json", two[:-4] + ".json"))
    assert os.path.exists(other) and p.model.rowCount() == 1


def test_search_as_you_type_and_favourites(qtbot):
    p = page(qtbot)
    songs = [record(i) for i in range(5)]
    songs[3].request["caption"] = "dusty boom bap with vinyl crackle"
    songs[1].favourite = True
    p.model.set_songs(songs)
    qtbot.keyClicks(p.search, "VINYL  boom")
    assert [p.model.row(n).song.id for n in range(p.model.rowCount())] == [songs[3].id]
    assert p.count.text() == "1 of 5 songs"
    p.search.clear()
    qtbot.keyClicks(p.search, "93bpm")  # the tempo is searchable too
    assert [p.model.row(n).song.id for n in range(p.model.rowCount())] == [songs[3].id]
    p.search.clear()
    p.favourites.setChecked(True)
    assert [p.model.row(n).song.id for n in range(p.model.rowCount())] == [songs[1].id]
    p.favourites.setChecked(False)
    assert p.model.rowCount() == 5


def test_search_over_ten_thousand_songs_finds_every_match_and_keeps_the_selection(qtbot):
    """Each keystroke filters all 10,000 songs (how long it takes is bench/app.py's); a
    selected take that still matches stays selected."""
    p = page(qtbot)
    records = [record(i) for i in range(10_000)]
    p.model.set_songs(records)
    p.show()
    qtbot.waitExposed(p)
    p.select(record(9_990).id)
    for text in ("s", "so", "son", "song", "song 9", "song 99", "song 999"):
        p.search.setText(text)
        assert p.current() is not None and p.current().id == record(9_990).id, text
    assert p.model.shown_songs() == 19 and p.count.text() == "19 of 10000 songs"  # …999…
    p.search.setText("song 9999")
    assert [p.model.row(n).song.caption for n in range(p.model.rowCount())] == ["song 9999"]
    assert p.current() is None  # song 9990 no longer shows: nothing to act on
    assert not p.song_actions["cover"].isEnabled()
    p.search.setText("song 12")  # every word anywhere: 12 in the number or in "112bpm"
    from cantor_desktop.views.song_records import search_text

    expected = [r.id for r in records if "12" in search_text(r)]
    assert len(expected) > p.model.BATCH  # more than one batch: the rest as it scrolls
    assert p.model.shown_songs() == len(expected)
    p.search.clear()
    assert p.model.shown_songs() == 10_000


def test_each_keystroke_finds_what_a_search_from_scratch_finds(qtbot):
    """A keystroke reuses what the query before it found (and only looks for the word that
    changed): typed, taken back, and typed differently, every query shows exactly the songs
    that hold all its words."""
    from cantor_desktop.views.song_records import search_text

    p = page(qtbot)
    records = [record(i) for i in range(600)]
    for i, r in enumerate(records):
        r.request["caption"] = ["warm keys", "warm pads", "cold keys", "keys warm"][i % 4]
    p.model.set_songs(records)
    texts = {r.id: search_text(r) for r in records}

    def shown() -> list[str]:
        while p.model.canFetchMore(QModelIndex()):  # every row, not only the first batch
            p.model.fetchMore(QModelIndex())
        rows = [p.model.row(n) for n in range(p.model.rowCount())]
        return [r.song.id for r in rows if r.first]

    order = shown()
    assert sorted(order) == sorted(texts)

    def typed(query: str) -> None:
        p.search.setText(query)
        words = query.lower().split()
        want = [i for i in order if all(w in texts[i] for w in words)]
        assert shown() == want, query
        assert p.model.shown_songs() == len(want), query

    for sentence in ("warm keys 1", "keys warm", "song 12 warm", "warm k", "1 12 123"):
        for k in range(1, len(sentence) + 1):
            typed(sentence[:k])
        for k in range(len(sentence) - 1, 0, -1):
            typed(sentence[:k])
    for query in ("warm ke", "warm key", "warm keys", "warm keysz", "warm keys", "cold", ""):
        typed(query)


def test_rows_show_tempo_key_length_instrumental_and_model():
    from cantor_desktop.views.song_records import facts

    song = record(3, "/x/a.wav")
    song.request["key"] = "F# minor"
    assert facts(song, song.takes[0]) == [
        "93 BPM",
        "F♯ minor",  # keys.display: the app writes real sharps and flats
        "12 s",
        "instrumental",
        "sketch",
        "seed 1003",
    ]
    song.takes[0].bpm, song.takes[0].key = 120.0, "A minor"  # measured or filled by the LM
    assert facts(song, song.takes[0])[:2] == ["120 BPM", "A minor"]
    song.takes[0].key = "D# minor"  # an old sidecar's spelling
    assert facts(song, song.takes[0])[:2] == ["120 BPM", "E♭ minor"]
    # in a pool the record names the member that made it: the row says so, search finds it
    from cantor_desktop.views.song_records import search_text

    assert not any(f.startswith("on ") for f in facts(song, song.takes[0]))
    song.node = {"id": "3fa2", "name": "studio-b", "shared": False}
    assert facts(song, song.takes[0])[:2] == ["on studio-b", "120 BPM"]
    assert "studio-b" in search_text(song)


def test_a_drop_target_that_answers_move_costs_the_user_nothing(qtbot, tmp_path, monkeypatch):
    """Drag-out offers copy only, and whatever the target answers (a raw XDND target may
    answer "move") is never acted on: the song's file stays, and so does its row."""
    from PySide6.QtGui import QDrag

    path = make_wav(tmp_path / "keep.wav")
    original = open(path, "rb").read()
    p = page(qtbot)
    p.model.set_songs([record(1, path)])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    offered = []

    def exec_(self, actions=Qt.CopyAction, *rest):  # Qt's drag loop cannot run offscreen:
        offered.append(actions)  # here the target answers "move"
        return Qt.MoveAction

    monkeypatch.setattr(QDrag, "exec", exec_)
    p.view._drag()
    assert offered == [Qt.CopyAction] and p.view.last_drag_result == Qt.MoveAction
    assert open(path, "rb").read() == original and p.model.rowCount() == 1


def test_export_from_the_songs_page_with_choices_remembered(qtbot, qloop, tmp_path):
    """Export… a take to FLAC at 44.1 kHz and −14 LUFS; the original untouched; the choices
    kept; and with "dragged out exported" on, a drag hands out the exported file."""
    import soundfile as sf

    from cantor_desktop import config

    path = make_wav(tmp_path / "song.wav", seconds=4.0, rate=48000)
    original = open(path, "rb").read()
    p = page(qtbot)
    p.model.set_songs([record(1, path)])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    assert p.export.isEnabled()
    dialog = p.export_selected()
    dialog.format.setCurrentIndex(dialog.format.findData("flac"))
    dialog.rate.setCurrentIndex(dialog.rate.findData(44100))
    dialog.loudness.setCurrentIndex(1)  # −14 LUFS
    out = tmp_path / "exports"
    dialog.folder.setText(str(out))
    dialog.drag.setChecked(True)
    dialog.start()
    run(qloop, until(lambda: dialog.results, timeout=60, what="the export"))
    made = dialog.results[0].path
    info = sf.info(str(made))
    assert made.parent == out and made.suffix == ".flac" and info.samplerate == 44100
    assert made.name.startswith("song-1_91bpm_") and made.name.endswith("_take1.flac")
    assert abs(dialog.results[0].loudness + 14) < 0.5
    assert open(path, "rb").read() == original
    cfg = config.load()
    assert (cfg.get("export.format"), cfg.get("export.rate"), cfg.get("export.drag")) == (
        "flac",
        44100,
        True,
    )
    dialog.close()
    # dragging now hands out the exported file once it is ready (prepared on selection)
    p._update_buttons()
    run(
        qloop,
        until(
            lambda: p.view.drag_paths() and p.view.drag_paths()[0].endswith(".flac"),
            timeout=60,
            what="the exported file for the drag",
        ),
    )
    assert open(path, "rb").read() == original


def test_versions_stay_with_their_song_newest_first_and_say_what_they_did(qtbot):
    p = page(qtbot)
    root, other = record(1, "/x/root.wav"), record(2, "/x/other.wav")
    repaint = record(3, "/x/repaint.wav")
    repaint.request.update(
        task="repaint", source={"song": root.id, "take": 1}, region={"start": 20.0, "end": 30.0}
    )
    extended = record(5, "/x/longer.wav")
    extended.request.update(
        task="extend", source={"song": repaint.id, "take": 1}, extend={"after": 30.0}
    )
    p.model.set_songs([root, other, repaint, extended])
    rows = [p.model.row(n) for n in range(p.model.rowCount())]
    assert [(r.song.id, r.depth) for r in rows] == [
        (root.id, 0),
        (repaint.id, 1),
        (extended.id, 2),
        (other.id, 0),
    ]
    assert rows[1].label == "Repainted 20–30 s — song 3"
    assert rows[2].label.startswith("Extended +30 s after")
    cover = record(6, "/x/cover.wav")
    cover.request.update(task="cover", source={"song": other.id, "take": 1}, strength=0.5)
    p.model.upsert(cover)  # made now: its family comes first, with it
    rows = [p.model.row(n) for n in range(p.model.rowCount())]
    assert [(r.song.id, r.depth) for r in rows][:2] == [(other.id, 0), (cover.id, 1)]
    assert rows[1].label == "Cover (strength 0.5) — song 6"


def sixty_second_take(qtbot, lyrics: str | None = None) -> tuple[SongsPage, Song]:
    """The page showing one song whose take is 60 s long (a second of audio on disk),
    selected; its request's lyrics as given."""
    path = make_wav(os.path.join(os.environ["CANTOR_HOME"], "sixty.wav"), seconds=1.0)
    song = record(1, path)
    song.takes[0].duration = 60.0
    if lyrics is not None:
        song.request["lyrics"] = lyrics
    p = page(qtbot)
    p.resize(1000, 700)
    p.model.set_songs([song])
    p.show()
    qtbot.waitExposed(p)
    p.select(song.id, 1)
    return p, song


def test_select_a_region_to_repaint_or_drag_past_the_end_to_extend(qtbot):
    from PySide6.QtCore import QPoint

    p, song = sixty_second_take(qtbot)
    editor = p.editor
    assert editor.duration == 60.0 and not p.repaint_button.isEnabled()
    x20, x30 = int(editor.x_of(20.0)), int(editor.x_of(30.0))
    qtbot.mousePress(editor, Qt.LeftButton, pos=QPoint(x20, 40))
    qtbot.mouseMove(editor, QPoint(x30, 40))
    qtbot.mouseRelease(editor, Qt.LeftButton, pos=QPoint(x30, 40))
    start, end = editor.region
    assert abs(start - 20) <= 0.3 and abs(end - 30) <= 0.3 and p.repaint_button.isEnabled()
    req = p.edit_request("repaint", region={"start": start, "end": end})
    assert req["source"] == {"song": song.id, "take": 1} and req["task"] == "repaint"
    from cantor_desktop.song.request import validate

    assert validate(req).region == {"start": start, "end": end}  # what the node will take
    # a click without a drag selects nothing to repaint
    qtbot.mouseClick(editor, Qt.LeftButton, pos=QPoint(x20, 40))
    assert not p.repaint_button.isEnabled()
    # dragging from inside to past the end is an extension, not a region
    right = int(editor.x_of(60.0)) + 40
    qtbot.mousePress(editor, Qt.LeftButton, pos=QPoint(int(editor.x_of(59.0)), 40))
    qtbot.mouseRelease(editor, Qt.LeftButton, pos=QPoint(right, 40))
    assert editor.region is None and editor.after > 1 and p.extend.isEnabled()
    ext = p.edit_request("extend", extend={"after": editor.after})
    assert validate(ext).extend["after"] == editor.after


def test_the_keyboard_selects_a_region_and_an_extension_as_a_daw_does(qtbot):
    """Tab to the waveform; arrows move the cursor (Ctrl: a tenth), I and O set the in and
    out points, Shift+arrows select and reach past the end to extend, Esc clears; a screen
    reader is told the selection in the waveform's accessible description."""
    from PySide6.QtGui import QAccessible

    p, song = sixty_second_take(qtbot)
    editor = p.editor
    editor.setFocus()
    qtbot.waitUntil(editor.hasFocus)
    for _ in range(10):
        qtbot.keyClick(editor, Qt.Key.Key_Right)
    qtbot.keyClick(editor, Qt.Key.Key_I)
    assert editor.region == (10.0, 60.0)
    for _ in range(5):
        qtbot.keyClick(editor, Qt.Key.Key_Right)
    qtbot.keyClick(editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(editor, Qt.Key.Key_O)
    assert editor.region == (10.0, 15.1) and p.repaint_button.isEnabled()
    face = QAccessible.queryAccessibleInterface(editor)
    assert face.text(QAccessible.Text.Name) == "Waveform"
    assert "10.0–15.1" in face.text(QAccessible.Text.Description)
    # Shift+Left from the out point shrinks the region, keeping the in point
    qtbot.keyClick(editor, Qt.Key.Key_Left, Qt.KeyboardModifier.ShiftModifier)
    assert editor.region == (10.0, 14.1)
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    assert editor.region is None and not p.repaint_button.isEnabled()
    # from the end, Shift+Right reaches past it: an extension after the song
    qtbot.keyClick(editor, Qt.Key.Key_End)
    for _ in range(8):
        qtbot.keyClick(editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier)
    assert editor.region is None and editor.after == 8.0 and p.extend.isEnabled()
    assert "8.0 s after" in face.text(QAccessible.Text.Description)
    ext = p.edit_request("extend", extend={"after": editor.after})
    from cantor_desktop.song.request import validate

    assert validate(ext).extend["after"] == 8.0
    # Tab leaves the waveform (it takes no tab character and traps no focus)
    qtbot.keyClick(editor, Qt.Key.Key_Tab)
    assert not editor.hasFocus()


# -- what a new user tripped on --------------------------------------------------------------


def long_song(i: int, path: str | None = None) -> Song:
    song = record(i, path)
    song.request["caption"] = (
        "warm lo-fi piano, rain on the window, slow brushed drums, vinyl crackle, a cello "
        "that answers the piano in the second verse, tape hiss and a far-away choir " * 2
    )
    return song


def test_edit_buttons_follow_the_selection_and_say_why_they_are_off(qtbot, tmp_path):
    p = page(qtbot)
    wav = make_wav(tmp_path / "e.wav", seconds=4.0)
    failed = Song.from_json(
        {
            "id": f"{77:016x}",
            "state": "failed",
            "created": 1_800_000_000,
            "error": "out of memory",
            "request": {"caption": "a failed one", "model": "sketch"},
        }
    )
    p.model.set_songs([record(1, wav), failed])
    edit = (p.repaint_button, p.extend, p.cover, p.as_reference, p.layer, p.stems)
    # nothing selected: every edit is off, and says what to do
    assert not any(b.isEnabled() for b in edit)
    for b in edit:
        assert "Select a take in the list first" in b.toolTip(), b.text()
    assert not p.song_actions["stems"].isEnabled()  # the Song menu's own, too
    # a failed song: nothing to edit, and why
    p.select(failed.id)
    assert not any(b.isEnabled() for b in edit)
    assert "failed" in p.cover.toolTip()
    # a finished take: what needs no more choice is on; repaint and extend say what to do
    p.select(record(1).id, 1)
    assert all(b.isEnabled() for b in (p.cover, p.as_reference, p.layer, p.stems))
    assert (
        not p.repaint_button.isEnabled()
        and "Drag across the waveform" in p.repaint_button.toolTip()
    )
    assert not p.extend.isEnabled() and "past either end" in p.extend.toolTip()
    p.editor.select(0.5, 1.0)  # too short to repaint
    assert not p.repaint_button.isEnabled() and "at least 1 s" in p.repaint_button.toolTip()
    p.editor.select(0.5, 2.5)
    assert p.repaint_button.isEnabled() and "\n—" not in p.repaint_button.toolTip()
    p.editor.extend_by(after=5)
    assert p.extend.isEnabled() and not p.repaint_button.isEnabled()
    # clicking a disabled one does nothing; an enabled one reaches its action
    seen = []
    p.cover_requested.connect(lambda source, name: seen.append(source))
    p.view.clearSelection()
    p.view.setCurrentIndex(p.model.index(-1, 0))
    p.cover.click()
    assert seen == []
    p.select(record(1).id, 1)
    p.cover.click()
    assert seen == [{"song": record(1).id, "take": 1}]


def test_selecting_a_song_with_a_long_name_never_widens_the_window(qtbot, tmp_path):
    """The window is as wide as the musician made it: a long caption, the waveform's
    words and the export's summary are cut with an ellipsis, not given more room."""
    from cantor_desktop.ui.export_dialog import takes_summary
    from cantor_desktop.ui.window import MainWindow

    link = NodeLink(start_child=False)
    window = MainWindow(link)
    qtbot.addWidget(window)
    window.show_page("Songs")
    window.resize(window.minimumSizeHint().width(), 700)
    window.show()
    qtbot.waitExposed(window)
    size, least = window.size(), window.minimumSizeHint()
    songs = window.songs
    wav = make_wav(tmp_path / "l.wav", seconds=3.0)
    songs.model.set_songs([long_song(i, wav) for i in range(3)])
    for i in range(3):
        songs.select(long_song(i).id, 1)
        songs.editor.select(0.2, 2.9)
        qtbot.wait(10)
        assert window.size() == size and window.minimumSizeHint().width() <= least.width()
    words = songs.edit_words
    assert words.shown_text().endswith("…") or words.width() >= words.sizeHint().width()
    # the export dialog's first line: each name cut with an ellipsis, never mid-word bare
    song = long_song(1, "/x/a.wav")
    line = takes_summary([(song, song.takes[0])], words.fontMetrics())
    assert "…" in line and line.endswith("(take 1)")
    assert song.name not in line


def test_changes_reach_the_rows_shown_and_those_not_made_yet(qtbot):
    """Songs change while only a batch is on screen: a new one, a favourite marked under a
    favourites-only filter, one removed far down the list, a running one's progress. What
    the list shows once every batch is fetched is what the songs say."""
    from cantor_desktop.ui.songs_model import SongsModel

    model = SongsModel()
    songs = [record(i, f"/x/{i}.wav") for i in range(300)]
    model.set_songs(songs)

    def every_row():
        while model.canFetchMore():
            model.fetchMore()
        return [model.row(n).song.id for n in range(model.rowCount())]

    fresh = record(1000, "/x/new.wav")
    model.upsert(fresh)  # the newest: the top row at once
    assert model.row(0).song.id == fresh.id and model.shown_songs() == 301
    model.remove(songs[5].id)  # far down, not made into rows yet
    assert model.shown_songs() == 300
    model.set_filter("", favourites_only=True)
    assert model.rowCount() == 0 and not model.canFetchMore()
    starred = record(7, "/x/7.wav")
    starred.favourite = True
    model.upsert(starred)
    assert [model.row(n).song.id for n in range(model.rowCount())] == [starred.id]
    model.set_filter("song 1", favourites_only=False)
    new_match, new_other = record(1001, "/x/a.wav"), record(2002, "/x/b.wav")
    new_other.request["caption"] = "other"
    model.upsert(new_match)
    model.upsert(new_other)
    assert model.row(0).song.id == new_match.id
    assert new_other.id not in every_row()
    model.set_filter("")
    expected = [s.id for s in sorted(model.songs(), key=lambda s: s.created, reverse=True)]
    assert every_row() == expected and len(expected) == 302
    running = Song.from_json(
        {
            "id": f"{3000:016x}",
            "state": "running",
            "created": 1_900_000_000,
            "progress": 0.2,
            "request": {"caption": "in flight", "model": "sketch"},
        }
    )
    model.upsert(running)
    changed = []
    model.dataChanged.connect(lambda a, b: changed.append((a.row(), b.row())))
    before = model.rowCount()
    later = Song.from_json({**running.to_json(), "progress": 0.6})
    model.upsert(later)
    assert model.rowCount() == before and changed == [(0, 0)]
    assert model.row(0).song.progress == 0.6


def test_matched_levels_play_a_quiet_and_a_loud_take_equally_loud(tmp_path):
    """A/B compares music, not level: the same tone 12 dB apart decodes to the same level
    with Match levels, and as it is without (the files untouched)."""
    import numpy as np
    import soundfile as sf

    from cantor_desktop.ui.player import decode

    loud = make_wav(tmp_path / "loud.wav", seconds=3.0)
    data, rate = sf.read(loud, dtype="float32")
    quiet = tmp_path / "quiet.wav"
    sf.write(quiet, data * 0.25, rate, subtype="PCM_24")

    def rms(pcm) -> float:
        x = np.frombuffer(pcm.data, dtype="<i2").astype(np.float64)
        return float(np.sqrt(np.mean(x * x)))

    as_made = rms(decode(loud)) / rms(decode(str(quiet)))
    assert 3.9 < as_made < 4.1
    matched = rms(decode(loud, match_levels=True)) / rms(decode(str(quiet), match_levels=True))
    assert 0.98 < matched < 1.02
    assert np.abs(sf.read(quiet, dtype="float32")[0]).max() < 0.2  # the file as it was


def test_a_loop_plays_the_selected_part_over_and_over(qtbot, tmp_path):
    from cantor_desktop.ui.player import Player, decode

    path = make_wav(tmp_path / "l.wav", seconds=4.0, rate=44100)
    player = Player()
    player.path = path
    player._on_decoded(path, decode(path))
    player.set_loop(1000, 1100)  # too short to be a loop: a click on the waveform
    assert player.loop is None
    player.set_loop(1000, 2500)
    assert player.loop == (1000, 2500)
    player.seek(2600)  # the position passes the loop's end …
    positions = []
    player.position_changed.connect(positions.append)
    player._tick()  # … and the next tick jumps back to its start
    assert positions == [1000] and player.position_ms() == 1000
    player._tick()
    assert positions[-1] == 1000
    player.set_loop(None)
    assert player.loop is None
    player.shutdown()


def test_loop_follows_the_waveform_selection_and_match_levels_is_on(qtbot, tmp_path):
    p = page(qtbot)
    p.model.set_songs([record(1, make_wav(tmp_path / "a.wav", seconds=6.0))])
    p.view.selectionModel().select(p.model.index(0, 0), QItemSelectionModel.ClearAndSelect)
    assert p.match_levels.isChecked() and p._player.match_levels
    p.editor.select(1.0, 3.0)
    assert p._player.loop is None  # Loop is off
    p.loop.setChecked(True)
    assert p._player.loop == (1000, 3000) and p.loop.text() == "Loop: on"
    p.editor.select(2.0, 4.0)
    assert p._player.loop == (2000, 4000)
    p.editor.clear()
    assert p._player.loop is None
    p.match_levels.setChecked(False)
    assert not p._player.match_levels


def test_extending_after_the_song_asks_what_the_new_part_sings(qtbot, monkeypatch):
    """Extend… with music added after the take: a dialog asks for the new part's lyrics and
    how much of the song it hears; the request the node gets carries both, and the new
    song's lyrics are the take's followed by the new lines. Empty lyrics continue the music."""
    from PySide6.QtCore import QPoint
    from cantor_desktop.song.request import validate

    p, song = sixty_second_take(qtbot, lyrics="[Verse]\nfirst lines")
    queued: list[dict] = []
    monkeypatch.setattr(p.link.songs, "queue", lambda kind, request, **_: queued.append(request))
    editor = p.editor
    right = int(editor.x_of(60.0)) + 40
    qtbot.mousePress(editor, Qt.LeftButton, pos=QPoint(int(editor.x_of(59.0)), 40))
    qtbot.mouseRelease(editor, Qt.LeftButton, pos=QPoint(right, 40))
    after = editor.after
    assert after > 1 and p.extend.isEnabled()

    dialog = p.extend_selection()
    assert dialog is not None and not dialog.context.isEnabled()  # nothing to sing yet
    qtbot.keyClicks(dialog.lyrics, "[Verse 2]")
    assert dialog.context.isEnabled()
    dialog.context.setValue(12)
    dialog.go.click()
    (request,) = queued
    assert request["extend"] == {"after": after, "lyrics": "[Verse 2]", "context": 12.0}
    assert request["lyrics"] == "[Verse]\nfirst lines\n\n[Verse 2]"
    assert validate(request).extend["lyrics"] == "[Verse 2]"  # what the node will take

    # again, with no words: the music goes on, as the engine's own extend
    qtbot.mousePress(editor, Qt.LeftButton, pos=QPoint(int(editor.x_of(59.0)), 40))
    qtbot.mouseRelease(editor, Qt.LeftButton, pos=QPoint(right, 40))
    after = editor.after
    dialog = p.extend_selection()
    assert dialog is not None
    dialog.go.click()
    assert queued[1]["extend"] == {"after": after}
    assert queued[1]["lyrics"] == "[Verse]\nfirst lines"

    # music added at both ends goes at once: only what is added after alone may sing
    editor.extend_by(before=5.0, after=5.0)
    assert p.extend_selection() is None
    assert queued[2]["extend"] == {"before": 5.0, "after": 5.0}
