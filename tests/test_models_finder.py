"""Models other tools downloaded, found and adopted (cantor_desktop/models/finder.py): a
Hugging Face cache laid out as huggingface_hub lays it out (blobs named by their sha256,
snapshot entries linking to them), a folder the user names, the catalogue's sha256 as the
judge; a hard link and no second copy; the other tool's files never changed; a file with the
right name and the wrong bytes refused and named; through the CLI and through a real node."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest

from cantor_desktop.models import catalogue as cat
from cantor_desktop.models import finder, gguf, hub, library
from support.node import Node, write_config

REPO_FOLDER = "models--" + cat.REPO.replace("/", "--")
VAE = "vae-BF16.gguf"
TEXT_ENC = "Qwen3-Embedding-0.6B-Q8_0.gguf"


def gguf_bytes(tmp: Path, arch: str, payload: bytes) -> bytes:
    """A readable GGUF header of ``arch`` followed by ``payload`` (a model's bytes)."""
    head = gguf.write_header_only(tmp / f"head-{arch}.gguf", arch).read_bytes()
    return head + payload


def hf_cache(root: Path, repo_folder: str, files: dict[str, bytes]) -> dict[str, Path]:
    """A Hugging Face hub cache holding ``files`` of one repository: the blobs, and the
    snapshot's entries as links to them. The blob of each file, by name."""
    repo = root / "hub" / repo_folder
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    blobs = {}
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
        blobs[name] = blob
    return blobs


def save_catalogue(shas: dict[str, bytes]) -> None:
    """The catalogue as Cantor saves the hub's list (exact sizes, sha256 of each file)."""
    builtin = cat.builtin()
    items = []
    for entry in builtin.files.values():
        data = shas.get(entry.name)
        items.append(
            {
                "path": entry.name,
                "size": len(data) if data is not None else entry.size,
                "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
            }
        )
    doc = cat.Catalogue.from_files(items, source="hub", approximate=False).to_json()
    doc["endpoint"] = hub.endpoint()
    cat.cache_file().parent.mkdir(parents=True, exist_ok=True)
    cat.cache_file().write_text(json.dumps(doc), "utf-8")


def snapshot_of(tree: dict[Path, tuple[bytes, int]]) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tree}


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf-home"
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    return home


def test_the_cache_folder_is_found_as_huggingface_hub_finds_it(tmp_path):
    home = str(Path.home())
    assert finder.hf_cache_dir({}) == Path(home, ".cache", "huggingface", "hub")
    assert finder.hf_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert finder.hf_cache_dir({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/h/hub")
    assert finder.hf_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert finder.hf_cache_dir({"HUGGINGFACE_HUB_CACHE": "/old"}) == Path("/old")


def test_a_file_in_the_cache_is_adopted_by_a_hard_link_and_left_as_it_was(
    cantor_home, tmp_path, hf_home
):
    """The built-in catalogue has no sha256: a file in the cache of the catalogue's own
    repository is checked against the sha256 the cache filed it under."""
    data = gguf_bytes(tmp_path, gguf.ARCH_VAE, os.urandom(200_000))
    blobs = hf_cache(hf_home, REPO_FOLDER, {VAE: data})
    before = snapshot_of({blobs[VAE]: (b"", 0)})

    [found] = finder.find()
    assert (found.name, found.kind, found.where, found.state) == (
        VAE,
        "vae",
        finder.HF_CACHE,
        finder.NEW,
    )
    assert found.path == str(blobs[VAE]) and found.expected == blobs[VAE].name

    [done] = finder.adopt([found.shown])
    assert (done.how, done.saved, done.note) == (finder.LINKED, len(data), "")
    mine = library.family_dir() / VAE
    assert mine.stat().st_ino == blobs[VAE].stat().st_ino  # no second copy on disk
    assert snapshot_of({blobs[VAE]: (b"", 0)}) == before  # the cache's file as it was
    assert sorted(p.name for p in library.family_dir().iterdir()) == [VAE]  # no leftovers
    [verified] = [r for r in library.verify() if r.path == str(mine)]
    assert verified.state not in ("corrupt", "missing"), verified

    # found again: it is the library's now, and adopting it again changes nothing
    [again] = finder.find()
    assert again.state == finder.IN_LIBRARY
    assert finder.adopt([again.path])[0].how == finder.ALREADY
    # Cantor's file removed: the other tool's stays
    mine.unlink()
    assert blobs[VAE].read_bytes() == data


def test_right_name_wrong_bytes_is_refused_and_named(cantor_home, tmp_path, hf_home):
    """The catalogue's sha256 judges every copy: a same-sized file with other bytes (in a
    folder the user names, and in another repository's cache) is refused, named, and leaves
    nothing in the library."""
    real = gguf_bytes(tmp_path, gguf.ARCH_TEXT_ENC, os.urandom(50_000))
    other = gguf_bytes(tmp_path, gguf.ARCH_TEXT_ENC, os.urandom(50_000))
    save_catalogue({TEXT_ENC: real})
    folder = tmp_path / "my models"
    folder.mkdir()
    (folder / TEXT_ENC).write_bytes(other)
    hf_cache(hf_home, "models--someone--else", {TEXT_ENC: other})

    found = finder.find([folder])
    assert {f.where for f in found} == {finder.NAMED, finder.HF_CACHE}
    assert all(
        f.state == finder.NEW and f.expected == hashlib.sha256(real).hexdigest() for f in found
    )
    done = finder.adopt([f.shown for f in found], folders=[folder])
    for result in done:
        assert result.how == finder.REFUSED and result.saved == 0
        assert result.source in result.note and "other bytes" in result.note, result.note
    assert not library.family_dir().exists() or not any(library.family_dir().iterdir())
    assert (folder / TEXT_ENC).read_bytes() == other


def test_a_wrong_size_or_an_unknown_hash_is_never_adopted(cantor_home, tmp_path, hf_home):
    save_catalogue({VAE: b"x" * 1000})
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / VAE).write_bytes(b"y" * 999)
    [short] = finder.find([folder])
    assert short.state == finder.WRONG_SIZE and "999" in short.note
    assert finder.adopt([short.path], folders=[folder])[0].how == finder.REFUSED

    cat.cache_file().unlink()  # the built-in catalogue: no sha256, and not the hub's cache
    [unknown] = finder.find([folder])
    assert unknown.state == finder.NO_HASH
    assert finder.adopt([unknown.path], folders=[folder])[0].how == finder.REFUSED


def test_only_a_file_find_offers_can_be_adopted(cantor_home, tmp_path, hf_home):
    secret = tmp_path / "vae-BF16.gguf"  # named like the catalogue's, in no place looked at
    secret.write_bytes(b"GGUF")
    with pytest.raises(finder.AdoptRefused, match="not an ACE-Step model file Cantor found"):
        finder.adopt([str(secret)])


@pytest.mark.skipif(
    os.stat("/dev/shm").st_dev == os.stat(os.environ.get("TMPDIR", "/tmp")).st_dev
    if os.path.isdir("/dev/shm")
    else True,
    reason="needs a second file system (/dev/shm) beside the temporary folder",
)
def test_on_another_drive_a_copy_is_offered_with_its_size_and_made_when_asked(
    cantor_home, tmp_path, hf_home
):
    data = gguf_bytes(tmp_path, gguf.ARCH_VAE, os.urandom(100_000))
    save_catalogue({VAE: data})
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as other_drive:
        (Path(other_drive) / VAE).write_bytes(data)
        [found] = finder.find([other_drive])
        [offered] = finder.adopt([found.path], folders=[other_drive])
        assert offered.how == finder.REFUSED and "another drive" in offered.note
        assert "--copy" in offered.note
        [copied] = finder.adopt([found.path], folders=[other_drive], copy=True)
        assert (copied.how, copied.saved) == (finder.COPIED, 0)
        assert (library.family_dir() / VAE).read_bytes() == data
        assert (Path(other_drive) / VAE).read_bytes() == data


def test_cantor_models_find_and_adopt(cantor_home, tmp_path, hf_home, capsys):
    from cantor_desktop.cli.main import main

    data = gguf_bytes(tmp_path, gguf.ARCH_VAE, os.urandom(10_000))
    hf_cache(hf_home, REPO_FOLDER, {VAE: data})
    assert main(["models", "find"]) == 0
    out = capsys.readouterr().out
    assert VAE in out and finder.HF_CACHE in out and "--adopt" in out
    assert main(["models", "find", "--adopt"]) == 0
    out = capsys.readouterr().out
    assert "linked" in out and "1 adopted" in out
    assert (library.family_dir() / VAE).read_bytes() == data


def test_the_node_finds_and_adopts_for_the_app(cantor_home, tmp_path, hf_home):
    write_config(cantor_home)
    data = gguf_bytes(tmp_path, gguf.ARCH_VAE, os.urandom(10_000))
    blobs = hf_cache(hf_home, REPO_FOLDER, {VAE: data})

    async def main():
        node = await Node(cantor_home, env={"HF_HOME": str(hf_home)}).start()
        try:
            client = node.client()
            try:
                [found] = await client.find_models()
                assert found["state"] == "new" and found["where"] == finder.HF_CACHE
                [done] = await client.adopt_models([found["shown"]])
                assert done["how"] == "linked" and done["saved"] == len(data)
                async with node.http() as http:
                    bad = await http.post("/v1/models/adopt", json={"paths": [str(tmp_path)]})
                    assert (
                        bad.status_code == 422 and "Cantor found" in bad.json()["error"]["message"]
                    )
                    odd = await http.post("/v1/models/find", json={"folder": "x"})
                    assert odd.status_code == 422
            finally:
                await client.aclose()
        finally:
            await node.stop()

    asyncio.run(main())
    assert (library.family_dir() / VAE).stat().st_ino == blobs[VAE].stat().st_ino
