"""The edits through the real ace-server, as a user types them: repaint, extend and cover of
a song (the engine gets the song's kept latent as ``src_latents``, no VAE encode), what the
engine hears in a take (``cantor understand``), stems and a layer on the base DiT, and LoRA
adapters: one whose tensors fit the fabricated DiT is merged by the engine, one made for
layers the DiT does not have is refused by the engine, and the user reads its words."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import soundfile as sf
from real_engine.conftest import figure
from real_engine.fabricated import EDIT_SEED, lora_folder
from real_engine.real_build import needs_real_engine
from real_engine.real_node import EngineLog, set_up
from support.node import Node

from cantor_desktop.system.selfexec import self_argv

pytestmark = needs_real_engine
SEED = str(EDIT_SEED)  # eight audio codes: a 1.6-s song (a repaint is at least 1 s)
VOCAL = ["--lyrics", "la la la", "--bpm", "96", "--key", "A minor", "--time-signature", "4"]
SOURCE_LATENTS = r"^\[Server\] Source latents: (\d+) frames \(([\d.]+)s\), VAE encode skipped"
MISMATCH = "[Adapter] FATAL: no tensors merged (model mismatch)"
NEW_VERSE = "[Verse 2]\nthe second verse goes on"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + list(args),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "CANTOR_HOME": str(home)},
        check=False,
    )


def seconds(path: str) -> float:
    info = sf.info(path)
    assert (info.samplerate, info.channels) == (48000, 2), info
    return info.frames / 48000


@pytest.mark.timeout(1800)
def test_edits_through_the_real_engine(cantor_home, fabricated, real_engine, tmp_path):
    port = set_up(cantor_home, real_engine, fabricated)
    fits = lora_folder(tmp_path / "fits")  # q_proj and o_proj of layers 0 and 1, its shapes
    deeper = lora_folder(tmp_path / "deeper", layers=(10, 11))  # layers the DiT has not
    out: dict = {}

    async def step(name: str, *args: str) -> subprocess.CompletedProcess:
        log = EngineLog(cantor_home)
        done = await asyncio.to_thread(cli, cantor_home, *args)
        out[name] = (done, log.text())
        return done

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                source = await step(
                    "source", "sing", "dreamy synthwave", *VOCAL, "--duration", "10", "--seed", SEED
                )
                assert source.returncode == 0, source.stderr
                song = (await c.songs())[0]
                sid = song["id"]
                out["source_song"] = song
                await step(
                    "repaint",
                    "repaint",
                    sid,
                    "--from",
                    "0",
                    "--to",
                    "1",  # the node's shortest region
                    "guitar solo",
                )
                await step("extend", "extend", sid, "--after", "1")
                await step(
                    "extend_sung",
                    "extend",
                    sid,
                    "--after",
                    "1",
                    "--lyrics",
                    NEW_VERSE,
                    "--context",
                    "1",
                )
                await step("cover", "sing", "jazz trio", "--cover", sid, "--strength", "0.6")
                await step("understand", "understand", sid, "--json")
                await step("stems", "stems", sid, "--tracks", "drums")
                await step("layer", "layer", sid, "--track", "guitar", "funk guitar")
                await step("add_fits", "adapters", "add", str(fits), "--name", "fits")
                await step("add_deeper", "adapters", "add", str(deeper), "--name", "deeper")
                await step(
                    "lora",
                    "sing",
                    "dreamy synthwave",
                    *VOCAL,
                    "--duration",
                    "10",
                    "--seed",
                    SEED,
                    "--adapter",
                    "fits",
                )
                await step(
                    "lora_refused",
                    "sing",
                    "dreamy synthwave",
                    *VOCAL,
                    "--duration",
                    "10",
                    "--seed",
                    SEED,
                    "--adapter",
                    "deeper",
                )
                out["songs"] = await c.songs()
        finally:
            await node.stop()

    asyncio.run(main())
    songs = {s["id"]: s for s in out["songs"]}
    source = out["source_song"]
    length = source["takes"][0]["duration"]
    frames = round(length * 25)
    accepted = []

    def took(name: str) -> str:
        done, log = out[name]
        assert done.returncode == 0, (name, done.stderr, log[-2000:])
        accepted.append(name)
        return log

    def take_of(name: str) -> dict:
        path = out[name][0].stdout.strip().splitlines()[-1]
        song = next(s for s in songs.values() if s["takes"] and s["takes"][0]["audio"] == path)
        assert song["state"] == "done"
        return song

    for name in ("repaint", "extend", "cover"):
        log = took(name)
        found = re.search(SOURCE_LATENTS, log, re.M)
        assert found and int(found.group(1)) == frames, (name, log[-2000:])
    assert abs(seconds(take_of("repaint")["takes"][0]["audio"]) - length) < 0.05
    assert abs(seconds(take_of("extend")["takes"][0]["audio"]) - (length + 1)) < 0.1
    assert abs(seconds(take_of("cover")["takes"][0]["audio"]) - length) < 0.05
    for name in ("repaint", "extend", "cover"):
        assert take_of(name)["request"]["source"] == {"song": source["id"], "take": 1}

    # a sung extend: the LM ran on the new lines, the new part heard the song's last
    # second (as latent frames of its reference), and only the join was repainted
    log = took("extend_sung")
    assert re.search(r"^\[LM-Phase2 Batch0\] seed=\d+, [1-9]\d* codes", log, re.M), log[-3000:]
    assert re.search(r"^\[Encode-Timbre\] ref_audio: 25 frames \(1\.0s\)", log, re.M), log[-3000:]
    sung = take_of("extend_sung")
    joined = json.loads(Path(sung["takes"][0]["sidecar"]).read_text("utf-8"))["engine_request"]
    assert joined["task_type"] == "repaint" and joined["lyrics"] == NEW_VERSE, joined
    assert joined["continuation"]["lm"]["lyrics"] == NEW_VERSE
    start, end = joined["repainting_start"], joined["repainting_end"]
    assert re.search(rf"^\[Region\] {start:.1f}s\.\.{end:.1f}s", log, re.M), log[-3000:]
    assert seconds(sung["takes"][0]["audio"]) > length
    assert sung["request"]["lyrics"].endswith(NEW_VERSE)

    log = took("understand")
    heard = json.loads(out["understand"][0].stdout)
    assert set(heard) >= {"caption", "bpm", "key", "time_signature", "duration"}, heard
    assert re.search(rf"^\[Server\] Understand source: {frames} latent frames", log, re.M), log

    for name, task in (("stems", "extract"), ("layer", "lego")):
        log = took(name)
        assert re.search(SOURCE_LATENTS, log, re.M), log[-2000:]
        assert "acestep-v15-base-Q4_0.gguf" in log, log[-2000:]
        made = [s for s in songs.values() if s["request"].get("task") == task]
        assert (
            made
            and made[0]["state"] == "done"
            and made[0]["request"]["model"].startswith("acestep-v15-base")
        ), made

    assert out["add_fits"][0].returncode == 0, out["add_fits"][0].stderr
    assert out["add_deeper"][0].returncode == 0, out["add_deeper"][0].stderr
    log = took("lora")
    assert re.search(r"^\[Adapter\] Merge time", log, re.M), log[-3000:]
    refused, log = out["lora_refused"]
    assert refused.returncode == 1 and MISMATCH in log, (refused.stderr, log[-3000:])
    assert MISMATCH in refused.stderr, refused.stderr  # the engine's own words, to the user
    figure(
        "edits through the real engine, each accepted (or refused in the engine's words)",
        len(accepted) + int(MISMATCH in refused.stderr),
        9,
        f"accepted: {', '.join(accepted)}; the deeper LoRA refused: {MISMATCH}",
    )
