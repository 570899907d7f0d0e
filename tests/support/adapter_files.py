"""Small real LoRA adapters for the tests: ``.safetensors`` files (written by the
``safetensors`` package when it is installed, else by hand: 8-byte little-endian header
length, the JSON header, the raw little-endian data) and PEFT folders.

The layouts are the trainers' own: PEFT wraps ACE-Step's decoder
(``base_model.model.layers.N.self_attn.q_proj.lora_A.weight``), ComfyUI files name the
modules bare or under ``diffusion_model.`` with ``lora_down``/``lora_up`` and a baked
``.alpha`` (acestep.cpp adapter-merge.h reads all three)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from pathlib import Path

import httpx

import numpy as np

from cantor_desktop.models import adapters as ad
from cantor_desktop.models import gguf

from .procs import free_port

HIDDEN = {"2B": 2048, "XL": 2560}


def write_safetensors(
    path: Path,
    tensors: dict[str, np.ndarray],
    metadata: dict[str, str] | None = None,
    *,
    by_hand: bool = False,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file = None
    if not by_hand:
        try:
            from safetensors.numpy import save_file
        except ImportError:
            pass
    if save_file is not None:
        save_file(tensors, str(path), metadata=metadata)
        return path
    dtypes = {np.dtype("float32"): "F32", np.dtype("float16"): "F16"}
    header: dict = {}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": dtypes[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    return path


def lora_tensors(
    prefix: str = "base_model.model.",
    *,
    size: str = "2B",
    rank: int = 4,
    layers: tuple[int, ...] = (0, 1),
    modules=("self_attn.q_proj", "self_attn.o_proj"),
    a: str = "lora_A",
    b: str = "lora_B",
    alpha: float | None = None,
    dtype=np.float32,
    width: int | None = None,
) -> dict[str, np.ndarray]:
    """LoRA pairs for ACE-Step's DiT (``width`` overrides the hidden size: another model)."""
    hidden = width or HIDDEN[size]
    rng = np.random.default_rng(7)
    out = {}
    for n in layers:
        for m in modules:
            base = f"{prefix}layers.{n}.{m}"
            fan_in = fan_out = hidden
            out[f"{base}.{a}.weight"] = rng.standard_normal((rank, fan_in)).astype(dtype)
            out[f"{base}.{b}.weight"] = np.zeros((fan_out, rank), dtype)
            if alpha is not None:
                out[f"{base}.alpha"] = np.array(alpha, np.float32)
    return out


def comfyui_file(path: Path, **kw) -> Path:
    """A single-file ComfyUI LoRA (``diffusion_model.`` prefix, lora_down/up, baked alpha)."""
    kw.setdefault("alpha", 8.0)
    return write_safetensors(
        path, lora_tensors("diffusion_model.", a="lora_down", b="lora_up", **kw)
    )


def peft_folder(
    folder: Path,
    *,
    base: str | None = "ACE-Step/Ace-Step1.5",
    rank: int = 4,
    alpha: int = 8,
    config: bool = True,
    extra: dict | None = None,
    **kw,
) -> Path:
    """A PEFT adapter folder as PEFT saves one (and, like the hub's, with a README)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "adapter_model.safetensors", lora_tensors(rank=rank, **kw))
    if config:
        (folder / "adapter_config.json").write_text(
            json.dumps(
                {
                    "peft_type": "LORA",
                    "base_model_name_or_path": base,
                    "r": rank,
                    "lora_alpha": alpha,
                    "target_modules": ["q_proj", "o_proj"],
                    **(extra or {}),
                }
            )
        )
    (folder / "README.md").write_text("a style\n")
    return folder


def sd_unet_file(path: Path) -> Path:
    """A Stable Diffusion LoRA in the kohya layout (an image model's)."""
    rng = np.random.default_rng(3)
    return write_safetensors(
        path,
        {
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": rng.standard_normal(
                (4, 320)
            ).astype(np.float32),
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": np.zeros(
                (320, 4), np.float32
            ),
            "lora_unet_down_blocks_0_attentions_0_proj_in.alpha": np.array(4.0, np.float32),
        },
        metadata={"ss_base_model_version": "sdxl_base_v1-0"},
    )


def llm_peft_folder(folder: Path) -> Path:
    """A PEFT LoRA of a language model (Qwen style: ``model.layers.N.self_attn``)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(
        folder / "adapter_model.safetensors", lora_tensors("base_model.model.model.", width=1024)
    )
    (folder / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "base_model_name_or_path": "Qwen/Qwen3-0.6B",
                "r": 4,
                "lora_alpha": 8,
                "task_type": "CAUSAL_LM",
            }
        )
    )
    return folder


# -- an engine's scan of the adapters ----------------------------------------------------


def engine_props(url: str, proc: subprocess.Popen, log: Path, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the engine exited: {log.read_text()}")
        try:
            r = httpx.get(url + "/props", timeout=2)
            if r.status_code == 200:
                return r.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no /props: {log.read_text()}")


def engine_adapter_names(
    argv: list[str], models: Path, adapters: Path, tmp_path: Path, env: dict | None = None
) -> tuple[list[str], str]:
    """The adapter names an engine (its command line ``argv``) gives in ``/props``, and its
    log, started on ``models`` with ``adapters``."""
    port = free_port()
    log = tmp_path / f"engine-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv
            + [
                "--models",
                str(models),
                "--adapters",
                str(adapters),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env={**os.environ, **(env or {})},
        )
        try:
            props = engine_props(f"http://127.0.0.1:{port}", proc, log)
        finally:
            proc.terminate()
            proc.wait(10)
    return props["adapters"], log.read_text("utf-8")


def store_for_engines(tmp_path: Path) -> tuple[ad.AdapterStore, Path]:
    """An adapter store of three (two files, one PEFT folder) and a models folder with an
    LM: what an engine's adapter scan is checked against."""
    models = tmp_path / "models-in"
    models.mkdir()
    gguf.write_header_only(models / "acestep-5Hz-lm-0.6B-Q8_0.gguf", gguf.ARCH_LM)
    store = ad.AdapterStore(tmp_path / "models" / "adapters")
    store.add(comfyui_file(tmp_path / "src" / "b-tape.safetensors"))
    store.add(peft_folder(tmp_path / "src" / "a-style"))
    store.add(comfyui_file(tmp_path / "src" / "c.safetensors"), name="zz")
    (tmp_path / "models" / ".adapters-staging" / "1-busy").mkdir(parents=True)  # not seen
    return store, models
