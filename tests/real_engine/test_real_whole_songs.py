"""Whole songs through the product on the real ace-server and the fabricated models
(fabricated.py): ``cantor models import`` and ``cantor sing`` as a user types them, the app's
node link (Compose → Generate → Songs), and keep-loaded. The takes are decoded; every
diffusion step the engine prints is a progress event of the song."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest
import soundfile as sf

from real_engine.conftest import figure
from real_engine.fabricated import SHORT_SEEDS, TURBO_MODEL
from real_engine.real_build import needs_real_engine
from real_engine.real_node import EngineLog, configure, set_up
from support.node import Node

from cantor_desktop.system.selfexec import self_argv

pytestmark = needs_real_engine
VOCAL = ["--lyrics", "la la la", "--bpm", "96", "--key", "A minor", "--time-signature", "4"]
SAVING_FROM = 0.95  # node/song_progress.py: engine work fills 0..0.95 of a song's progress
INSTRUMENTAL_SYNTH = (0.0, 0.85)  # engine/progress.py: the synth stage's band
VOCAL_SYNTH = (0.35, 0.90)


def cli(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CANTOR_HOME": str(home)},
        check=False,
    )


async def record_events(client, into: list) -> None:
    async for kind, data in client.all_events():
        into.append((kind, data))


def steps(log_text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^\[DiT\] Step (\d+)/(\d+)", log_text, re.M)]


def assert_step_events(events: list, song_id: str, n: int, band: tuple[float, float]) -> None:
    """A progress event for each of the song's ``n`` diffusion steps, at the place the
    step puts the song (the synth stage's band of the whole, times the engine's share)."""
    seen = [
        d["progress"]
        for kind, d in events
        if kind == "progress" and d.get("id") == song_id and d.get("stage") == "synth"
    ]
    lo, hi = band
    for k in range(1, n + 1):
        want = (lo + (hi - lo) * k / n) * SAVING_FROM
        assert any(abs(p - want) < 1e-4 for p in seen), (k, n, want, seen)  # 4 decimals


def decoded(path: Path) -> sf.SoundFile:
    with sf.SoundFile(path) as f:
        return f


@pytest.mark.timeout(1800)
def test_cantor_sing_makes_an_instrumental_and_a_vocal_song(cantor_home, fabricated, real_engine):
    port = configure(cantor_home, real_engine, fmt="wav24")
    imported = cli(cantor_home, "models", "import", str(fabricated.folder))
    assert imported.returncode == 0, imported.stderr
    listed = cli(cantor_home, "models")
    assert re.search(r"^acestep-v15-turbo-Q4_0\s+ready", listed.stdout, re.M), listed.stdout
    events: list = []
    results = {}

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                reader = asyncio.ensure_future(record_events(c, events))
                log = EngineLog(cantor_home)
                results["instrumental"] = await asyncio.to_thread(
                    cli,
                    cantor_home,
                    "sing",
                    "lofi piano",
                    "--instrumental",
                    "--duration",
                    "10",
                    "--seed",
                    "3",
                )
                results["instrumental_log"] = log.text()
                log = EngineLog(cantor_home)
                for n in (1, 2):
                    results[f"vocal{n}"] = await asyncio.to_thread(
                        cli,
                        cantor_home,
                        "sing",
                        "dreamy synthwave",
                        *VOCAL,
                        "--duration",
                        "10",
                        "--seed",
                        str(SHORT_SEEDS[0]),
                        "--format",
                        "wav16",
                    )
                results["vocal_log"] = log.text()
                results["songs"] = await c.songs()
                reader.cancel()
        finally:
            await node.stop()

    asyncio.run(main())
    songs = {s["id"]: s for s in results["songs"]}
    assert len(songs) == 3 and all(s["state"] == "done" for s in songs.values()), songs

    # the instrumental: 10 s, 48 kHz stereo, 24-bit, as asked; 8 steps, each an event
    done = results["instrumental"]
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype) == (48000, 2, "PCM_24"), info
    assert abs(info.frames / 48000 - 10.0) < 0.05, info.frames
    instrumental = next(s for s in songs.values() if s["request"]["lyrics"] == "[Instrumental]")
    assert steps(results["instrumental_log"]) == [(k, 8) for k in range(1, 9)]
    assert_step_events(events, instrumental["id"], 8, INSTRUMENTAL_SYNTH)

    # the vocal songs: /lm then /synth; as long as the LM's audio codes (0.2 s each), the
    # same codes and length for the same seed; wav16
    takes = []
    for n in (1, 2):
        done = results[f"vocal{n}"]
        assert done.returncode == 0, done.stderr
        path = Path(done.stdout.strip().splitlines()[-1])
        info = sf.info(str(path))
        assert (info.samplerate, info.channels, info.subtype) == (48000, 2, "PCM_16"), info
        takes.append(info.frames)
    vocal = [s for s in songs.values() if s["request"]["lyrics"] == "la la la"]
    assert len(vocal) == 2
    sidecars = [Path(s["takes"][0]["sidecar"]) for s in vocal]
    codes = [json.loads(p.read_text())["lm_metadata"]["audio_codes"] for p in sidecars]
    assert codes[0] == codes[1] and codes[0], codes  # the seed decides the LM's codes too
    n_codes = len(codes[0].split(","))
    # 5 latent frames a code (25 Hz), rounded up to the DiT's patch of 2; 1920 samples a frame
    assert takes[0] == takes[1] == math.ceil(n_codes * 5 / 2) * 2 * 1920, (takes, n_codes)
    vocal_log = results["vocal_log"]
    assert len(re.findall(r"^\[Server\] Job \w+ created \(LM", vocal_log, re.M)) == 2
    assert steps(vocal_log) == [(k, 8) for k in range(1, 9)] * 2
    for s in vocal:
        assert_step_events(events, s["id"], 8, VOCAL_SYNTH)
    figure(
        "whole songs through cantor sing on the real engine",
        sum(1 for s in songs.values() if s["state"] == "done"),
        len(songs),
        f"instrumental 10.0 s wav24; vocal {n_codes} codes = {n_codes * 0.2:.1f} s wav16, "
        f"twice the same for seed {SHORT_SEEDS[0]}",
    )


@pytest.mark.timeout(1800)
def test_the_apps_node_link_sings_twice_with_the_models_kept_loaded(
    qapp, qloop, cantor_home, fabricated, real_engine
):
    """Compose → Generate → Songs in the app, on a node running the real engine with
    keep-loaded on: both songs are done and their takes play; the engine loaded its models
    for the first song only (its ``[Store] Load`` lines), and unloaded none."""
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.node_link import NodeLink
    from support.ui import run, until

    port = set_up(cantor_home, real_engine, fabricated, keep_loaded=True)
    node = run(qloop, Node(cantor_home, port=port).start())
    try:
        shell = Shell(qapp, NodeLink(url=node.url, start_child=False))
        run(qloop, shell.link.connection.open())
        progress: list[tuple[str, float]] = []
        shell.link.songs.updated.connect(lambda r: progress.append((r.id, r.progress)))
        compose, songs = shell.window.compose, shell.window.songs
        # the model the musician picks (the list holds the node's ready models)
        run(
            qloop,
            until(lambda: compose.model.findData(TURBO_MODEL) >= 0, 60, "the model list"),
        )
        compose.model.setCurrentIndex(compose.model.findData(TURBO_MODEL))
        logs = []
        for n in (1, 2):
            log = EngineLog(cantor_home)
            compose.caption.setPlainText("dreamy synthwave")
            compose.instrumental.setChecked(False)
            compose.lyrics.setPlainText("la la la")
            compose.duration.setText("10")
            compose.bpm.setText("96")
            compose.key.setCurrentText("A minor")
            compose.time_signature.setCurrentIndex(compose.time_signature.findData("4"))
            compose.seed.setText(str(SHORT_SEEDS[n - 1]))
            compose.seed_lock.setChecked(True)
            compose.generate.click()
            run(
                qloop,
                until(
                    lambda n=n: (
                        songs.model.rowCount() >= n
                        and all(songs.model.row(i).song.state == "done" for i in range(n))
                    ),
                    timeout=900,
                    what=f"song {n} to finish",
                ),
            )
            logs.append(log.text())
        records = [songs.model.row(i).song for i in range(2)]
        for rec in records:
            take = rec.takes[0]
            info = sf.info(take.audio)
            assert (info.samplerate, info.channels) == (48000, 2)
            assert info.frames > 0 and abs(info.frames / 48000 - take.duration) < 0.01
        ids = {rec.id for rec in records}
        for sid in ids:
            seen = [p for i, p in progress if i == sid]
            assert seen and seen[-1] == 1.0 and seen == sorted(seen), seen
    finally:
        run(qloop, node.stop())
    first, second = logs
    loads = [re.findall(r"^\[Store\] Load ([\w-]+):", text, re.M) for text in logs]
    figure(
        "keep-loaded: the second song loads no model again",
        int(bool(loads[0]) and not loads[1]),
        1,
        f"first song loaded {', '.join(loads[0])}; the second {', '.join(loads[1]) or 'nothing'}",
    )
    assert (
        "--keep-loaded" in first
        or "--keep-loaded" in (cantor_home / "logs" / "engine-acestep.log").read_text()
    )
    assert {"LM", "DiT", "VAE-Dec"} <= set(loads[0]), loads[0]
    assert loads[1] == [], second
    assert "[Store] Unload" not in first + second
    assert len(re.findall(r"^\[DiT\] Step \d+/8", second, re.M)) == 8
