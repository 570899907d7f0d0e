"""The library on disk: states, resolve, remove, import, verify, disk usage (no network)."""

from __future__ import annotations

import hashlib
import os

import pytest

from cantor_desktop.models import gguf
from cantor_desktop.models import catalogue as cat
from cantor_desktop.models import library
from support.hub import model_bytes

DIT = "acestep-v15-turbo-Q8_0.gguf"
DIT2 = "acestep-v15-sft-Q8_0.gguf"
TE = "Qwen3-Embedding-0.6B-Q8_0.gguf"
VAE = "vae-BF16.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"


def put(name: str, size: int = 4096, folder=None) -> bytes:
    folder = folder or library.family_dir()
    folder.mkdir(parents=True, exist_ok=True)
    data = model_bytes(name, size)
    (folder / name).write_bytes(data)
    return data


def exact_catalogue(*names, sizes=None) -> cat.Catalogue:
    """A catalogue as the live tree gives it: exact sizes and sha256 of what put() writes."""
    items = []
    for n in names:
        data = model_bytes(n, (sizes or {}).get(n, 4096))
        items.append({"path": n, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return cat.Catalogue.from_files(items, source="hub", approximate=False)


def by_name(**kw):
    return {m.name: m for m in library.list_models(**kw)}


def test_sketch_always_ready_and_first():
    models = library.list_models()
    assert models[0].name == "sketch" and models[0].state == library.READY
    assert models[0].display_name == "Sketch — built-in, no AI model" and models[0].builtin
    files = library.resolve("sketch")
    assert files.builtin and files.dit == ""
    with pytest.raises(library.LibraryError):
        library.remove("sketch")


def test_empty_library_lists_catalogue_as_not_downloaded():
    assert [m.name for m in library.list_models()] == ["sketch"]
    everything = by_name(include_catalogue=True, lm_size="1.7B")
    turbo = everything["acestep-v15-turbo-Q8_0"]
    assert turbo.state == library.NOT_DOWNLOADED and turbo.size_bytes == 0
    assert [f.name for f in turbo.files] == [DIT, TE, VAE, "acestep-5Hz-lm-1.7B-Q8_0.gguf"]
    assert turbo.download_approximate and turbo.download_bytes > 5e9
    assert turbo.display_name == "ACE-Step 1.5 Turbo (Q8_0)"
    assert library.find("acestep-v15-turbo").name == "acestep-v15-turbo-Q8_0"
    with pytest.raises(cat.UnknownModel):
        library.find("acestep-v15-nonsense")


def test_states_ready_missing_companion_partial():
    put(DIT)
    m = by_name(lm_size="0.6B")["acestep-v15-turbo-Q8_0"]
    assert m.state == library.MISSING_COMPANION
    assert {f.name: f.state for f in m.files}[TE] == "missing"
    with pytest.raises(library.ModelNotReady, match="cantor pull acestep-v15-turbo-Q8_0"):
        library.resolve("acestep-v15-turbo")
    put(TE), put(VAE)
    files = library.resolve("acestep-v15-turbo", lm_size="0.6B")
    assert files.lm is None and files.vae == VAE  # instrumentals work without an LM
    assert by_name(lm_size="0.6B")["acestep-v15-turbo-Q8_0"].state == library.MISSING_COMPANION
    part = library.family_dir() / (LM + ".part")
    part.write_bytes(b"x" * 100)
    m = by_name(lm_size="0.6B")["acestep-v15-turbo-Q8_0"]
    assert m.state == library.PARTIAL
    assert {f.name: (f.state, f.on_disk) for f in m.files}[LM] == ("partial", 100)
    part.unlink()
    put(LM)
    m = by_name(lm_size="0.6B")["acestep-v15-turbo-Q8_0"]
    assert m.state == library.READY and m.size_bytes == 4 * 4096 and m.download_bytes == 0
    files = library.resolve("acestep-v15-turbo-Q8_0", lm_size="0.6B")
    assert (files.models_dir, files.dit, files.text_enc, files.vae, files.lm) == (
        library.family_dir(),
        DIT,
        TE,
        VAE,
        LM,
    )


def test_auto_lm_uses_any_present_explicit_size_needs_its_own():
    for n in (DIT, TE, VAE, LM):
        put(n)
    # auto (whatever the RAM says): the 0.6B already there will do
    assert by_name()["acestep-v15-turbo-Q8_0"].state == library.READY
    # an explicit 4B in node.toml wants that one
    from cantor_desktop import config

    config.update({"models.lm": "4B"})
    m = by_name()["acestep-v15-turbo-Q8_0"]
    assert m.state == library.MISSING_COMPANION
    assert m.files[-1].name == "acestep-5Hz-lm-4B-Q8_0.gguf"


def test_corrupt_by_size_and_by_recorded_hash(monkeypatch):
    c = exact_catalogue(DIT, TE, VAE, LM)
    monkeypatch.setattr(cat, "load", lambda: c)
    for n in (DIT, TE, VAE, LM):
        put(n)
    assert by_name(catalogue=c, lm_size="0.6B")["acestep-v15-turbo-Q8_0"].state == library.READY
    # a truncated file: the exact size from the hub says corrupt
    with open(library.family_dir() / VAE, "r+b") as fh:
        fh.truncate(100)
    m = by_name(catalogue=c, lm_size="0.6B")["acestep-v15-turbo-Q8_0"]
    assert m.state == library.CORRUPT
    with pytest.raises(library.ModelNotReady):
        library.resolve("acestep-v15-turbo")
    put(VAE)
    # a file whose recorded hash failed stays corrupt (no re-hash while listing)
    library.record_hash(library.family_dir() / TE, sha256="f" * 64, expected="0" * 64, ok=False)
    assert by_name(catalogue=c, lm_size="0.6B")["acestep-v15-turbo-Q8_0"].state == library.CORRUPT


def test_verify_rehashes(monkeypatch):
    c = exact_catalogue(DIT, TE, VAE, LM)
    monkeypatch.setattr(cat, "load", lambda: c)
    for n in (DIT, TE, VAE, LM):
        put(n)
    results = {r.name: r.state for r in library.verify()}
    assert results == {DIT: "ok", TE: "ok", VAE: "ok", LM: "ok"}
    m = by_name(catalogue=c, lm_size="0.6B")["acestep-v15-turbo-Q8_0"]
    assert m.state == library.READY and all(f.verified for f in m.files)
    # flip one byte, same size: only verify can see it
    p = library.family_dir() / DIT
    data = bytearray(p.read_bytes())
    data[-1] ^= 0xFF
    p.write_bytes(bytes(data))
    results = {r.name: r.state for r in library.verify()}
    assert results[DIT] == "corrupt"
    assert by_name(catalogue=c, lm_size="0.6B")["acestep-v15-turbo-Q8_0"].state == library.CORRUPT
    # a verified file that changed size is corrupt even when no exact size is known
    monkeypatch.setattr(cat, "load", cat.builtin)
    p.write_bytes(model_bytes(DIT, 4096))
    library.verify()
    with open(p, "ab") as fh:
        fh.write(b"more")
    assert by_name(lm_size="0.6B")["acestep-v15-turbo-Q8_0"].state == library.CORRUPT
    # without any known hash: unverified, not corrupt
    monkeypatch.setattr(cat, "load", cat.builtin)
    p.write_bytes(model_bytes(DIT, 4096))
    library._forget_hashes([p])
    assert {r.name: r.state for r in library.verify()}[DIT] == "unverified"


def test_remove_keeps_shared_companions_until_the_last_dit():
    for n in (DIT, DIT2, TE, VAE, LM):
        put(n)
    (library.family_dir() / (DIT2 + ".part")).write_bytes(b"zz")
    with pytest.raises(library.NotInstalled):
        library.remove("acestep-v15-base")  # shares the companions, has no DiT itself
    r = library.remove("acestep-v15-sft")
    assert sorted(os.path.basename(p) for p in r.deleted) == [DIT2, DIT2 + ".part"]
    assert r.freed_bytes == 4096 + 2
    assert sorted(p.name for p in library.family_dir().iterdir()) == sorted([DIT, TE, VAE, LM])
    r = library.remove("acestep-v15-turbo-Q8_0")
    assert sorted(os.path.basename(p) for p in r.deleted) == sorted([DIT, TE, VAE, LM])
    assert list(library.family_dir().glob("*.gguf*")) == []
    with pytest.raises(library.LibraryError, match="not downloaded"):
        library.remove("acestep-v15-turbo")


def test_import_classifies_by_header_never_touches_files(tmp_path):
    folder = tmp_path / "my models"
    folder.mkdir()
    names = {
        "dit": "my-dit.gguf",
        "text_enc": "enc.gguf",
        "vae": "decoder.gguf",
        "lm": "brain.gguf",
    }
    arch = {
        "dit": gguf.ARCH_DIT,
        "text_enc": gguf.ARCH_TEXT_ENC,
        "vae": gguf.ARCH_VAE,
        "lm": gguf.ARCH_LM,
    }
    for kind, n in names.items():
        gguf.write_header_only(folder / n, arch[kind])
    gguf.write_header_only(folder / "llama.gguf", "llama")
    (folder / "notes.gguf").write_bytes(b"not a gguf at all")
    (folder / "readme.txt").write_text("hi")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}

    results = {os.path.basename(r.path): r for r in library.import_path(folder)}
    assert {n: r.kind for n, r in results.items()} == {
        "my-dit.gguf": "dit",
        "enc.gguf": "text_enc",
        "decoder.gguf": "vae",
        "brain.gguf": "lm",
        "llama.gguf": None,
        "notes.gguf": None,
    }
    assert "architecture 'llama'" in results["llama.gguf"].note

    m = by_name()["my-dit"]
    assert m.imported and m.state == library.READY and m.folder == str(folder)
    files = library.resolve("my-dit")
    assert (files.models_dir, files.dit, files.text_enc, files.vae, files.lm) == (
        folder,
        "my-dit.gguf",
        "enc.gguf",
        "decoder.gguf",
        "brain.gguf",
    )
    # importing again is harmless; a clashing DiT name is refused
    library.import_path(folder / "my-dit.gguf")
    assert [m.name for m in library.list_models()].count("my-dit") == 1
    put("acestep-v15-turbo-Q8_0.gguf")
    other = tmp_path / "other"
    other.mkdir()
    gguf.write_header_only(other / DIT, gguf.ARCH_DIT)
    [clash] = library.import_path(other / DIT)
    assert clash.kind is None and "already in the library" in clash.note

    r = library.remove("my-dit")
    assert r.deleted == [] and len(r.forgotten) == 4
    assert "my-dit" not in by_name()
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before
    with pytest.raises(library.LibraryError, match="does not exist"):
        library.import_path(tmp_path / "nope")
    with pytest.raises(library.LibraryError, match="no .gguf"):
        library.import_path((tmp_path / "empty").mkdir() or tmp_path / "empty")


def test_import_without_companions_in_its_folder_is_missing_companion(tmp_path):
    for n in (TE, VAE, LM):
        put(n)  # companions in the library folder do not count: one folder per set
    gguf.write_header_only(tmp_path / "lonely.gguf", gguf.ARCH_DIT)
    library.import_path(tmp_path / "lonely.gguf")
    m = by_name()["lonely"]
    assert m.state == library.MISSING_COMPANION
    with pytest.raises(library.ModelNotReady, match="import it from"):
        library.resolve("lonely")


def test_disk_usage(tmp_path):
    put(DIT, 5000)
    (library.family_dir() / (TE + ".part")).write_bytes(b"x" * 300)
    gguf.write_header_only(tmp_path / "x.gguf", gguf.ARCH_VAE)
    library.import_path(tmp_path / "x.gguf")
    usage = library.disk_usage()
    assert usage["library_bytes"] == 5000 and usage["partial_bytes"] == 300
    assert usage["imported_bytes"] == (tmp_path / "x.gguf").stat().st_size
    assert usage["total_bytes"] == 5300 + usage["imported_bytes"] and usage["free_bytes"] > 0


def test_an_unreadable_gguf_in_the_models_folder_is_listed_corrupt_and_breaks_nothing(tmp_path):
    """A GGUF with arrays nested 5,000 deep is listed corrupt: listing, songs without a
    model and `cantor models` go on working while it is there."""
    import struct

    folder = library.family_dir()
    folder.mkdir(parents=True, exist_ok=True)
    key = b"a"
    deep = (
        b"GGUF"
        + struct.pack("<Iqq", 3, 0, 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<I", gguf.T_ARRAY)
        + struct.pack("<IQ", gguf.T_ARRAY, 1) * 5000
        + struct.pack("<IQ", gguf.T_UINT8, 0)
    )
    (folder / "deep.gguf").write_bytes(deep)
    put(DIT), put(TE), put(VAE)
    models = by_name()
    broken = models["deep"]
    assert broken.state == library.CORRUPT
    assert "nested more than" in broken.files[0].problem
    assert models["acestep-v15-turbo-Q8_0"].state == library.MISSING_COMPANION  # as ever
    assert library.resolve("acestep-v15-turbo").dit == DIT
    assert library.resolve("sketch").builtin
    with pytest.raises(library.ModelNotReady, match="corrupt"):
        library.resolve("deep")


def test_a_linked_gguf_is_refused_by_import_without_reading_it(tmp_path):
    """A link named x.gguf to a file of the node's user: its first bytes came back in the
    refusal ("magic b'hunt'")."""
    from cantor_desktop.models import importer

    secret = tmp_path / "secret"
    secret.write_bytes(b"hunter2 hunter2")
    secret.chmod(0o600)
    link = tmp_path / "x.gguf"
    link.symlink_to(secret)
    with pytest.raises(importer.ImportRefused, match="symbolic link") as caught:
        importer.import_local(link)
    assert "hunt" not in str(caught.value)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "y.gguf").symlink_to(secret)
    [result] = library.import_path(folder)
    assert result.kind is None and "symbolic link" in result.note and "hunt" not in result.note
    not_gguf = tmp_path / "plain.gguf"
    not_gguf.write_bytes(b"hunter2 hunter2")
    with pytest.raises(importer.ImportRefused) as caught:
        importer.import_local(not_gguf)
    assert "hunt" not in str(caught.value)
