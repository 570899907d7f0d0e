"""The Songs page's view-model, without Qt: the count, A/B, the requests its edits send, what
Move to trash takes and asks, and which actions the selection allows (and why not)."""

from __future__ import annotations

from cantor_desktop.song.record import Song
from cantor_desktop.song.request import validate
from cantor_desktop.views.song_actions import ACTIONS, Selection, availability
from cantor_desktop.views.song_records import rows_of
from cantor_desktop.views.songs import SongsViewModel, count_text, playable, take_name


def song(i: int, state: str = "done", takes: int = 1, **request) -> Song:
    return Song.from_json(
        {
            "id": f"{i:016x}",
            "state": state,
            "created": 1_700_000_000 + i,
            "request": {"caption": f"song {i}", "model": "sketch", "bpm": 90, **request},
            "takes": [
                {"n": n + 1, "audio": f"/x/{i}_take{n + 1}.wav", "seed": n, "duration": 30.0}
                for n in range(takes if state == "done" else 0)
            ],
        }
    )


def test_the_count_says_how_many_show():
    assert count_text(1, 1) == "1 song" and count_text(12, 12) == "12 songs"
    assert count_text(3, 12) == "3 of 12 songs"


def test_ab_switches_between_the_two_takes_heard_last():
    vm = SongsViewModel()
    first, second, third = (rows_of(song(i))[0] for i in (1, 2, 3))
    assert vm.other_heard() is None  # nothing heard yet: the page says how
    vm.playing = first
    vm.remember(first.key, 0)
    assert vm.other_heard() is None
    vm.remember(first.key, 4000)  # leaving the first take at 4 s …
    vm.playing = second
    vm.remember(second.key, 0)  # … for the second
    assert vm.other_heard() == first.key
    vm.remember(second.key, 9000)
    vm.playing = third
    vm.remember(third.key, 0)
    assert vm.heard == [(second.key, 9000), (third.key, 0)]  # the last two only
    assert vm.stopped(third.song.id) and vm.playing is None
    assert not vm.stopped(first.song.id)


def test_edits_send_the_songs_own_words_and_the_take_as_their_source():
    vm = SongsViewModel()
    row = rows_of(song(1, takes=2, lyrics="[Verse]\nla", key="A minor"))[1]
    assert take_name(row) == "song 1 (take 2)" and playable(row)
    repaint = vm.repaint(row, (20.0, 30.0), "", "[Verse]\nnew")
    assert repaint.request["source"] == {"song": row.song.id, "take": 2}
    assert repaint.request["caption"] == "song 1"  # none given: the song's own
    assert repaint.request["lyrics"] == "[Verse]\nnew" and repaint.request["key"] == "A minor"
    assert (repaint.doing, repaint.what) == ("Repainting 20.0–30.0 s", "repaint 20.0–30.0 s")
    assert validate(repaint.request).region == {"start": 20.0, "end": 30.0}
    extend = vm.extend(row, 0.0, 12.5, "Extend by 12.5 s after")
    assert extend.request["extend"] == {"after": 12.5} and extend.request["task"] == "extend"
    again = vm.render_again(row)
    assert "source" not in again.request and again.request["seed"] == -1
    assert again.request["codes_from"] == {"song": row.song.id, "take": 2}
    assert vm.source_of(row) == ({"song": row.song.id, "take": 2}, "song 1 (take 2)")
    assert vm.source_of(None) is None and vm.edit_request(None, "extend") is None
    assert vm.editing("Repainting 1.0–3.0 s").endswith("the new version will appear under the song")


def test_move_to_trash_takes_the_finished_songs_and_asks_about_their_files():
    vm = SongsViewModel()
    done, running = song(1, takes=2), song(2, state="running")
    rows = rows_of(done) + rows_of(running)
    assert list(vm.to_trash(rows)) == [done.id]  # each song once; one still made stays
    names = [f"f{i}.wav" for i in range(10)]
    question = vm.trash_question([done], names)
    assert question.startswith("Move 1 song(s) — 10 audio file(s) and their sidecars")
    assert question.endswith("f7.wav\n… and 2 more")
    assert vm.trash_question([done], []) == "Forget 1 song(s) that made no file?"


def test_each_action_is_allowed_or_says_why_not():
    row = rows_of(song(1))[0]
    nothing = availability(Selection())
    assert nothing["cover"] == "Select a take in the list first"
    assert nothing["rename"] == "Select a song in the list first"
    ready = availability(Selection(row=row, rows=1, has_file=True, finished_selected=True))
    assert all(ready[n] is None for n in ("play", "cover", "stems", "export", "trash", "rename"))
    assert "Drag across the waveform" in (ready["repaint"] or "")
    assert availability(Selection(row=row, has_file=True, region=True))["repaint"] is None
    remote = availability(Selection(row=row, remote=True))
    assert remote["play"] is None and "play it once to fetch" in (remote["reveal"] or "")
    failed = availability(Selection(row=rows_of(song(2, state="failed"))[0]))
    assert failed["cover"] == "This song failed: it has no audio to work on"
    unbuilt = availability(Selection(page_built=False))
    assert set(unbuilt) == set(ACTIONS) and all(unbuilt.values())


def test_a_take_that_missed_what_was_asked_says_so_and_another_take_keeps_the_settings():
    from cantor_desktop.views.song_records import check_words, facts

    checked = {
        "bpm": {"asked": 120, "measured": 60.2, "verdict": "half time"},
        "key": {"asked": "A minor", "measured": "D minor", "verdict": "off"},
    }
    made = Song.from_json(
        {
            "id": "00000000000000aa",
            "state": "done",
            "request": {"caption": "c", "model": "sketch", "bpm": 120, "key": "A minor", "seed": 7},
            "takes": [
                {"n": 1, "audio": "/x/a.wav", "bpm": 120, "key": "A minor", "check": checked},
                {"n": 2, "audio": "/x/b.wav", "bpm": 120, "key": "A minor", "check": {}},
            ],
        }
    )
    missed, fine = rows_of(made)
    assert check_words(missed.take) == [
        "⚠ half time: asked 120 BPM, measured 60",
        "⚠ another key: asked A minor, measured D minor",
    ]
    assert facts(made, missed.take)[:2] == check_words(missed.take)
    assert check_words(fine.take) == [] and not any("⚠" in f for f in facts(made, fine.take))
    relative = {"key": {"asked": "C major", "measured": "A minor", "verdict": "relative"}}
    assert (
        check_words(
            Song.from_json(
                {**made.to_json(), "takes": [{"n": 1, "audio": "/x/a.wav", "check": relative}]}
            ).takes[0]
        )
        == []
    )
    again = SongsViewModel.another_take(missed)
    assert again.request == {**made.request, "seed": -1}
    validate(again.request)  # a request the node takes
    assert availability(Selection(row=missed))["another_take"] is None
    assert availability(Selection())["another_take"] == "Select a take in the list first"
