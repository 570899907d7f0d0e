"""A path from a song record is used only when it is a take file of this node's songs
folders: never a file elsewhere, never through a link, never a FIFO; a folder the node
wrote takes into before ``songs.dir`` changed still counts."""

from __future__ import annotations

import json
import os

import pytest

from cantor_desktop import config
from cantor_desktop.node import take_files
from cantor_desktop.node.song_files import delete_takes
from cantor_desktop.song.record import Take


@pytest.fixture
def songs(cantor_home):
    folder = cantor_home / "songs"
    folder.mkdir()
    return folder


def _take(folder, name="a.wav", song_id="0123456789abcdef", data=b"RIFF take"):
    audio = folder / name
    audio.write_bytes(data)
    sidecar = audio.with_suffix(".json")
    sidecar.write_text(json.dumps({"id": song_id, "audio": {"file": audio.name}}))
    return audio, sidecar


def test_a_take_of_the_songs_folder_opens(songs):
    audio, _ = _take(songs)
    with take_files.open_take(str(audio)) as fh:
        assert fh.read() == b"RIFF take"


@pytest.mark.parametrize(
    "where",
    ["/etc/passwd", "relative.wav", "{songs}/../node.toml", "{songs}/sub/a.wav", "{songs}/.."],
)
def test_a_path_outside_the_songs_folder_is_refused(songs, where):
    (songs / "sub").mkdir()
    (songs / "sub" / "a.wav").write_bytes(b"x")
    with pytest.raises(take_files.OutsideSongs):
        take_files.open_take(where.format(songs=songs))


def test_a_link_in_the_songs_folder_is_refused_even_to_a_file_inside(songs, cantor_home):
    secret = cantor_home / "secret.txt"
    secret.write_text("private")
    (songs / "out.wav").symlink_to(secret)
    audio, _ = _take(songs)
    (songs / "in.wav").symlink_to(audio)
    for name in ("out.wav", "in.wav"):
        with pytest.raises(take_files.OutsideSongs, match="link"):
            take_files.open_take(songs / name)


def test_a_folder_link_does_not_lead_out(songs, cantor_home):
    elsewhere = cantor_home / "elsewhere"
    elsewhere.mkdir()
    _take(elsewhere)
    (songs / "door").symlink_to(elsewhere)
    with pytest.raises(take_files.OutsideSongs):
        take_files.open_take(songs / "door" / "a.wav")


def test_a_fifo_in_a_takes_place_is_refused_without_blocking(songs):
    fifo = songs / "a.wav"
    os.mkfifo(fifo)
    with pytest.raises(take_files.OutsideSongs, match="regular"):
        take_files.open_take(fifo)


def test_a_gone_take_is_file_not_found(songs):
    with pytest.raises(FileNotFoundError):
        take_files.open_take(songs / "gone.wav")


def test_songs_made_before_songs_dir_changed_stay_playable(songs, cantor_home):
    take_files.remember_folder(songs)
    audio, _ = _take(songs)
    other = cantor_home / "new-songs"
    other.mkdir()
    config.update({"songs.dir": str(other)})
    assert take_files.song_folders()[0] == os.path.realpath(other)
    with take_files.open_take(audio) as fh:
        assert fh.read() == b"RIFF take"
    never = cantor_home / "never"
    never.mkdir()
    with pytest.raises(take_files.OutsideSongs):
        take_files.checked(_take(never)[0])


def test_the_queue_file_adopts_its_takes_folders_once(songs, cantor_home):
    old = cantor_home / "old-songs"
    old.mkdir()
    take_files.adopt_folders([str(old / "x.wav"), str(songs / "y.wav")])
    take_files.adopt_folders([str(cantor_home / "later" / "z.wav")])  # once only
    assert set(take_files.song_folders()) == {os.path.realpath(songs), os.path.realpath(old)}


def test_delete_removes_only_what_the_node_wrote_for_this_song(songs, cantor_home):
    """A record whose take names another file, beside the song's own sidecar: nothing of
    that other file goes; neither does a file outside the folder."""
    song_id = "0123456789abcdef"
    audio, sidecar = _take(songs, song_id=song_id)
    other = songs / "someone-elses.wav"
    other.write_bytes(b"keep me")
    outside = cantor_home / "node.toml"
    outside.write_text("[node]\n")
    forged = [
        Take(n=1, audio=str(other), sidecar=str(sidecar)),
        Take(n=2, audio=str(outside), sidecar=str(sidecar)),
    ]
    removed = delete_takes(song_id, forged)
    assert removed["deleted"] == []
    assert other.exists() and outside.exists() and audio.exists() and sidecar.exists()
    # the song's own take goes, sidecar last
    assert delete_takes(song_id, [Take(n=1, audio=str(audio))]) == {
        "deleted": [str(audio), str(sidecar)],
        "kept": [],
    }


def test_a_windows_device_name_is_never_a_take(songs):
    for name in ("CON", "nul.wav", "COM1.wav", "lpt9.json"):
        with pytest.raises(take_files.OutsideSongs):
            take_files.checked(songs / name)


def test_the_folders_file_is_written_by_the_writer_of_takes(songs, cantor_home):
    import io

    import numpy as np
    import soundfile as sf

    from cantor_desktop.node.song_files import write_takes

    out = io.BytesIO()
    sf.write(out, np.zeros((4800, 2), dtype="float32"), 48000, format="WAV", subtype="PCM_16")
    other = cantor_home / "elsewhere-songs"
    files = write_takes(
        other,
        song_id="0123456789abcdef",
        request={"caption": "x"},
        fmt="wav16",
        audios=[out.getvalue()],
        seeds=[1],
        meta={},
    )
    assert os.path.realpath(other) in take_files.song_folders()
    with take_files.open_take(files[0]["audio"]) as fh:
        assert fh.read(4) == b"RIFF"
