"""The editing commands (`cantor songs`, `repaint`, `extend`, `understand`, `stems`, `layer`,
`complete`, `sing --cover`) on real nodes: bad input exits 2 naming the option before any
node is asked; what each command sends is what the node records; a node without a base
model refuses stems with the model's size and the CLI prints the pull command; after the
pull the stems are made on the base model and saved as {title}_{track}.

The end-to-end checks of the audio (repaint keeps what is outside the region, extend keeps
the song, stems are the parts, cover keeps the tempo, understand hears tempo and key) run on
the real Sketch once it does edits (branch sketch-edit); until then they are skipped, and
say why."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from cantor_desktop.system.selfexec import self_argv

from support.procs import free_port
from support.node import Node, until_state, write_config

SONG_ID = re.compile(r"^[0-9a-f]{16}$")


def cantor(
    home: Path, *args: str, timeout: float = 90, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CANTOR_HOME": str(home), **(env or {})},
    )


def node_config(home: Path, port: int, **extra: str) -> None:
    write_config(home, **extra)
    with open(home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")


@contextlib.asynccontextmanager
async def node_and_cli(home: Path):
    """A node for ``home`` on a free port, its client, and ``run(*args)``: the CLI on it, in a
    thread (the node keeps answering meanwhile)."""
    port = free_port()
    node_config(home, port)
    node = await Node(home, port=port).start()
    try:
        async with node.client() as client:
            yield client, lambda *a: asyncio.to_thread(cantor, home, *a)
    finally:
        await node.stop()


async def sketch_song(
    client, seconds: float = 20, bpm: int = 100, caption: str = "lofi piano rain", **more
) -> dict:
    answer = await client.queue_song(
        {"caption": caption, "duration": seconds, "bpm": bpm, "model": "sketch", "seed": 7, **more}
    )
    song = await until_state(client, answer["id"], ("done", "failed"))
    assert song["state"] == "done", song
    return song


def read(path) -> tuple[np.ndarray, int]:
    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return data, rate


# -- bad input: exit 2 naming the option, before any node is asked ----------------------------


class Listener:
    """A socket where a node would be: counts who connects (nobody should)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        return self

    def connections(self) -> int:
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def __exit__(self, *exc):
        self.sock.close()


BAD_INPUT = [
    (["repaint", "0123456789abcdef", "--from", "8", "--to", "5"], "region (--from/--to)"),
    (["repaint", "0123456789abcdef", "--from", "1:75", "--to", "2:00"], "region.start (--from)"),
    (["repaint", "0123456789abcdef", "--from", "soon", "--to", "5"], "is not a time"),
    (["repaint", "0123456789abcdef", "--from", "9:00", "--to", "11:00"], "past 10 minutes"),
    (["extend", "0123456789abcdef"], "give --after S and/or --before S"),
    (["extend", "0123456789abcdef", "--after", "0.5"], "at least 1 s"),
    (["stems", "0123456789abcdef", "--tracks", "drums,kazoo"], "tracks (--tracks): 'kazoo'"),
    (["stems", "0123456789abcdef", "-o", "stems.wav"], "-o: stems.wav names a file"),
    (["layer", "0123456789abcdef", "--track", "kazoo", "x"], "track (--track)"),
    (
        ["layer", "0123456789abcdef", "--track", "guitar", "x", "--from", "2"],
        "give both --from and --to",
    ),
    (["complete", "0123456789abcdef", "--track", "vocals,kazoo", "x"], "track (--track)"),
    (["sing", "x", "--strength", "0.5"], "strength (--strength): goes with --cover"),
    (
        ["sing", "x", "--cover", "0123456789abcdef", "--strength", "2"],
        "strength (--strength): must be from 0 to 1",
    ),
    (["sing", "x", "--cover", "/no/such/song.wav"], "--cover: '/no/such/song.wav': no such file"),
    (["repaint", "/no/such.wav", "--from", "1", "--to", "3"], "SONG: '/no/such.wav': no such file"),
    (["repaint", "not-an-id", "--from", "1", "--to", "3"], "neither a song id"),
    (["repaint", "0123456789abcdef:0", "--from", "1", "--to", "3"], "counted from 1"),
    (["understand", "/no/such.flac"], "FILE: '/no/such.flac': no such file"),
    (
        ["repaint", "0123456789abcdef", "--from", "1", "--to", "3", "--lyrics", "@/no/words.txt"],
        "lyrics (--lyrics): cannot read",
    ),
]


@pytest.mark.parametrize(
    "args,expected",
    BAD_INPUT,
    ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _e) in enumerate(BAD_INPUT)],
)
def test_bad_input_exits_2_naming_the_option_before_any_node_is_asked(
    args, expected, capsys, tmp_path, monkeypatch
):
    from cantor_desktop.cli.main import main

    monkeypatch.chdir(tmp_path)
    with Listener() as where:
        code = main(args + ["--node", where.url])
        err = capsys.readouterr().err
        assert code == 2, err
        assert expected in err, err
        assert where.connections() == 0  # refused here, not by a node


def test_arguments_parse_as_a_musician_types_them():
    """A CAPTION may follow the options; times in seconds or minutes:seconds; tracks by
    name, in any case, with spaces, or all; a complete names several parts."""
    from cantor_desktop.cli.edit_common import PLACEHOLDER, parse_song_arg
    from cantor_desktop.cli.main import build_parser
    from cantor_desktop.cli import complete_cmd, repaint_cmd
    from cantor_desktop.song.edits import parse_seconds, parse_tracks
    from cantor_desktop.song.request import TRACKS, validate

    parser = build_parser()
    args = parser.parse_args(
        [
            "repaint",
            "0123456789abcdef:2",
            "--from",
            "1:05",
            "--to",
            "75.5",
            "jazzy piano",
            "--seed",
            "3",
        ]
    )
    request = repaint_cmd.make_request(args)(PLACEHOLDER, [])
    assert validate(request).region == {"start": 65.0, "end": 75.5}
    assert request["caption"] == "jazzy piano" and request["seed"] == "3"
    assert parser.parse_args(["extend", "ab12", "--after", "30"]).caption is None
    assert parser.parse_args(["extend", "ab12", "rainy", "--after", "30"]).caption == "rainy"
    assert parse_song_arg("0123456789ABCDEF:2").song == "0123456789abcdef"
    assert parse_song_arg("0123456789abcdef:2").take == 2
    assert parse_song_arg("ab12").song == "ab12" and parse_song_arg("ab12").take is None
    assert parse_tracks("Drums, backing vocals") == ["backing_vocals", "drums"]
    assert parse_tracks("bass,drums,bass") == ["drums", "bass"]  # the engine's order, once
    assert parse_tracks("all") == list(TRACKS)
    assert parse_seconds("0:59.5", "x") == 59.5
    args = parser.parse_args(["complete", "ab12", "--track", "vocals, drums", "a song"])
    request = complete_cmd.make_request(args)(PLACEHOLDER, [])
    assert validate(request).track == "vocals | drums"


def test_the_model_of_an_edit():
    """Extract, lego and complete go to a ready base model (the one the node names first),
    a Sketch song stays with the Sketch, the model asked wins; other edits keep the song's."""
    from cantor_desktop.song.edits import base_offer, model_for

    turbo = {"name": "acestep-v15-turbo-Q8_0", "variant": "turbo", "state": "ready"}
    base4 = {"name": "acestep-v15-base-Q4_K_M", "variant": "base", "state": "ready"}
    base8 = {
        "name": "acestep-v15-base-Q8_0",
        "variant": "base",
        "state": "not downloaded",
        "download_bytes": 2 * 2**30,
    }
    xl = {"name": "acestep-v15-xl-base-Q8_0", "variant": "xl-base", "state": "ready"}
    assert model_for("extract", "acestep-v15-turbo-Q8_0", [turbo]) == "acestep-v15-turbo-Q8_0"
    assert (
        model_for("extract", "acestep-v15-turbo-Q8_0", [turbo, base8]) == "acestep-v15-turbo-Q8_0"
    )  # not downloaded is not a base to use
    assert (
        model_for("lego", "acestep-v15-turbo-Q8_0", [turbo, xl, base4]) == "acestep-v15-base-Q4_K_M"
    )
    assert model_for("complete", None, [xl]) == "acestep-v15-xl-base-Q8_0"
    assert model_for("extract", "sketch", [base4]) == "sketch"
    assert (
        model_for("extract", "sketch", [base4], asked="acestep-v15-base-Q4_K_M")
        == "acestep-v15-base-Q4_K_M"
    )
    assert model_for("repaint", "acestep-v15-turbo-Q8_0", [base4]) == "acestep-v15-turbo-Q8_0"
    assert model_for("repaint", None, [base4]) is None  # the node's default
    assert base_offer([turbo, xl, base8])["name"] == "acestep-v15-base-Q8_0"


# -- what each command sends, as the node records it (the real Sketch renders) ----------------


def test_every_command_sends_what_was_asked_and_songs_lists_the_versions(cantor_home, tmp_path):
    file = tmp_path / "my song.wav"

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(c, 20, lyrics="[Verse]\nla la la")
            await c.audio(root["id"], file)
            results = {
                "repaint": await run(
                    "repaint", root["id"][:6] + ":1", "--from", "2", "--to", "0:05", "jazzy piano"
                ),
                "extend": await run("extend", root["id"], "--after", "5"),
                "cover": await run(
                    "sing",
                    "fast drum and bass",
                    "--cover",
                    str(file),
                    "--strength",
                    "0.4",
                    "-o",
                    str(tmp_path / "cover"),
                ),
                "stems": await run(
                    "stems", root["id"], "--tracks", "bass,drums", "-o", str(tmp_path / "stems")
                ),
                "file stems": await run(
                    "stems", str(file), "--tracks", "bass", "-o", str(tmp_path / "file stems")
                ),
                "layer": await run(
                    "layer",
                    root["id"],
                    "--track",
                    "guitar",
                    "funky guitar",
                    "--from",
                    "1",
                    "--to",
                    "4",
                ),
                "complete": await run(
                    "complete", str(file), "--track", "vocals, drums", "a pop song"
                ),
            }
            listed = await run("songs", "--json")
            table = await run("songs")
            songs = {s["id"]: s for s in await c.songs()}
        return root, results, json.loads(listed.stdout), table, songs

    root, results, listed, table, songs = asyncio.run(main())
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stderr)
    for name, result in results.items():
        paths = [Path(line) for line in result.stdout.splitlines()]
        assert paths and all(p.is_file() for p in paths), (name, result.stdout)
    made = {}
    for song in songs.values():
        made.setdefault(song["request"].get("task") or "text2music", []).append(song)
    source = {"song": root["id"], "take": 1}
    (repaint,) = [s["request"] for s in made["repaint"]]
    assert (
        Path(results["repaint"].stdout.strip()).name
        == Path(made["repaint"][0]["takes"][0]["audio"]).name
    )
    assert repaint["task"] == "repaint" and repaint["source"] == source
    assert repaint["region"] == {"start": 2.0, "end": 5.0} and repaint["caption"] == "jazzy piano"
    assert repaint["lyrics"] == "[Verse]\nla la la" and repaint["model"] == "sketch"  # the song's
    (extend,) = [s["request"] for s in made["extend"]]
    assert (
        extend["extend"] == {"before": 0.0, "after": 5.0}
        and extend["caption"] == root["request"]["caption"]
    )
    (cover,) = [s for s in songs.values() if s["request"].get("task") == "cover"]
    assert set(cover["request"]["source"]) == {"upload"} and cover["request"]["strength"] == 0.4
    assert cover["request"]["caption"] == "fast drum and bass"
    assert Path(results["cover"].stdout.strip()).parent == tmp_path / "cover"
    (file_stem,) = [s for s in made["extract"] if "upload" in s["request"]["source"]]
    assert file_stem["title"] == "my song_bass" and file_stem["request"]["track"] == "bass"
    assert [p.name for p in (tmp_path / "file stems").iterdir()] == ["my song_bass.wav"]
    stems = sorted(
        (s for s in made["extract"] if s is not file_stem), key=lambda s: s["request"]["track"]
    )
    assert [s["request"]["track"] for s in stems] == ["bass", "drums"]
    assert all(
        s["request"]["source"] == source and s["request"]["model"] == "sketch" for s in stems
    )
    assert [s["title"] for s in stems] == ["lofi-piano-rain_bass", "lofi-piano-rain_drums"]
    assert sorted(p.name for p in (tmp_path / "stems").iterdir()) == [
        "lofi-piano-rain_bass.wav",
        "lofi-piano-rain_drums.wav",
    ]
    assert [Path(line).name for line in results["stems"].stdout.splitlines()] == [
        "lofi-piano-rain_drums.wav",
        "lofi-piano-rain_bass.wav",
    ]  # the engine's order
    (layer,) = [s["request"] for s in songs.values() if s["request"].get("task") == "lego"]
    assert layer["track"] == "guitar" and layer["region"] == {"start": 1.0, "end": 4.0}
    assert layer["model"] == "sketch" and layer["caption"] == "funky guitar"
    (complete,) = [s["request"] for s in songs.values() if s["request"].get("task") == "complete"]
    assert complete["track"] == "vocals | drums" and set(complete["source"]) == {"upload"}

    # songs --json: every song with its id, newest first, versions naming their parent
    assert [s["id"] for s in listed] == sorted(
        songs, key=lambda i: songs[i]["created"], reverse=True
    )
    by_id = {s["id"]: s for s in listed}
    assert by_id[root["id"]]["parent"] is None and by_id[root["id"]]["task"] == "text2music"
    assert by_id[stems[0]["id"]]["parent"] == source
    assert by_id[stems[0]["id"]]["name"] == "lofi-piano-rain_bass"
    assert by_id[root["id"]]["takes"][0]["bpm"] == 100
    # and as a table: a line per song with its id, state, takes, tempo, model, parent
    lines = table.stdout.splitlines()
    assert lines[0].split()[:8] == ["ID", "STATE", "TAKES", "BPM", "KEY", "MODEL", "FROM", "EDIT"]
    stem_line = next(line for line in lines if line.startswith(stems[1]["id"]))
    assert root["id"] in stem_line and "stem drums" in stem_line and "done" in stem_line
    assert "lofi-piano-rain_drums" in stem_line and " 100 " in stem_line


def test_the_node_refusing_an_edit_is_exit_2_with_its_reason(cantor_home, tmp_path):
    """What only the node can know: a region past the song's end, an unknown or ambiguous
    id, a song that failed, a file that is not audio (uploaded, refused, nothing kept)."""
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are my notes, not a song\n" * 50)

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(c, 10)
            return (
                root,
                [
                    await run("repaint", root["id"], "--from", "8", "--to", "14"),
                    await run("extend", "ffffffffffffffff", "--after", "10"),
                    await run("stems", root["id"] + ":2", "--tracks", "drums"),
                    await run("understand", str(not_audio)),
                    await run("sing", "x", "--cover", root["id"][:3]),
                ],
                await c.songs(),
            )

    root, (past, unknown, take, not_audio_result, short), songs = asyncio.run(main())
    assert past.returncode == 2 and "region" in past.stderr and "past the end" in past.stderr
    assert unknown.returncode == 2 and "no song with id ffffffffffffffff" in unknown.stderr
    assert take.returncode == 2 and "has 1 take(s), not take 2" in take.stderr
    assert not_audio_result.returncode == 2
    assert "FILE: notes.wav was refused" in not_audio_result.stderr
    assert short.returncode == 2 and "neither a song id" in short.stderr  # 3 digits: too few
    assert len(songs) == 1  # nothing queued by any of them
    assert not any((cantor_home / "state" / "uploads").glob("*.wav"))


# -- stems need a base model: the node's refusal with the size, the pull, then the stems -------


def test_stems_without_a_base_model_name_it_with_its_size_then_after_the_pull_are_made(
    cantor_home, tmp_path
):
    from support.edit_nodes import hub_with_turbo_and_base, sketch_as_acestep
    from support.hub import ModelHub

    port = free_port()
    sketch_as_acestep(cantor_home, tmp_path, port)
    with ModelHub() as hub:
        hub_with_turbo_and_base(hub)
        env = {"HF_ENDPOINT": hub.base_url}
        run = lambda *a: asyncio.to_thread(cantor, cantor_home, *a, env=env)  # noqa: E731

        async def main():
            node = await Node(cantor_home, port=port, env=env).start()
            try:
                async with node.client() as c:
                    pulled = [e async for e in c.pull("acestep-v15-turbo")]
                    assert pulled[-1].type == "done", pulled[-1]
                    answer = await c.queue_song({"caption": "lofi piano", "duration": 10})
                    song = await until_state(c, answer["id"], ("done", "failed"))
                    assert song["state"] == "done", song
                    assert song["request"]["model"].startswith("acestep-v15-turbo"), song
                    refused = [
                        await run("stems", song["id"], "--tracks", "drums"),
                        await run("layer", song["id"], "--track", "guitar", "a guitar"),
                        await run("complete", song["id"], "--track", "bass", "a song"),
                    ]
                    count = len(await c.songs())
                    base = [e async for e in c.pull("acestep-v15-base")]
            finally:
                await node.stop()
            # the node is started again: an engine started before the pull does not know
            # the new model (it reads its models folder when it starts)
            node = await Node(cantor_home, port=port, env=env).start()
            try:
                async with node.client() as c:
                    made = await run(
                        "stems", song["id"], "--tracks", "drums", "-o", str(tmp_path / "out")
                    )
                    songs = await c.songs()
                return song, refused, count, base, made, songs
            finally:
                await node.stop()

        song, refused, count, base, made, songs = asyncio.run(main())
    for result in refused:
        assert result.returncode == 2, result.stderr
        assert "needs a base model" in result.stderr, result.stderr
        assert re.search(r"\(\d+(\.\d)? (KiB|MiB|GiB)\)", result.stderr), result.stderr  # size
        assert "cantor pull acestep-v15-base" in result.stderr.splitlines()[-1]
    assert count == 1  # nothing was queued
    assert base[-1].type == "done", base[-1]
    assert made.returncode == 0, made.stderr
    (stem,) = [s for s in songs if s["request"].get("task") == "extract"]
    assert stem["request"]["model"] == "acestep-v15-base-Q8_0"  # chosen without being named
    assert stem["title"] == "lofi-piano_drums"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["lofi-piano_drums.wav"]


# -- end to end on the real Sketch's edits ---------------------------------------------------


@pytest.fixture(scope="module")
def sketch_edits(tmp_path_factory):
    """The built-in Sketch does edits: asked as the node would ask it (its /understand with
    a short WAV), it answers; a Sketch without the route fails every test that uses this."""
    import httpx

    from cantor_desktop.sketch import ensure_sketch_models
    from test_sketch_support import EngineProcess

    folder = tmp_path_factory.mktemp("sketch-probe")
    models = folder / "models"
    ensure_sketch_models(models)
    engine = EngineProcess(models, free_port(), folder / "engine.log")
    try:
        engine.wait_ready()
        wav = io.BytesIO()
        sf.write(wav, np.zeros((48000, 2), "float32"), 48000, format="WAV")
        answer = httpx.post(
            engine.url + "/understand",
            timeout=30,
            files={"audio": ("probe.wav", wav.getvalue(), "audio/wav")},
        )
    finally:
        engine.proc.terminate()
        engine.proc.wait(10)
    assert answer.status_code == 200, (
        f"the Sketch's /understand: {answer.status_code} {answer.text}"
    )


def db(x: float) -> float:
    return 20 * np.log10(max(x, 1e-12))


@pytest.mark.xdist_group("test_cli_edits")  # shares the module's sketch_edits
def test_repaint_and_extend_keep_the_song_around_what_they_change(
    sketch_edits, cantor_home, tmp_path
):

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(c, 30)
            return root, (
                await run(
                    "repaint", root["id"], "--from", "10", "--to", "15", "glitchy synth solo"
                ),
                await run("extend", root["id"], "--after", "10"),
            )

    root, (repaint, extend) = asyncio.run(main())
    assert repaint.returncode == 0 and extend.returncode == 0, (repaint.stderr, extend.stderr)
    original, rate = read(root["takes"][0]["audio"])
    painted, _ = read(repaint.stdout.strip())
    longer, _ = read(extend.stdout.strip())
    s = lambda t: int(t * rate)  # noqa: E731
    assert abs(len(painted) - len(original)) <= s(0.05)
    assert db(np.abs(painted[: s(9.9)] - original[: s(9.9)]).max()) < -60
    end = min(len(painted), len(original))
    assert db(np.abs(painted[s(15.1) : end] - original[s(15.1) : end]).max()) < -60
    assert db(np.abs(painted[s(10.5) : s(14.5)] - original[s(10.5) : s(14.5)]).max()) > -20
    assert abs(len(longer) / rate - 40.0) < 0.1
    assert db(np.abs(longer[: s(29.9)] - original[: s(29.9)]).max()) < -60
    assert np.abs(longer[s(31) :]).max() > 0.01  # music, not silence


@pytest.mark.xdist_group("test_cli_edits")  # shares the module's sketch_edits
def test_extend_sings_the_lyrics_of_a_file_after_the_song(sketch_edits, cantor_home, tmp_path):
    """`cantor extend SONG --after 10 --lyrics @verse2.txt --context 8`: the new song's
    lyrics go on with the file's lines, the engine's LM wrote codes for them, and the song
    is kept up to the join."""
    verse = tmp_path / "verse2.txt"
    verse.write_text("[Verse 2]\nthe night goes on\n", "utf-8")

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(c, 30)
            done = await run(
                "extend", root["id"], "--after", "10", "--lyrics", f"@{verse}", "--context", "8"
            )
            refused = await run("extend", root["id"], "--before", "5", "--lyrics", "la")
            return root, done, refused, await c.songs()

    root, done, refused, songs = asyncio.run(main())
    assert done.returncode == 0, done.stderr
    made = next(s for s in songs if s["takes"] and s["takes"][0]["audio"] == done.stdout.strip())
    assert made["request"]["extend"] == {
        "before": 0.0,
        "after": 10.0,
        "lyrics": "[Verse 2]\nthe night goes on",
        "context": 8.0,
    }
    assert made["request"]["lyrics"].endswith("[Verse 2]\nthe night goes on")
    original, rate = read(root["takes"][0]["audio"])
    longer, _ = read(done.stdout.strip())
    s = lambda t: int(t * rate)  # noqa: E731
    assert len(longer) > len(original) + s(5)
    assert db(np.abs(longer[: s(27.9)] - original[: s(27.9)]).max()) < -60  # kept to the seam
    assert refused.returncode == 2 and "--lyrics" in refused.stderr, refused.stderr


@pytest.mark.xdist_group("test_cli_edits")  # shares the module's sketch_edits
def test_cover_keeps_the_tempo_and_understand_hears_tempo_and_key(
    sketch_edits, cantor_home, tmp_path
):
    from cantor_desktop.song import analysis

    file = tmp_path / "a song.wav"

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(
                c, 30, caption="warm indie pop, piano and drums", key="A minor"
            )
            await c.audio(root["id"], file)
            return (
                await run("sing", "fast drum and bass", "--cover", str(file)),
                await run("understand", str(file)),
                await run("understand", str(file), "--json"),
            )

    cover, heard, heard_json = asyncio.run(main())
    assert cover.returncode == 0, cover.stderr
    audio, rate = read(cover.stdout.strip())
    assert abs(analysis.estimate_tempo(audio, rate) - 100) <= 1
    assert heard.returncode == 0, heard.stderr
    found = json.loads(heard_json.stdout)
    assert abs(found["bpm"] - 100) <= 1 and found["key"] == "A minor", found
    lines = heard.stdout.splitlines()
    assert re.match(r"^BPM: +100(\.\d+)?$", next(x for x in lines if x.startswith("BPM")))
    assert next(x for x in lines if x.startswith("key")).split(None, 1)[1] == "A minor"
    assert any(x.startswith("duration:") and "30.0 s" in x for x in lines)


def sketch_part(take: dict, part: str) -> np.ndarray:
    """The part the Sketch rendered for a take, rendered again alone from the request the
    node sent it (kept in the take's sidecar) and its seed."""
    from cantor_desktop.sketch import engine, render
    from cantor_desktop.sketch.request import normalise

    sidecar = json.loads(Path(take["sidecar"]).read_text("utf-8"))
    song = engine.song_from_request(normalise(sidecar["engine_request"]), take["seed"])
    return render.render_parts(song, [part])[part]


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    a = a.mean(axis=1) if a.ndim == 2 else a
    b = b.mean(axis=1) if b.ndim == 2 else b
    n = min(len(a), len(b))
    a, b = a[:n].astype(np.float64), b[:n].astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


@pytest.mark.xdist_group("test_cli_edits")  # shares the module's sketch_edits
def test_stems_are_the_parts_and_a_layer_keeps_length_and_tempo(
    sketch_edits, cantor_home, tmp_path
):
    from cantor_desktop.song import analysis

    async def main():
        async with node_and_cli(cantor_home) as (c, run):
            root = await sketch_song(c, 30, caption="funk, drums, bass, electric piano")
            return root, (
                await run(
                    "stems", root["id"], "--tracks", "drums,bass", "-o", str(tmp_path / "stems")
                ),
                await run("layer", root["id"], "--track", "guitar", "clean funk guitar"),
            )

    root, (stems, layer) = asyncio.run(main())
    assert stems.returncode == 0 and layer.returncode == 0, (stems.stderr, layer.stderr)
    take = root["takes"][0]
    mix, rate = read(take["audio"])
    for track in ("drums", "bass"):
        (file,) = (tmp_path / "stems").glob(f"*_{track}.wav")
        stem, _ = read(file)
        assert abs(len(stem) - len(mix)) <= int(0.05 * rate), track
        assert correlation(stem, sketch_part(take, track)) >= 0.9, track
    layered, _ = read(layer.stdout.strip())
    assert abs(len(layered) - len(mix)) <= int(0.05 * rate)
    assert abs(analysis.estimate_tempo(layered, rate) - 100) <= 1


def test_songs_on_a_private_node_and_on_another_machines_node_with_its_token(cantor_home, tmp_path):
    port = free_port()
    node_config(cantor_home, port)
    empty = cantor(cantor_home, "songs")  # no node running: a private one
    assert empty.returncode == 0, empty.stderr
    assert "No songs yet" in empty.stdout
    with pytest.raises(OSError):  # and it was stopped after
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()

    other = tmp_path / "studio"
    other.mkdir()
    write_config(other)

    async def main():
        node = await Node(other).start()
        try:
            async with node.client() as c:
                song = await sketch_song(c, 10)
            given = lambda token: asyncio.to_thread(  # noqa: E731
                cantor,
                cantor_home,
                "songs",
                "--json",
                "--node",
                node.url,
                env={"CANTOR_NODE_TOKEN": token},
            )
            return song, await given(node.proc.token), await given("not-the-token")
        finally:
            await node.stop()

    song, listed, refused = asyncio.run(main())
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == [song["id"]]
    assert refused.returncode == 1 and refused.stdout == ""
    assert "token" in refused.stderr.lower(), refused.stderr


def test_ctrl_c_cancels_the_stems_not_yet_made(cantor_home):
    import signal

    async def main():
        async with node_and_cli(cantor_home) as (c, _run):
            root = await sketch_song(c, 240)
            proc = subprocess.Popen(
                self_argv("cli") + ["stems", root["id"]],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "CANTOR_HOME": str(cantor_home)},
            )
            first = await asyncio.to_thread(proc.stderr.readline)
            proc.send_signal(signal.SIGINT)
            code = await asyncio.to_thread(proc.wait, 30)

            async def settled():
                stems = [s for s in await c.songs() if s["request"].get("task") == "extract"]
                return (
                    stems
                    if all(s["state"] in ("done", "cancelled", "failed") for s in stems)
                    else None
                )

            from support.node import wait_for

            return first, code, await wait_for(settled, timeout=20)

    first, code, stems = asyncio.run(main())
    assert first.startswith("vocals (1/12)"), first
    assert code == 130
    assert len(stems) == 12  # all were queued at once …
    states = [s["state"] for s in stems]
    assert states.count("cancelled") >= 10, states  # … and what was not made is cancelled
