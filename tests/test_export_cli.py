"""`cantor export` end to end: a real node (sketch engine), the CLI as a process."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
from pathlib import Path

import soundfile as sf

from cantor_desktop import config
from cantor_desktop.export import loudness as lu
from cantor_desktop.system.selfexec import self_argv

from support.procs import free_port
from test_export import reference_loudness
from support.node import Node, until_state, write_config


def cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + ["export", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CANTOR_HOME": str(home)},
    )


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_export_a_songs_takes_from_a_running_node(cantor_home, tmp_path):
    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    out = tmp_path / "export"

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                song_id = await c.submit_song(
                    {
                        "caption": "dreamy synthwave: night/drive 🌙",
                        "duration": 20,
                        "bpm": 110,
                        "key": "D# minor",  # typed so; written as musicians do: E♭ minor
                        "seed": 7,
                        "batch": 2,
                        "model": "sketch",
                    }
                )
                song = await until_state(c, song_id, ("done", "failed"), 120)
                originals = {f["audio"]: sha(f["audio"]) for f in song["takes"]}
                runs = {}
                runs["all"] = await asyncio.to_thread(
                    cli,
                    cantor_home,
                    song_id,
                    "--format",
                    "flac",
                    "--rate",
                    "44100",
                    "--loudness",
                    "-14",
                    "--peak",
                    "-1",
                    "-o",
                    str(out),
                )
                runs["take2"] = await asyncio.to_thread(
                    cli,
                    cantor_home,
                    song_id,
                    "--take",
                    "2",
                    "--format",
                    "mp3",
                    "-o",
                    str(out / "mp3"),
                )
                runs["bad_take"] = await asyncio.to_thread(
                    cli, cantor_home, song_id, "--take", "5", "-o", str(out)
                )
                runs["unknown"] = await asyncio.to_thread(
                    cli, cantor_home, "0123456789abcdef", "-o", str(out)
                )
                runs["bad_loudness"] = await asyncio.to_thread(
                    cli, cantor_home, song_id, "--loudness", "loud", "-o", str(out)
                )
                runs["bad_rate"] = await asyncio.to_thread(
                    cli, cantor_home, song_id, "--rate", "96000", "-o", str(out)
                )
                runs["file"] = await asyncio.to_thread(
                    cli,
                    cantor_home,
                    song["takes"][0]["audio"],
                    "--format",
                    "wav24",
                    "--loudness",
                    "off",
                    "-o",
                    str(out / "direct"),
                )
                after = {path: sha(path) for path in originals}
                return song, originals, after, runs, node.proc.running
        finally:
            await node.stop()

    song, originals, after, runs, running = asyncio.run(main())
    assert song["state"] == "done" and len(song["takes"]) == 2
    assert after == originals  # the node's files untouched
    assert running  # the running node was used

    r = runs["all"]
    assert r.returncode == 0, r.stderr
    paths = [Path(line) for line in r.stdout.splitlines()]
    assert [p.name for p in paths] == [
        "dreamy-synthwave-night-drive_110bpm_Ebm_take1.flac",
        "dreamy-synthwave-night-drive_110bpm_Ebm_take2.flac",
    ]
    from mutagen.flac import FLAC

    for take, path in enumerate(paths, start=1):
        audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
        assert rate == 44100 and abs(len(audio) / rate - 20.0) < 0.01
        assert abs(reference_loudness(audio, rate) + 14.0) <= 0.5
        assert lu.true_peak(audio, rate) <= -1.0 + 0.01
        tags = FLAC(str(path))
        assert tags["BPM"] == ["110"] and tags["KEY"] == ["Ebm"]
        assert tags["CANTOR_SEED"] == [str(song["takes"][take - 1]["seed"])]
        assert tags["CANTOR_TAKE"] == [f"{take}/2"] and tags["CANTOR_BPM_SOURCE"] == ["asked"]
    assert not list(out.rglob("*.part"))

    r = runs["take2"]
    assert r.returncode == 0, r.stderr
    (mp3,) = [Path(line) for line in r.stdout.splitlines()]
    assert mp3.name.endswith("_take2.mp3") and sf.info(str(mp3)).samplerate == 44100  # remembered

    assert runs["bad_take"].returncode == 2 and "take" in runs["bad_take"].stderr
    assert runs["unknown"].returncode == 2 and "0123456789abcdef" in runs["unknown"].stderr
    assert runs["bad_loudness"].returncode == 2
    assert runs["bad_loudness"].stderr.startswith("cantor export: loudness:")
    assert runs["bad_rate"].returncode == 2 and "rate" in runs["bad_rate"].stderr

    r = runs["file"]
    assert r.returncode == 0, r.stderr
    (direct,) = [Path(line) for line in r.stdout.splitlines()]
    assert direct.name == "dreamy-synthwave-night-drive_110bpm_Ebm_take1.wav"
    info = sf.info(str(direct))
    assert info.samplerate == 44100 and info.subtype == "PCM_24"

    # what was given is remembered (the last successful run's choices)
    cfg = config.load()
    assert cfg.get("export.format") == "wav24" and cfg.get("export.rate") == 44100
    assert cfg.get("export.loudness") == "off" and cfg.get("export.peak") == "-1"


def test_export_with_no_node_running_starts_a_private_one(cantor_home, tmp_path):
    """A song id with no node up: a private node is started (and stopped); the id is
    unknown to it, so the answer is 2 with the node's reason."""
    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    r = cli(cantor_home, "fedcba9876543210", "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "fedcba9876543210" in r.stderr
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        up = True
    except OSError:
        up = False
    assert not up
