"""The controls behind "Advanced" reach the engine exactly: a real node on an ACE-Step model
(pulled from a hub on 127.0.0.1) whose engine is the scripted ace-server stand-in, which
records every /lm and /synth body it accepts. The same fields on the Sketch are accepted
and noted in its log."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.hub import ModelHub  # noqa: E402
from support.node import Node, write_config  # noqa: E402

SCRIPTED = Path(__file__).resolve().parent / "support" / "scripted_engine.py"
ADVANCED = {
    "steps": 12,
    "guidance": 4.5,
    "shift": 2.25,
    "solver": "dpm3m",
    "lm_temperature": 0.65,
    "lm_cfg": 3.5,
    "lm_top_p": 0.8,
    "lm_top_k": 40,
    "lm_negative_prompt": "no drums, not found, ERROR",
    "lock_caption": True,
}
# the song request's names → the engine's (engine.client.STYLE_NAMES, and lock_caption)
ENGINE = {
    "steps": "inference_steps",
    "guidance": "guidance_scale",
    "shift": "shift",
    "solver": "solver",
    "lm_temperature": "lm_temperature",
    "lm_cfg": "lm_cfg_scale",
    "lm_top_p": "lm_top_p",
    "lm_top_k": "lm_top_k",
    "lm_negative_prompt": "lm_negative_prompt",
}
LM_FIELDS = ("lm_temperature", "lm_cfg_scale", "lm_top_p", "lm_top_k", "lm_negative_prompt")
DIT_FIELDS = ("inference_steps", "guidance_scale", "shift", "solver")


def test_every_advanced_field_reaches_the_engine_request_exactly(cantor_home, tmp_path):
    record = tmp_path / "requests.jsonl"
    engine = tmp_path / "ace-server"
    script = json.dumps({"record": str(record), "dit_steps": 2})
    engine.write_text(
        f"#!/bin/sh\nSCRIPTED_ENGINE={shlex.quote(script)} exec "
        f'{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPTED))} "$@"\n'
    )
    engine.chmod(0o755)
    (cantor_home / "node.toml").write_text(
        f'[backends]\nacestep = "cpu"\n\n[engines.acestep]\npath = "{engine}"\n\n'
        f'[models]\ndefault = "acestep-v15-turbo"\nlm = "0.6B"\n\n'
        f'[songs]\ndir = "{cantor_home / "songs"}"\nformat = "wav16"\n'
    )

    async def main(hub):
        node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
        try:
            async with node.client() as c:
                pulled = [e async for e in c.pull("acestep-v15-turbo")]
                assert pulled[-1].type == "done", pulled[-1]
                ids = [
                    await c.submit_song(
                        {
                            "caption": "a song with words",
                            "duration": 10,
                            "lyrics": "[Verse]\nla la la",
                            **ADVANCED,
                        }
                    ),
                    await c.submit_song(
                        {
                            "caption": "an instrumental",
                            "duration": 10,
                            **{k: v for k, v in ADVANCED.items() if not k.startswith("lm_")},
                        }
                    ),
                ]
                songs = []
                for sid in ids:
                    async for event, _ in c.events(sid):
                        if event in ("done", "failed", "cancelled"):
                            break
                    songs.append(await c.song(sid))
                return songs
        finally:
            await node.stop()

    with ModelHub() as hub:
        hub.add_set()
        songs = asyncio.run(main(hub))
    assert [s["state"] for s in songs] == ["done", "done"], songs
    bodies = [json.loads(line) for line in record.read_text().splitlines()]
    songs_bodies = [
        b
        for b in bodies
        if b["body"]
        and (b["body"][0] if isinstance(b["body"], list) else b["body"])
        .get("caption", "")
        .startswith(("a song with words", "an instrumental"))
    ]
    lm = [b["body"] for b in songs_bodies if b["path"] == "/lm"]
    synth = [b["body"] for b in songs_bodies if b["path"] == "/synth"]
    assert len(lm) == 1 and len(synth) == 2
    for name in LM_FIELDS:
        assert lm[0][name] == ADVANCED[next(k for k, v in ENGINE.items() if v == name)], name
    assert lm[0]["use_cot_caption"] is False  # "lock my caption"
    for body in synth:
        first = body[0] if isinstance(body, list) else body
        for name in DIT_FIELDS:
            want = ADVANCED[next(k for k, v in ENGINE.items() if v == name)]
            assert first[name] == want and type(first[name]) is type(want), (name, first)
    instrumental = synth[1] if isinstance(synth[1], dict) else synth[1][0]
    assert not any(name in instrumental for name in LM_FIELDS)  # none asked: none sent
    for song in songs:
        sidecar = json.loads(Path(song["takes"][0]["sidecar"]).read_text("utf-8"))
        for field in ("steps", "guidance", "shift", "solver"):
            assert sidecar["request"][field] == ADVANCED[field]


@pytest.fixture
def sketch_home(cantor_home):
    write_config(cantor_home)
    return cantor_home


def test_the_sketch_accepts_and_notes_the_advanced_fields(sketch_home):
    async def main():
        node = await Node(sketch_home).start()
        try:
            async with node.client() as c:
                sid = await c.submit_song(
                    {
                        "caption": "a song",
                        "duration": 10,
                        "seed": 3,
                        "lyrics": "[Verse]\nla la la",
                        "model": "sketch",
                        **ADVANCED,
                    }
                )
                async for event, _ in c.events(sid):
                    if event in ("done", "failed", "cancelled"):
                        break
                return await c.song(sid)
        finally:
            await node.stop()

    song = asyncio.run(main())
    assert song["state"] == "done", song
    log = (sketch_home / "logs" / "engine-sketch.log").read_text("utf-8")
    neg = ADVANCED["lm_negative_prompt"].encode()
    assert (
        f"[Sketch] LM fields: lm_temperature=0.65, lm_cfg_scale=3.5, lm_top_p=0.8, "
        f"lm_top_k=40, use_cot_caption=false, negative_prompt={len(neg)} chars (crc32 "
        f"{zlib.crc32(neg):08x})"
    ) in log
    assert (
        "[Sketch] DiT fields: inference_steps=12, guidance_scale=4.5, shift=2.25, "
        "solver='dpm3m'" in log
    )
    assert "[DiT] Step 12/12" in log
