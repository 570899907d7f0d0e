"""Tempo and key measured from real Sketch renders (the sketch plays exactly the tempo and
key it is asked for), and recorded in every song's sidecar by a real node."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from cantor_desktop.song import analysis

from test_export import sketch_audio
from support.node import Node, until_state, write_config

SR = 48000

# tempos across the usual range, every key letter, both modes; each progression starts on
# its tonic (vi-IV-I-V is note for note the relative minor's i-VI-III-VII: no ear or
# program can tell those apart without a melody)
CASES = [
    (84, "C major", 1),
    (92, "A minor", 5),
    (100, "F# minor", 3),
    (110, "Bb major", 8),
    (120, "E minor", 2),
    (128, "D major", 2),
    (140, "G minor", 4),
    (150, "Eb major", 6),
    (160, "B minor", 9),
    (96, "C minor", 11),
]


@pytest.mark.parametrize("bpm,key,seed", CASES)
def test_measured_tempo_and_key_of_sketch_songs(bpm, key, seed):
    audio = sketch_audio(caption="instrumental groove", bpm=bpm, key=key, duration=45.0, seed=seed)
    tempo = analysis.estimate_tempo(audio, SR)
    assert tempo is not None and abs(tempo - bpm) <= 1.0, tempo
    assert analysis.estimate_key(audio, SR) == key


def test_a_three_minute_song_is_measured_exactly():
    """(Its CPU seconds are a figure: bench/export.py measures them.)"""
    audio = sketch_audio(
        caption="instrumental groove", bpm=92, key="A minor", duration=180.0, seed=5
    )
    found = analysis.tempo_key({}, None, audio, SR)
    assert found == {
        "bpm": 92,
        "key": "A minor",
        "time_signature": None,
        "facts_from": {"bpm": "measured", "key": "measured"},
    }
    assert abs(analysis.estimate_tempo(audio, SR) - 92) < 0.05


def test_silence_and_noise_have_no_tempo_and_asked_values_are_kept():
    silence = np.zeros((SR * 10, 2), dtype=np.float32)
    assert analysis.estimate_tempo(silence, SR) is None
    assert analysis.estimate_key(silence, SR) is None
    assert analysis.tempo_key({}, None, silence, SR) == {
        "bpm": None,
        "key": None,
        "time_signature": None,
        "facts_from": {"bpm": "measured", "key": "measured"},
    }
    # asked beats the LM, the LM beats measuring; nothing is measured when both are known
    assert analysis.tempo_key(
        {"bpm": 90, "key": None}, {"bpm": 120, "key": "D minor", "time_signature": 3}, b"not audio"
    ) == {
        "bpm": 90,
        "key": "D minor",
        "time_signature": 3,
        "facts_from": {"bpm": "asked", "key": "lm", "time_signature": "lm"},
    }


def test_every_song_of_a_real_node_records_its_tempo_and_key(cantor_home):
    """An instrumental (no LM step: the sketch takes tempo and key from the caption) gets
    measured values; a song with lyrics gets the LM's; an asked tempo stays asked."""
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                ids = [
                    await c.submit_song(
                        {
                            "caption": "warm house groove, 124 bpm, in G minor",
                            "duration": 30,
                            "seed": 2,
                            "model": "sketch",
                        }
                    ),
                    await c.submit_song(
                        {
                            "caption": "folk song",
                            "duration": 20,
                            "lyrics": "[Verse]\nmorning light on the river\n",
                            "bpm": 100,
                            "seed": 3,
                            "model": "sketch",
                        }
                    ),
                ]
                return [await until_state(c, i, ("done", "failed"), 120) for i in ids]
        finally:
            await node.stop()

    instrumental, vocal = asyncio.run(main())
    assert instrumental["state"] == vocal["state"] == "done"
    take = instrumental["takes"][0]
    sidecar = json.loads(Path(take["sidecar"]).read_text("utf-8"))
    assert sidecar["lm_metadata"] is None
    assert (sidecar["bpm"], sidecar["key"]) == (124, "G minor")
    assert sidecar["facts_from"] == {"bpm": "measured", "key": "measured"}
    # in the node's song JSON too (the take's facts)
    assert (take["bpm"], take["key"], take["facts_from"]) == (124, "G minor", sidecar["facts_from"])
    take = vocal["takes"][0]
    sidecar = json.loads(Path(take["sidecar"]).read_text("utf-8"))
    assert sidecar["bpm"] == 100 and sidecar["key"] == sidecar["lm_metadata"]["key"]
    assert sidecar["facts_from"]["bpm"] == "asked" and sidecar["facts_from"]["key"] == "lm"
    assert take["facts_from"] == sidecar["facts_from"] and take["bpm"] == 100
