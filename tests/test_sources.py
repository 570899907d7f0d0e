"""Latents kept for edits belong to the engine kind that made them: a Sketch latent is
never sent to ACE-Step's VAE (nor the reverse), and they go with their song or upload."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from cantor_desktop.node import sources, uploads
from cantor_desktop.song.record import Song, SongState, Take

FRAME = sources.LATENT_FRAME_BYTES


def _wav(path):
    out = io.BytesIO()
    sf.write(out, np.zeros((4800, 2), "float32"), 48000, format="WAV")
    path.write_bytes(out.getvalue())
    return path


def test_a_take_latent_goes_only_to_the_engine_kind_that_made_it(cantor_home):
    (cantor_home / "songs").mkdir()
    audio = _wav(cantor_home / "songs" / "take.wav")
    song = Song(
        id="s1",
        request={"caption": "x"},
        state=SongState.DONE,
        takes=[Take(n=1, audio=str(audio), duration=0.1)],
    )
    sources.keep_latent(sources.take_latent_file("s1", 1, "sketch"), b"\1" * FRAME * 3)

    assert (
        sources.resolve("source", {"song": "s1"}, {"s1": song}, "sketch").latent
        == b"\1" * FRAME * 3
    )
    assert sources.resolve("source", {"song": "s1"}, {"s1": song}, "acestep").latent is None
    assert sources.resolve("source", {"song": "s1"}, {"s1": song}).latent is None

    sources.keep_latent(sources.take_latent_file("s1", 1, "acestep"), b"\2" * 5)  # torn
    assert sources.resolve("source", {"song": "s1"}, {"s1": song}, "acestep").latent is None

    sources.forget_latents("s1")
    assert list(sources.latents_dir().iterdir()) == []


def test_removing_an_upload_removes_what_engines_encoded_of_it(cantor_home, tmp_path):
    upload_id, part = uploads.new_part()
    _wav(part)
    uploads.keep(upload_id, part, "idea.wav")
    for engine in ("sketch", "acestep"):
        sources.keep_latent(sources.upload_latent_file(upload_id, engine), b"\0" * FRAME)
    other = sources.upload_latent_file("0123456789abcdef", "sketch")
    sources.keep_latent(other, b"\0" * FRAME)

    found = sources.resolve("reference", {"upload": upload_id}, {}, "sketch")
    assert found.latent == b"\0" * FRAME and found.audio_path.name == f"{upload_id}.wav"

    assert uploads.remove(upload_id)
    assert sorted(p.name for p in uploads.folder().iterdir()) == [other.name]
