"""`cantor sing` end to end: a private node started and stopped, or the running one used."""

from __future__ import annotations

import asyncio
import io
import re
import os
import subprocess
from pathlib import Path

import pytest
import soundfile as sf

from cantor_desktop.system.selfexec import self_argv

from support.procs import free_port
from support.node import Node, write_config


BAR_LINE = re.compile(r"^\[[#-]{28}\] +(\d+\.\d)%  (queued|lm|synth|saving|done)\b")


def sing(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + ["sing", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CANTOR_HOME": str(home)},
    )


def test_sing_with_a_private_node_prints_the_file_and_stops_the_node(cantor_home, tmp_path):
    port = free_port()
    write_config(cantor_home, **{})
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    lyrics = tmp_path / "words.txt"
    lyrics.write_text("[Verse]\nsing me a little song\n", "utf-8")
    out = tmp_path / "out.flac"
    result = sing(
        cantor_home,
        "sunny ukulele pop",
        "--lyrics",
        f"@{lyrics}",
        "--duration",
        "10",
        "--bpm",
        "110",
        "--key",
        "C major",
        "--seed",
        "5",
        "--format",
        "flac",
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    printed = Path(result.stdout.strip())
    assert printed == out and sf.info(str(out)).format == "FLAC"
    bar = result.stderr.splitlines()  # the progress bar
    # a 10-s sketch song renders in milliseconds: which stages the stream still catches
    # varies, so only what the CLI guarantees is checked: bar lines, stages in order, and
    # the last line at 100%
    assert bar and all(BAR_LINE.match(line) for line in bar), bar
    stages = [BAR_LINE.match(line).group(2) for line in bar]
    order = ["queued", "lm", "synth", "saving", "done"]
    assert [order.index(s) for s in stages] == sorted(order.index(s) for s in stages)
    assert "100.0%" in bar[-1] and stages[-1] == "done"
    songs = list((cantor_home / "songs").glob("*seed5.flac"))
    assert len(songs) == 1
    # the private node is gone: nothing answers on its port any more
    import socket

    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


def test_sing_uses_the_running_node_and_exit_codes(cantor_home):
    port = free_port()
    write_config(cantor_home)
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            ok = await asyncio.to_thread(
                sing, cantor_home, "minimal techno", "--instrumental", "--duration", "10"
            )
            bad = await asyncio.to_thread(sing, cantor_home, "x", "--bpm", "500")
            unknown = await asyncio.to_thread(sing, cantor_home, "x", "--model", "nope")
            missing = await asyncio.to_thread(sing, cantor_home, "x", "--lyrics", "@/no/such/file")
            async with node.client() as c:
                songs = await c.songs()
            return ok, bad, unknown, missing, songs, node.proc.running
        finally:
            await node.stop()

    ok, bad, unknown, missing, songs, still_running = asyncio.run(main())
    assert ok.returncode == 0, ok.stderr
    path = Path(ok.stdout.strip())
    assert path.exists() and path.parent == cantor_home / "songs"
    assert [s["state"] for s in songs] == ["done"]  # the running node made it
    assert still_running  # and was not stopped
    assert bad.returncode == 2
    assert bad.stderr.strip() == "cantor sing: bpm: must be from 30 to 300, not '500'"
    assert unknown.returncode == 2
    reason, hint = unknown.stderr.strip().splitlines()
    assert reason.startswith("cantor sing: model 'nope' is not installed")
    assert reason.endswith("installed: sketch")  # what there is instead
    assert "add --model sketch" in hint  # the next action for a newcomer
    assert missing.returncode == 2
    assert missing.stderr.startswith("cantor sing: lyrics: cannot read /no/such/file")


def test_sing_reports_a_failed_song_with_exit_1(cantor_home):
    """A song that fails at the node (its songs folder cannot be created) → exit 1, reason."""
    port = free_port()
    blocker = cantor_home / "blocked"
    blocker.write_text("a file where the songs folder should be")
    (cantor_home / "node.toml").write_text(
        f'[node]\nport = {port}\n[models]\ndefault = "sketch"\n[songs]\ndir = "{blocker / "songs"}"\n'
    )
    result = sing(cantor_home, "doomed song", "--duration", "10")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("cantor sing: the song failed: ")
    assert last.endswith(f"Not a directory: '{blocker / 'songs'}'")  # the node's reason


def test_every_stage_received_is_shown_and_done_ends_at_100(monkeypatch):
    """Stages that pass without a progress event of their own still get their line (not a
    terminal: one line per stage); a stream that only says ``done`` (a late subscriber)
    still ends on 100%."""
    from cantor_desktop.cli.follow import EventShower, ProgressBar
    from cantor_desktop.song.record import Song, SongEvent

    out = io.StringIO()
    show = EventShower(ProgressBar(out))
    events = [
        ("queued", {"position": 0}),
        ("stage", {"stage": "lm"}),
        ("stage", {"stage": "synth"}),
        ("stage", {"stage": "saving"}),
        ("progress", {"stage": "saving", "progress": 1.0, "eta": 0.0}),
        ("done", {}),
    ]
    song = Song(id="0123456789abcdef", request={})

    def fold(kind, data, record=song):
        record.apply(SongEvent.from_sse(kind, data, record.id))
        return record

    ended = [show(fold(e, d)) for e, d in events]
    assert ended == [False] * 5 + [True]
    lines = out.getvalue().splitlines()
    assert [BAR_LINE.match(line).group(2) for line in lines] == [
        "queued",
        "lm",
        "synth",
        "saving",
        "saving",
        "done",
    ]
    assert lines[-1].startswith("[" + "#" * 28 + "] 100.0%")

    late = io.StringIO()
    assert (
        EventShower(ProgressBar(late))(fold("done", {}, Song(id="0123456789abcdef", request={})))
        is True
    )
    assert late.getvalue().splitlines() == ["[" + "#" * 28 + "] 100.0%  done"]


def test_a_fresh_machine_sings_the_readme_example_with_the_sketch_and_says_so(
    cantor_home, tmp_path
):
    """No node.toml, no model: `cantor sing "lofi"` (the README's first example) fails no
    more; the node makes it with the Sketch and the CLI names both next steps."""
    port = free_port()
    (cantor_home / "node.toml").write_text(
        f'[node]\nport = {port}\n[songs]\ndir = "{cantor_home / "songs"}"\n'
    )
    folder = tmp_path / "Desktop" / "new"  # no extension: a folder, made
    result = sing(cantor_home, "lofi", "--duration", "10", "-o", str(folder))
    assert result.returncode == 0, result.stderr
    printed = Path(result.stdout.strip())
    assert printed.parent == folder and printed.suffix == ".wav" and printed.is_file()
    assert "no ACE-Step model is installed" in result.stderr
    assert "cantor pull acestep-v15-turbo" in result.stderr and "--model sketch" in result.stderr
    # a named file without the format's extension gets it
    named = sing(
        cantor_home,
        "lofi",
        "--duration",
        "10",
        "--format",
        "flac",
        "-o",
        str(tmp_path / "take.song"),
    )
    assert named.returncode == 0, named.stderr
    assert Path(named.stdout.strip()) == tmp_path / "take.song.flac"


def test_sing_never_uses_a_node_of_another_home(cantor_home, tmp_path):
    """A node of another CANTOR_HOME answers on the configured port: it cannot prove it
    holds this home's token, so `cantor sing` sends it nothing, names it, and starts no
    node of its own on top of it (not even a private one on a free port)."""
    other = tmp_path / "other-home"
    other.mkdir()
    port = free_port()
    for home in (cantor_home, other):
        write_config(home)
        with open(home / "node.toml", "a") as fh:
            fh.write(f"\n[node]\nport = {port}\n")

    async def main():
        node = await Node(other, port=port).start()
        try:
            async with node.client() as c:
                health = await c.health()
                result = await asyncio.to_thread(
                    sing, cantor_home, "lofi piano", "--model", "sketch", "--duration", "10"
                )
                return health, result, await c.songs()
        finally:
            await node.stop()

    health, result, their_songs = asyncio.run(main())
    assert set(health) == {"status", "version"}  # no home key for anyone to copy
    assert result.returncode != 0 and result.stdout == ""
    assert f"something else answers on port {port}" in result.stderr
    assert "it is not this Cantor's node" in result.stderr
    assert their_songs == []  # nothing sent to theirs
    assert not (cantor_home / "songs").exists()  # and no private node sang instead
