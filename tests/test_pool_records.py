"""What a member takes from the pool's Redis: each record, report, lane and event checked
with the HTTP request's rules and size caps; a refusal names what is wrong; the member
proof binds the member's id and whole address."""

from __future__ import annotations

import json

import pytest

from cantor_desktop.auth import proof
from cantor_desktop.node.pool.queue import RECORD_FIELDS, encode_fields
from cantor_desktop.pool import records
from cantor_desktop.client.pool_view import PoolView
from cantor_desktop.song.record import Song, SongState, Take
from cantor_desktop.song.request import validate

SONG_ID = "0123456789abcdef"
MEMBER = "a1b2c3d4e5f6"


def _song(**changes) -> Song:
    request = validate({"caption": "lofi piano", "model": "sketch"}).to_dict()
    song = Song(
        id=SONG_ID,
        request=request,
        state=SongState.DONE,
        takes=[Take(n=1, audio="/songs/a.wav", sidecar="/songs/a.json", seed=3)],
        node={"id": MEMBER, "name": "alpha", "shared": False},
    )
    for name, value in changes.items():
        setattr(song, name, value)
    return song


def _hash(song: Song, **raw) -> dict[str, str]:
    pairs = encode_fields(song, RECORD_FIELDS)
    found = dict(zip(pairs[::2], pairs[1::2]))
    found.update({"seq": "4", "_lane": "cantor:lane:model:sketch", "_owner": "", "_entry": ""})
    found.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    return found


def test_a_songs_record_as_the_pool_writes_it_reads_back_whole():
    written = _song()
    song, lane, owner = records.song_record(_hash(written), SONG_ID)
    assert song.to_json() == written.to_json()
    assert song.seq == 4
    assert (song.takes[0].audio, song.node, lane, owner) == (
        "/songs/a.wav",
        {"id": MEMBER, "name": "alpha", "shared": False},
        "cantor:lane:model:sketch",
        "",
    )


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"request": {"caption": "x", "model": ["sketch"]}}, "model"),
        ({"request": {"caption": "x", "model": "sketch", "batch": 20_000_000}}, "batch"),
        ({"request": {"model": "sketch"}}, "caption"),
        ({"request": [1]}, "caption"),
        ({"takes": [{"audio": "/a.wav"}] * 5}, "at most 4"),
        ({"takes": [{"audio": 5}]}, "take 1.audio"),
        ({"takes": "x"}, "takes"),
        ({"node": [1]}, "node"),
        ({"node": {"id": "../x", "name": "n"}}, "node id"),
        ({"state": "exploded"}, "exploded"),
        ({"attempts": -1}, "attempts"),
        ({"progress": 7}, "progress"),
        ({"title": "a\nb"}, "control"),
        ({"id": "fedcba9876543210"}, "another id"),
        ({"_lane": "cantor:members"}, "lane"),
        ({"_owner": "a b"}, "node id"),
        ({"error": "x" * 20_000}, "error"),
    ],
)
def test_a_record_with_a_wrong_field_is_refused_naming_it(raw, why):
    found = _hash(_song())
    for name, value in raw.items():
        found[name] = value if name.startswith("_") else json.dumps(value)
    with pytest.raises(records.Refused, match=why):
        records.song_record(found, SONG_ID)


def test_a_record_past_its_size_cap_is_refused_before_it_is_decoded():
    found = _hash(_song(), engine={"log": "x" * records.MAX_RECORD_BYTES})
    with pytest.raises(records.Refused, match="bytes"):
        records.song_record(found, SONG_ID)
    found = _hash(_song())
    found["takes"] = "not json"
    with pytest.raises(records.Refused, match="takes: not JSON"):
        records.song_record(found, SONG_ID)


def _report(**changes) -> str:
    report = {
        "id": MEMBER,
        "name": "alpha",
        "url": "http://10.0.0.2:7823",
        "shared": False,
        "models": ["sketch"],
        "backends": {"sketch": "sketch"},
        "engines": [{"engine": "sketch", "backend": "sketch", "running": True, "extra": 1}],
        "running": [SONG_ID],
        "seen": 1.0,
        "anything": "else",
    }
    report.update(changes)
    return json.dumps(report)


def test_a_members_report_keeps_only_what_cantor_reads():
    found = records.member_report(MEMBER, _report())
    assert "anything" not in found and "extra" not in found["engines"][0]
    assert found["url"] == "http://10.0.0.2:7823" and found["models"] == ["sketch"]


@pytest.mark.parametrize(
    ("member", "text", "why"),
    [
        (MEMBER, "[1]", "object"),
        (MEMBER, "{", "JSON"),
        (MEMBER, _report(url=5), "url"),
        (MEMBER, _report(url="http://evil/path:1"), "url"),
        (MEMBER, _report(url="http://u:p@10.0.0.2:1"), "more than a host"),
        (MEMBER, _report(url="ftp://10.0.0.2:1"), "http"),
        (MEMBER, _report(name=""), "empty"),
        (MEMBER, _report(name="a\x1b[2Jb"), "control"),
        (MEMBER, _report(models="sketch"), "models"),
        (MEMBER, _report(models=["m"] * 300), "models"),
        (MEMBER, _report(running=["../x"]), "running"),
        (MEMBER, _report(id="b1b2c3d4e5f6"), "another member"),
        ("x y", _report(), "node id"),
        (MEMBER, "x" * (records.MAX_REPORT_BYTES + 1), "larger"),
    ],
)
def test_a_members_report_of_the_wrong_shape_is_refused(member, text, why):
    with pytest.raises(records.Refused, match=why):
        records.member_report(member, text)


def test_an_event_is_checked_whole_and_a_bad_one_named():
    song = _song().to_json()
    good = records.event(
        "1-0", {"k": "done", "o": MEMBER, "d": json.dumps({"id": SONG_ID, "song": song})}
    )
    assert good.song is not None and good.song.id == SONG_ID and good.origin == MEMBER
    bad = [
        ({"k": "changed", "o": MEMBER, "d": "[1]"}, "object"),
        ({"k": "changed", "o": MEMBER, "d": json.dumps({"id": SONG_ID, "lane": [1]})}, "lane"),
        ({"k": "bogus", "o": MEMBER, "d": "{}"}, "kind"),
        ({"k": "added", "o": "[x]", "d": "{}"}, "node id"),
        ({"k": "added", "o": MEMBER, "d": "x" * (records.MAX_EVENT_BYTES + 1)}, "larger"),
        ({"k": "added", "o": MEMBER, "d": json.dumps({"id": "nope"})}, "song id"),
        ({"k": "progress", "o": MEMBER, "d": json.dumps({"id": SONG_ID, "progress": "x"})}, "num"),
    ]
    for fields, why in bad:
        with pytest.raises(records.Refused, match=why):
            records.event("1-0", fields)
    with pytest.raises(records.Refused, match="event id"):
        records.event("x", {"k": "done", "o": MEMBER, "d": "{}"})


def test_refusals_count_each_entry_once_and_keep_the_newest_first():
    r = records.Refusals()
    assert r.add("song", "a", "one") and not r.add("song", "a", "one again")
    assert r.add("event", "1-0", "two")
    described = r.describe()
    assert (described["songs"], described["events"], described["entries"]) == (1, 1, 0)
    assert [x["key"] for x in described["latest"]] == ["1-0", "a"]
    assert r.reason("song", "a") == "one" and r.total == 2


def test_the_member_proof_binds_the_members_id_and_whole_address():
    token, challenge = "t" * 43, proof.new_challenge()
    given = proof.member_answer(token, challenge, MEMBER, "http://10.0.0.2:7823")
    assert proof.verify_member(token, challenge, MEMBER, "http://10.0.0.2:7823", given)
    # a relay elsewhere, a fake id at the member's address, another port, another token
    assert not proof.verify_member(token, challenge, MEMBER, "http://10.0.0.66:7823", given)
    assert not proof.verify_member(token, challenge, "f4ce0000beef", "http://10.0.0.2:7823", given)
    assert not proof.verify_member(token, challenge, MEMBER, "http://10.0.0.2:7824", given)
    assert not proof.verify_member("u" * 43, challenge, MEMBER, "http://10.0.0.2:7823", given)
    # the member proof and the port proof never stand for each other
    assert given != proof.answer(token, challenge, 7823)


def test_the_app_names_what_the_node_does_not_trust():
    view = PoolView.from_json(
        {
            "state": "connected",
            "node": {"id": MEMBER, "name": "alpha"},
            "members": [
                {"id": MEMBER, "name": "alpha", "alive": True, "proven": True, "models": ["s"]},
                {
                    "id": "f4ce0000beef",
                    "name": "delta",
                    "alive": True,
                    "proven": False,
                    "proof_problem": "it did not answer",
                    "models": ["s"],
                },
            ],
            "refused_entries": {
                "songs": 2,
                "events": 1,
                "latest": [{"kind": "song", "key": "k", "reason": "batch: must be …"}],
            },
        }
    )
    assert view is not None
    said = view.untrusted() or ""
    assert "delta did not prove it is a member (it did not answer)" in said
    assert "3 entries read from the pool's Redis were refused: song k: batch" in said
    assert "3 entries from Redis refused" in view.summary()
    choices = {c.name: c for c in view.choices("s")}
    assert choices["alpha"].usable and choices["delta"].why_not == "not verified"
