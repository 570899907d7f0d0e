"""Styles (cantor_desktop/song/style.py, node/styles.py, node/routes/styles.py,
cli/styles_cmd.py): a song's recipe kept by a real node under a name, with its reference
sound copied; listed with what the node lacks for it; renamed and removed (its sound with
it); exported and imported as one file with the sound byte for byte; applied by
`cantor sing --style`, the command's own fields winning."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import zipfile

import pytest

from cantor_desktop.song import style as recipe
from support.ui import make_wav

from test_cli_edits import node_and_cli, sketch_song


def test_a_style_keeps_only_recipe_fields_checked_as_a_request_checks_them():
    s = recipe.Style.from_json(
        {"name": " Night drive ", "fields": {"caption": "synthwave", "bpm": 96, "key": "a minor"}}
    )
    assert s.name == "Night drive" and s.seed == recipe.RANDOM
    with pytest.raises(recipe.StyleError, match="bpm"):
        recipe.check_fields({"bpm": 5000})
    with pytest.raises(recipe.StyleError, match="lyrics: not kept by a style"):
        recipe.check_fields({"lyrics": "la"})
    with pytest.raises(recipe.StyleError, match="seed"):
        recipe.check_seed(-3)
    with pytest.raises(recipe.StyleError, match="name"):
        recipe.check_name("a/b")
    applied = recipe.apply(
        recipe.Style(
            "x", {"caption": "synthwave", "bpm": 96}, seed=42, reference={"upload": "0" * 16}
        ),
        {"caption": "my own words", "lyrics": "la"},
    )
    assert applied == {
        "caption": "my own words",
        "lyrics": "la",
        "bpm": 96,
        "reference": {"upload": "0" * 16},
        "seed": 42,
    }


def test_styles_through_the_node_and_the_cli(cantor_home, tmp_path):
    wav = make_wav(tmp_path / "voice.wav", seconds=3.0)

    async def main():
        async with node_and_cli(cantor_home) as (client, cli):
            sound = await client.upload(wav)
            song = await sketch_song(
                client,
                caption="dreamy synthwave",
                bpm=96,
                key="A minor",
                language="en",
                reference={"upload": sound["id"]},
            )
            # saved from the song: its recipe and a copy of its reference sound
            saved = await cli("styles", "save", "Night drive", "--from", song["id"])
            assert saved.returncode == 0, saved.stderr
            [kept] = await client.styles()
            assert kept["fields"]["caption"] == "dreamy synthwave"
            assert (kept["fields"]["bpm"], kept["fields"]["key"]) == (96, "A minor")
            assert kept["reference"]["upload"] != sound["id"] and kept["missing"] == []
            assert kept["reference_name"] == "voice.wav"  # the sound's own name
            await client.delete_upload(sound["id"])  # the style keeps its own copy
            listed = await cli("styles")
            assert "Night drive: dreamy synthwave" in listed.stdout and "96 BPM" in listed.stdout

            # a song with the style: what the command gives wins, the rest is the style's
            made = await cli("sing", "--style", "night DRIVE", "--bpm", "120", "--model", "sketch")
            assert made.returncode == 0, made.stderr
            songs = await client.songs()
            styled = next(s for s in songs if s["id"] != song["id"])
            assert styled["request"]["caption"] == "dreamy synthwave"
            assert styled["request"]["bpm"] == 120 and styled["request"]["key"] == "A minor"
            assert styled["request"]["reference"] == kept["reference"]

            # exported and imported as one file: the sound byte for byte
            out = tmp_path / "night.cantor-style"
            assert (await cli("styles", "export", "Night drive", str(out))).returncode == 0
            with zipfile.ZipFile(out) as z:
                doc = json.loads(z.read("style.json"))
                inside = z.read(doc["reference"]["file"])
            upload_path = cantor_home / "state" / "uploads"
            [kept_sound] = [
                p
                for p in upload_path.glob(f"{kept['reference']['upload']}.*")
                if p.suffix == ".wav"  # not its record, nor what an engine encoded of it
            ]
            assert (
                hashlib.sha256(inside).digest() == hashlib.sha256(kept_sound.read_bytes()).digest()
            )
            taken = await cli("styles", "import", str(out))
            assert taken.returncode == 2 and "exists" in taken.stderr  # the name is taken
            assert (await cli("styles", "rename", "Night drive", "Old drive")).returncode == 0
            assert (await cli("styles", "import", str(out))).returncode == 0
            by_name = {s["name"]: s for s in await client.styles()}
            assert set(by_name) == {"Night drive", "Old drive"}
            again = await client.export_style("Night drive")
            with zipfile.ZipFile(io.BytesIO(again)) as z:
                assert z.read(json.loads(z.read("style.json"))["reference"]["file"]) == inside

            # removed: the style and its sound
            old_sound = by_name["Old drive"]["reference"]["upload"]
            assert (await cli("styles", "rm", "Old drive")).returncode == 0
            assert not list(upload_path.glob(f"{old_sound}.*"))

            # a style this node lacks a part of says which, and sing stops
            await client.save_style(
                "Borrowed", fields={"caption": "x", "model": "acestep-v15-base-Q8_0"}
            )
            listed = await cli("styles")
            assert "needs the model acestep-v15-base-Q8_0 (cantor pull" in listed.stdout
            refused = await cli("sing", "--style", "Borrowed", "--model", "sketch")
            assert refused.returncode == 0  # the command's own model wins
            stopped = await cli("sing", "--style", "Borrowed")
            assert stopped.returncode == 2 and "needs the model" in stopped.stderr
            unknown = await cli("sing", "--style", "Nope")
            assert unknown.returncode == 2 and "no style named 'Nope'" in unknown.stderr

            # bad files are refused, naming why, and nothing is kept
            bad = tmp_path / "bad.cantor-style"
            bad.write_bytes(b"not a zip")
            refused_file = await cli("styles", "import", str(bad))
            assert refused_file.returncode == 2 and "not a style file" in refused_file.stderr

    asyncio.run(main())
