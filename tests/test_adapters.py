"""The adapters store on real files: what each trainer's layout is read as, what is refused
(and the reason given), names, atomic adds and removes, and the names the engines give the
adapters it keeps (the sketch always; the real ace-server when CANTOR_REAL_ACE_SERVER names
one)."""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cantor_desktop.models import adapters as ad
from cantor_desktop.models.adapters import AdapterError, MadeForAnotherModel, NotAnAdapter
from support.adapter_files import (
    comfyui_file,
    llm_peft_folder,
    lora_tensors,
    peft_folder,
    sd_unet_file,
    write_safetensors,
)

from support.adapter_files import engine_adapter_names, store_for_engines


def test_each_layout_is_read_with_what_it_was_made_for(tmp_path):
    peft = ad.inspect(peft_folder(tmp_path / "peft", rank=8, alpha=16))
    assert (peft.format, peft.made_for, peft.dit, peft.rank, peft.alpha) == (
        "peft",
        "ACE-Step 1.5 (2B DiT)",
        "2B",
        8,
        16.0,
    )
    assert peft.base_model == "ACE-Step/Ace-Step1.5" and peft.modules == 4
    bare = ad.inspect(peft_folder(tmp_path / "bare", config=False))  # no config: tensors
    assert bare.made_for == "ACE-Step 1.5 (2B DiT)" and bare.alpha is None and bare.rank == 4
    comfy = ad.inspect(comfyui_file(tmp_path / "c.safetensors", alpha=6.0))
    assert (comfy.format, comfy.alpha, comfy.rank) == ("comfyui", 6.0, 4)
    plain = ad.inspect(
        write_safetensors(
            tmp_path / "p.safetensors",
            lora_tensors(
                "",
                a="lora_down",
                b="lora_up",
                modules=("mlp.gate_proj", "mlp.down_proj", "cross_attn.q_proj"),
            ),
        )
    )
    assert plain.targets == ["cross_attn.q_proj", "mlp.down_proj", "mlp.gate_proj"]
    xl = ad.inspect(
        write_safetensors(
            tmp_path / "xl.safetensors", lora_tensors("decoder.", size="XL", layers=(0, 31))
        )
    )
    assert xl.made_for == "ACE-Step 1.5 (XL DiT)" and xl.dit == "XL"
    rng = np.random.default_rng(1)
    lokr = ad.inspect(
        write_safetensors(
            tmp_path / "lokr.safetensors",
            {
                "lycoris_layers_0_self_attn_q_proj.lokr_w1": rng.standard_normal((4, 4)).astype(
                    np.float32
                ),
                "lycoris_layers_0_self_attn_q_proj.lokr_w2": rng.standard_normal((512, 512)).astype(
                    np.float32
                ),
                "lycoris_layers_27_mlp_up_proj.lokr_w1": rng.standard_normal((4, 4)).astype(
                    np.float32
                ),
            },
        )
    )
    assert lokr.format == "lycoris" and lokr.dit == "XL"  # layer 27: only XL has it
    assert lokr.targets == ["mlp.up_proj", "self_attn.q_proj"]
    local = ad.inspect(peft_folder(tmp_path / "local", base="/home/me/ckpt/run-7"))
    assert local.made_for == "ACE-Step 1.5 (2B DiT)"  # a local path: tensors decide


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda d: sd_unet_file(d / "sd.safetensors"), "made for sdxl_base_v1-0 (its metadata's"),
        (
            lambda d: write_safetensors(
                d / "sd.safetensors",
                {
                    "lora_unet_mid_block_attentions_0_proj_in.lora_down.weight": np.zeros(
                        (4, 320), np.float32
                    ),
                    "lora_unet_mid_block_attentions_0_proj_in.lora_up.weight": np.zeros(
                        (320, 4), np.float32
                    ),
                },
            ),
            "made for a Stable Diffusion UNet",
        ),
        (lambda d: llm_peft_folder(d / "llm"), "made for Qwen/Qwen3-0.6B"),
        (
            lambda d: write_safetensors(
                d / "llm.safetensors", lora_tensors("base_model.model.model.", width=1024)
            ),
            "made for a language model",
        ),
        (
            lambda d: peft_folder(d / "v1", base="ACE-Step/ACE-Step-v1-3.5B"),
            "made for ACE-Step v1 (3.5B",
        ),
        (
            lambda d: peft_folder(d / "flux", base="black-forest-labs/FLUX.1-dev"),
            "made for black-forest-labs/FLUX.1-dev",
        ),
        (
            lambda d: write_safetensors(d / "w.safetensors", lora_tensors(width=3072)),
            "works on 3072 features",
        ),
        (
            lambda d: write_safetensors(d / "deep.safetensors", lora_tensors(layers=(0, 26))),
            "it changes layer 26, the DiT has 24 layers (2B)",
        ),
        (
            lambda d: write_safetensors(
                d / "deeper.safetensors", lora_tensors("", layers=(40,), a="lora_down", b="lora_up")
            ),
            "it changes layer 40",
        ),
    ],
)
def test_an_adapter_made_for_another_model_is_refused_with_its_reason(tmp_path, make, words):
    path = make(tmp_path)
    with pytest.raises(MadeForAnotherModel) as caught:
        ad.inspect(path)
    assert words in str(caught.value) and caught.value.made_for
    store = ad.AdapterStore(tmp_path / "store")
    with pytest.raises(MadeForAnotherModel):
        store.add(path)
    assert store.list() == [] and not any((tmp_path / ".adapters-staging").glob("*"))


def _raw(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize(
    "make, words",
    [
        (
            lambda d: (d / "e.safetensors").write_bytes(b"abc") and d / "e.safetensors",
            "is only 3 bytes long",
        ),
        (
            lambda d: (
                _raw(d / "big.safetensors", b"{}").write_bytes(struct.pack("<Q", 2**40) + b"{}")
                and d / "big.safetensors"
            ),
            "announce a header longer than the file",
        ),
        (lambda d: _raw(d / "nj.safetensors", b"not json"), "its header is not JSON"),
        (lambda d: _raw(d / "none.safetensors", b'{"__metadata__": {}}'), "holds no tensors"),
        (
            lambda d: _raw(
                d / "short.safetensors",
                json.dumps(
                    {
                        "x.lora_A.weight": {
                            "dtype": "F32",
                            "shape": [4, 2048],
                            "data_offsets": [0, 32768],
                        }
                    }
                ).encode(),
                b"\0" * 100,
            ),
            "the file may be cut short",
        ),
        (
            lambda d: _raw(
                d / "odd.safetensors",
                json.dumps(
                    {"x.lora_A.weight": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}}
                ).encode(),
                b"\0" * 60,
            ),
            "does not fill its 60 bytes",
        ),
        (
            lambda d: write_safetensors(
                d / "full.safetensors",
                {"decoder.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float32)},
            ),
            "holds no LoRA or LoKr tensors",
        ),
        (lambda d: peft_folder(d / "ia3", extra={"peft_type": "IA3"}), "PEFT IA3 adapter"),
        (
            lambda d: (
                (d / "bin").mkdir()
                or (d / "bin" / "adapter_model.bin").write_bytes(b"\0")
                and d / "bin"
            ),
            "a PyTorch pickle",
        ),
        (lambda d: (d / "emptydir").mkdir() or d / "emptydir", "has no adapter_model.safetensors"),
        (
            lambda d: write_safetensors(
                d / "mixed.safetensors",
                {
                    **lora_tensors(modules=("self_attn.q_proj",)),
                    **lora_tensors(size="XL", layers=(5,), modules=("self_attn.o_proj",)),
                },
            ),
            "inconsistent: layers.0.self_attn.q_proj works on 2048 features, "
            "layers.5.self_attn.o_proj works on 2560",
        ),
    ],
)
def test_files_that_are_no_adapter_say_what_is_wrong(tmp_path, make, words):
    path = make(tmp_path)
    with pytest.raises(NotAnAdapter) as caught:
        ad.inspect(path)
    assert words in str(caught.value)


def test_f8_weights_and_a_rank_mismatch_are_refused(tmp_path):
    t = lora_tensors()
    key = next(iter(t))
    with pytest.raises(NotAnAdapter, match="rank 4 in lora_A but 3 in lora_B"):
        bad = dict(t)
        bad[key.replace("lora_A", "lora_B")] = np.zeros((2048, 3), np.float32)
        ad.inspect(write_safetensors(tmp_path / "r.safetensors", bad))
    header = {}
    offset = 0
    for name, array in t.items():
        header[name] = {
            "dtype": "F8_E4M3",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.size],
        }
        offset += array.size
    path = _raw(tmp_path / "f8.safetensors", json.dumps(header).encode(), b"\0" * offset)
    with pytest.raises(NotAnAdapter, match="stores its weights as F8_E4M3; the engine reads"):
        ad.inspect(path)


def test_names_clashes_and_what_is_kept_on_disk(tmp_path):
    store = ad.AdapterStore(tmp_path / "models" / "adapters")
    src = tmp_path / "src"
    first = store.add(comfyui_file(src / "My Tape (v2).safetensors"))
    assert first.name == "My-Tape-v2" and first.engine_name == "My-Tape-v2.safetensors"
    peft = store.add(peft_folder(src / "style") / "adapter_model.safetensors")  # its folder
    assert peft.name == "style" and sorted(p.name for p in Path(peft.path).iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]  # no README
    for name in ("style", "STYLE", "my-tape-v2", "style.safetensors"):
        with pytest.raises(AdapterError, match="already installed") as caught:
            store.add(comfyui_file(src / "other.safetensors"), name=name)
        assert caught.value.status == 409 and caught.value.field == "name"
    with pytest.raises(AdapterError, match="already installed"):
        store.add(peft_folder(src / "more"), name="My-Tape-v2")  # a folder vs a file
    for bad in ("", "../x", ".hidden", "a/b", "x" * 101, "spa ce"):
        with pytest.raises(AdapterError, match="cannot name an adapter"):
            store.add(src / "other.safetensors", name=bad)
    assert [a.name for a in store.list()] == ["My-Tape-v2", "style"]
    assert store.get("My-Tape-v2.safetensors").name == "My-Tape-v2"  # the engine's name too
    with pytest.raises(ad.UnknownAdapter, match="installed: My-Tape-v2, style"):
        store.get("nope")
    with pytest.raises(AdapterError, match="not an absolute path"):
        store.add("relative.safetensors")


def test_adds_of_one_name_at_once_keep_one_and_nothing_half_done(tmp_path):
    store = ad.AdapterStore(tmp_path / "models" / "adapters")
    sources = [comfyui_file(tmp_path / f"s{i}.safetensors", rank=4 + i) for i in range(6)]
    outcomes: list = []
    gate = threading.Barrier(len(sources))

    def add(path):
        gate.wait()
        try:
            outcomes.append(store.add(path, name="same").rank)
        except AdapterError as exc:
            outcomes.append(exc.status)

    threads = [threading.Thread(target=add, args=(p,)) for p in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    wins = [o for o in outcomes if o != 409]
    assert len(outcomes) == 6 and len(wins) == 1, outcomes
    kept = store.get("same")
    assert kept.rank == wins[0]
    assert (tmp_path / "models" / "adapters" / "same.safetensors").read_bytes() == sources[
        wins[0] - 4
    ].read_bytes()  # the winner's file, whole
    assert os.listdir(tmp_path / "models" / "adapters") == ["same.safetensors"]
    assert not list((tmp_path / "models" / ".adapters-staging").iterdir())


def test_fingerprint_follows_adds_replacements_and_removals(tmp_path):
    store = ad.AdapterStore(tmp_path / "adapters")
    empty = store.fingerprint()
    store.add(comfyui_file(tmp_path / "a.safetensors"))
    one = store.fingerprint()
    assert one != empty and store.fingerprint() == one  # stable while nothing changes
    store.remove("a")
    store.add(comfyui_file(tmp_path / "a.safetensors", rank=8))
    assert store.fingerprint() not in (one, empty)  # same name, another adapter
    store.remove("a.safetensors")
    assert store.fingerprint() == empty and store.list() == []
    with pytest.raises(ad.UnknownAdapter):
        store.remove("a")


def test_leftovers_of_a_killed_add_are_swept_and_never_listed(tmp_path):
    store = ad.AdapterStore(tmp_path / "models" / "adapters")
    stale = tmp_path / "models" / ".adapters-staging" / "123-dead"
    stale.mkdir(parents=True)
    peft_folder(stale / "half")
    old = time.time() - 2 * ad.STALE_STAGING_S
    os.utime(stale, (old, old))
    fresh = stale.parent / "456-running"
    fresh.mkdir()
    store.add(comfyui_file(tmp_path / "x.safetensors"))
    assert not stale.exists() and fresh.exists()  # another add may still use it
    assert [a.name for a in store.list()] == ["x"]


def test_an_adapter_put_there_by_hand_that_cannot_be_read_is_listed_with_its_problem(tmp_path):
    store = ad.AdapterStore(tmp_path / "adapters")
    store.ensure()
    (store.folder / "broken.safetensors").write_bytes(b"\x01\x00")
    sd_unet_file(store.folder / "sd.safetensors")
    listed = {a.name: a for a in store.list()}
    assert "is only 2 bytes long" in listed["broken"].problem
    assert "made for sdxl" in listed["sd"].problem and listed["sd"].made_for == ""


# ---------------------------------------------------------------- the engines' names


def test_the_sketch_names_the_adapters_as_the_store_says_the_engine_does(tmp_path):
    from cantor_desktop.system.selfexec import self_argv

    store, models = store_for_engines(tmp_path)
    names, log = engine_adapter_names(self_argv("sketch-server"), models, store.folder, tmp_path)
    assert names == ["b-tape.safetensors", "zz.safetensors", "a-style"]  # files, then folders
    assert sorted(names) == sorted(a.engine_name for a in store.list())
    assert f"[Server] Scanning adapters in {store.folder}" in log
    assert "[Registry] Adapter: a-style (PEFT)" in log and "3 Adapter" in log


def test_the_reader_and_the_hand_writer_agree_with_the_safetensors_library(tmp_path):
    """When the ``safetensors`` package is installed: what it writes is read here as it
    reads it, and a file written by hand (the fallback of tests/support) loads in it."""
    st = pytest.importorskip("safetensors.numpy")
    import support.adapter_files as files

    tensors = {**lora_tensors(alpha=4.0), "x.lora_A.weight": np.ones((2, 3), np.float16)}
    st.save_file(tensors, str(tmp_path / "lib.safetensors"), metadata={"note": "hi"})
    found, metadata = ad.read_header(tmp_path / "lib.safetensors")
    assert metadata == {"note": "hi"}
    assert {k: (t.dtype, t.shape) for k, t in found.items()} == {
        k: ({"float32": "F32", "float16": "F16"}[str(v.dtype)], list(v.shape))
        for k, v in tensors.items()
    }
    assert set(ad._alphas(tmp_path / "lib.safetensors", found)) == {4.0}
    files.write_safetensors(tmp_path / "hand.safetensors", tensors, {"note": "hi"}, by_hand=True)
    loaded = st.load_file(str(tmp_path / "hand.safetensors"))
    assert set(loaded) == set(tensors)
    assert all(np.array_equal(loaded[k], tensors[k]) for k in tensors)


# -- hostile files: bounded work, short quotes, no links -----------------------------------


def test_a_shape_of_100000_huge_dimensions_is_refused_at_once_naming_the_cap(tmp_path):
    """Refused at once, naming the cap (a product over the list that grows with its square
    would take 26-29 s of CPU), in a message that does not repeat the whole shape back."""
    shape = [2**62] * 100_000
    header = json.dumps(
        {"x.lora_A.weight": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}
    ).encode()
    path = _raw(tmp_path / "dims.safetensors", header, b"\0" * 4)
    with pytest.raises(NotAnAdapter) as caught:
        ad.inspect(path)
    message = str(caught.value)
    assert f"100000 dimensions; at most {ad.MAX_DIMS}" in message and len(message) < 300
    # within the cap, huge dimensions stop the product once it passes the file's size
    header = json.dumps(
        {"x.lora_A.weight": {"dtype": "F32", "shape": [10**4000] * 8, "data_offsets": [0, 4]}}
    ).encode()
    with pytest.raises(NotAnAdapter, match="does not fill its 4 bytes") as caught:
        ad.inspect(_raw(tmp_path / "huge.safetensors", header, b"\0" * 4))
    assert len(str(caught.value)) < 300


def test_long_names_deep_metadata_and_a_big_header_stay_short_and_bounded(tmp_path):
    name = "n" * 2**20 + ".lora_A.weight"
    header = json.dumps(
        {
            "__metadata__": {"deep": "x"},
            name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]},
        }
    ).encode()
    with pytest.raises(NotAnAdapter) as caught:
        ad.inspect(_raw(tmp_path / "long.safetensors", header, b"\0" * 4))
    assert len(str(caught.value)) < 300 and "characters" in str(caught.value)
    # metadata that is not strings is not kept (str() of 900-deep lists could recurse)
    deep = {"__metadata__": {"base_model": json.loads("[" * 900 + "]" * 900)}}
    header = json.dumps(
        {**deep, "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    ).encode()
    tensors, metadata = ad.read_header(_raw(tmp_path / "deep.safetensors", header, b"\0" * 4))
    assert metadata == {} and list(tensors) == ["x"]
    big = tmp_path / "big.safetensors"
    with open(big, "wb") as f:  # sparse: announces a header past the cap
        f.write(struct.pack("<Q", ad.HEADER_CAP + 1))
        f.truncate(ad.HEADER_CAP + 2**20)
    with pytest.raises(NotAnAdapter, match="larger than 16 MiB, the most read"):
        ad.inspect(big)


def test_links_inside_an_imported_adapter_are_refused(tmp_path):
    """A PEFT folder whose adapter_config.json (or weights) is a link to a file of the
    node's user is refused, never followed and copied in; a linked single file too."""
    store = ad.AdapterStore(tmp_path / "models" / "adapters")
    secret = tmp_path / "secret.txt"
    secret.write_text('{"hunter2": 1}')
    secret.chmod(0o600)
    linked_config = peft_folder(tmp_path / "cfg", config=False)
    (linked_config / "adapter_config.json").symlink_to(secret)
    linked_weights = tmp_path / "w"
    linked_weights.mkdir()
    (linked_weights / "adapter_model.safetensors").symlink_to(
        comfyui_file(tmp_path / "real.safetensors")
    )
    linked_file = tmp_path / "one.safetensors"
    linked_file.symlink_to(tmp_path / "real.safetensors")
    for src in (
        linked_config,
        linked_weights,
        linked_file,
        linked_weights / "adapter_model.safetensors",
    ):
        with pytest.raises(NotAnAdapter, match="is a symbolic link") as caught:
            store.add(src)
        assert "hunter2" not in str(caught.value) and caught.value.status == 422
    assert store.list() == [] and not list((tmp_path / "models").rglob("*.json"))


def test_a_link_swapped_in_after_the_checks_is_not_followed(tmp_path):
    real = comfyui_file(tmp_path / "real.safetensors")
    link = tmp_path / "link.safetensors"
    link.symlink_to(real)
    with pytest.raises(NotAnAdapter, match="symbolic link"):
        ad.copy_regular_file(link, tmp_path / "copy.safetensors")
    assert not (tmp_path / "copy.safetensors").exists()
