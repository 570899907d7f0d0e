"""LoRA adapters for ACE-Step's DiT, kept in the models folder (``models/adapters/``), where
the engine finds them (``ace-server --adapters DIR``, scanned when it starts).

An adapter is what ace-server takes: a single ``NAME.safetensors`` (ComfyUI or LyCORIS
layout), or a PEFT folder ``NAME/`` holding ``adapter_model.safetensors`` (and usually
``adapter_config.json``). A song names it by NAME; the engine knows it by its entry in the
folder (``NAME.safetensors`` or ``NAME``: :attr:`Adapter.engine_name`).

Nothing here needs torch: a safetensors file starts with an 8-byte little-endian length
and that many bytes of JSON naming every tensor's dtype, shape and byte range, and PEFT's
``adapter_config.json`` is plain JSON. From those the store tells what an adapter was made
for, and refuses one whose files say it belongs to another model: a base model that is not
ACE-Step 1.5, or tensors no ACE-Step 1.5 DiT has (its 2B DiT has 24 layers of width 2048,
the XL one 32 of width 2560, as acestep.cpp builds them).

Adding copies into a staging folder beside the adapters folder (``models/.adapters-staging``,
which the engine never scans), checks the copy, and renames it into place under a lock: the
engine never sees half an adapter, and two adds of one name cannot both win. Removing
renames the adapter out of the folder first, then deletes it.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import shutil
import stat
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from ..errors import CantorError, short_repr, short_text
from ..files import write_stream
from ..system.paths import paths

FOLDER = "adapters"
STAGING = ".adapters-staging"
PEFT_WEIGHTS = "adapter_model.safetensors"
PEFT_CONFIG = "adapter_config.json"
SUFFIX = ".safetensors"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
HEADER_CAP = 16 * 2**20
"""The most JSON header read (an adapter's names a few thousand tensors in well under 1 MB;
the safetensors library itself stops at 100 MB)."""
MAX_DIMS = 8
"""Dimensions of one tensor at most (an adapter's are 1 to 4)."""
MAX_TENSORS = 200_000
"""Tensors in one file at most (a LoKr of every DiT module has a few thousand)."""
DTYPE = re.compile(r"[A-Z][A-Z0-9_]{0,15}")
CONFIG_CAP = 1 * 2**20
UPLOAD_CAP = 8 * 2**30
"""The largest adapter an upload may be (a rank-256 LoRA of the XL DiT in F32 is ~3 GB)."""
STALE_STAGING_S = 3600.0

DIT_SIZES = {2048: ("2B", 24), 2560: ("XL", 32)}
"""ACE-Step 1.5 DiTs by hidden width: (name, layers)."""
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}
ENGINE_DTYPES = ("F32", "BF16", "F16")
"""The dtypes ace-server merges (adapter-merge.h); other tensors it skips."""
PEFT_TYPES = ("LORA", "LOKR")

# a DiT module an adapter may change: decoder.layers.N.{self_attn,cross_attn}.{q,k,v,o}_proj,
# decoder.layers.N.mlp.{gate,up,down}_proj, and the small embedders around them
_LAYER_MODULE = re.compile(
    r"layers\.(\d{1,4})\.(self_attn\.[qkvo]_proj|cross_attn\.[qkvo]_proj|"
    r"mlp\.(?:gate|up|down)_proj)"
)
_OTHER_MODULES = {
    "time_embed.linear_1",
    "time_embed.linear_2",
    "time_embed.time_proj",
    "time_embed_r.linear_1",
    "time_embed_r.linear_2",
    "time_embed_r.time_proj",
    "condition_embedder",
}
_LYCORIS_LAYER = re.compile(r"lycoris_layers_(\d{1,4})_(self_attn|cross_attn|mlp)_(\w+_proj)$")
_PREFIXES = ("base_model.model.", "diffusion_model.")
_LORA_MARKS = (".lora_A.", ".lora_B.", ".lora_down.", ".lora_up.")
# modules whose input (q, k, v, gate, up) or output (o, down) is the DiT's hidden width
_TAKES_HIDDEN = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "cross_attn.q_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
)
_GIVES_HIDDEN = ("self_attn.o_proj", "cross_attn.o_proj", "mlp.down_proj")
# what other models' adapters look like (for saying what one was made for)
_LOOKS_LIKE = (
    (
        re.compile(
            r"lora_unet_|(^|\.)(down_blocks|up_blocks|mid_block|input_blocks|"
            r"output_blocks)\."
        ),
        "a Stable Diffusion UNet (an image model)",
    ),
    (re.compile(r"lora_te\d?_|text_model\.encoder\."), "a CLIP text encoder (an image model)"),
    (re.compile(r"(^|\.)(double_blocks|single_blocks)\."), "Flux (an image model)"),
    (
        re.compile(r"(^|\.)transformer_blocks\.\d+\."),
        "a diffusers transformer (ACE-Step v1, SD3 or an image model)",
    ),
    (
        re.compile(r"(^|\.)model\.layers\.\d+\.|(^|\.)h\.\d+\.attn|lm_head"),
        "a language model (LLaMA/Qwen style)",
    ),
)


class AdapterError(CantorError):
    """An adapter cannot be added, found or removed; the message says why. ``field`` names
    the request's part at fault; ``status`` is the HTTP status the node answers with."""

    def __init__(self, message: str, *, field: str = "path", status: int = 422):
        super().__init__(message)
        self.field = field
        self.status = status


class NotAnAdapter(AdapterError):
    """The files are not an adapter the engine can read."""


class MadeForAnotherModel(AdapterError):
    """The adapter's files say it belongs to another model (``made_for``)."""

    def __init__(self, message: str, made_for: str, **kw):
        super().__init__(message, **kw)
        self.made_for = made_for


class UnknownAdapter(AdapterError, LookupError):
    """No adapter of that name is installed."""

    def __init__(self, name: str, installed: list[str]):
        shown = ", ".join(installed) if installed else "none (`cantor adapters add PATH`)"
        super().__init__(
            f"adapter {name!r} is not installed; installed: {shown}", field="adapter", status=404
        )
        self.name = name
        self.installed = installed


# --------------------------------------------------------------------------- reading


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: list[int]
    start: int = 0  # where its bytes are in the file


def read_header(path: Path, shown: str | None = None) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The tensors of a ``.safetensors`` file and its ``__metadata__`` (strings), from its
    header alone; NotAnAdapter saying what is wrong with the file.

    Linear in the header's size and bounded (:data:`HEADER_CAP`, :data:`MAX_TENSORS`,
    :data:`MAX_DIMS`): a file from anyone costs a bounded read and never an error other
    than NotAnAdapter, which quotes at most a short prefix of what the file says."""
    shown = shown or path.name
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                raise NotAnAdapter(
                    f"{shown} is not a safetensors file: it is only {size} bytes long"
                )
            (length,) = struct.unpack("<Q", head)
            if 8 + length > size:
                raise NotAnAdapter(
                    f"{shown} is not a safetensors file: its first 8 bytes announce a "
                    f"header longer than the file"
                )
            if length > HEADER_CAP:
                raise NotAnAdapter(
                    f"{shown} is refused: its header is larger than "
                    f"{HEADER_CAP // 2**20} MiB, the most read"
                )
            raw = fh.read(length)
    except OSError as exc:
        raise NotAnAdapter(f"{shown} cannot be read: {exc.strerror or exc}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise NotAnAdapter(f"{shown} is not a safetensors file: its header is not JSON") from None
    if not isinstance(header, dict):
        raise NotAnAdapter(f"{shown} is not a safetensors file: its header is not a JSON object")
    if len(header) > MAX_TENSORS + 1:
        raise NotAnAdapter(
            f"{shown} is refused: it names {len(header) - 1} tensors; at most {MAX_TENSORS}"
        )
    data_size = size - 8 - length
    tensors: dict[str, Tensor] = {}
    metadata: dict[str, str] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if isinstance(entry, dict):  # strings to strings; anything else is not kept
                metadata = {k: v for k, v in entry.items() if isinstance(v, str)}
            continue
        quoted = short_repr(name)
        if not isinstance(entry, dict):
            raise NotAnAdapter(f"{shown}: tensor {quoted} has no dtype, shape and offsets")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if isinstance(shape, list) and len(shape) > MAX_DIMS:
            raise NotAnAdapter(
                f"{shown} is damaged: tensor {quoted} has {len(shape)} dimensions; "
                f"at most {MAX_DIMS}"
            )
        if (
            not isinstance(dtype, str)
            or not DTYPE.fullmatch(dtype)
            or not isinstance(shape, list)
            or not all(type(d) is int and d >= 0 for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size
        ):
            raise NotAnAdapter(
                f"{shown} is damaged: tensor {quoted} has a bad dtype, shape "
                f"or byte range (the file may be cut short)"
            )
        span = offsets[1] - offsets[0]
        if dtype in DTYPE_BYTES and _elements(shape, span) * DTYPE_BYTES[dtype] != span:
            raise NotAnAdapter(
                f"{shown} is damaged: tensor {quoted} ({dtype}, {len(shape)} dimensions) "
                f"does not fill its {span} bytes"
            )
        tensors[name] = Tensor(name, dtype, list(shape), 8 + length + offsets[0])
    if not tensors:
        raise NotAnAdapter(f"{shown} holds no tensors")
    return tensors, metadata


def _elements(shape: list[int], most: int) -> int:
    """The product of ``shape``, or ``most + 1`` as soon as it passes ``most`` (a shape of
    huge numbers costs one multiplication past the file's size, never a growing product)."""
    count = 1
    for d in shape:
        count *= d
        if count > most:
            return most + 1
    return count


def read_config(path: Path) -> dict[str, Any]:
    """PEFT's adapter_config.json ({} when there is none)."""
    if not path.is_file():
        return {}
    try:
        if path.stat().st_size > CONFIG_CAP:
            raise NotAnAdapter(f"{path.name} is too large to be a PEFT adapter config")
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise NotAnAdapter(
            f"{path.parent.name}/{path.name} cannot be read as JSON: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None
    if not isinstance(data, dict):
        raise NotAnAdapter(f"{path.parent.name}/{path.name} is not a JSON object")
    return data


# --------------------------------------------------------------------------- what it is for


@dataclass
class Facts:
    """What an adapter's files say about it."""

    format: str  # peft | comfyui | lycoris
    made_for: str  # for people: "ACE-Step 1.5 (2B DiT)"
    dit: str | None = None  # "2B" | "XL" | None (its tensors do not say)
    base_model: str | None = None  # as its files name it
    rank: int | None = None
    alpha: float | None = None
    targets: list[str] = field(default_factory=list)  # module kinds, e.g. self_attn.q_proj
    modules: int = 0  # DiT modules it changes


def _module_of(key: str) -> tuple[str, str] | None:
    """(module path without ``decoder.``, part) of an adapter tensor, as ace-server maps it;
    part is "A", "B", "alpha", "lokr" or "dora"; None for a tensor that is no adapter's."""
    if key.startswith("lycoris_"):
        prefix, _, suffix = key.rpartition(".")
        part = (
            "lokr"
            if suffix.startswith("lokr_")
            else "alpha"
            if suffix == "alpha"
            else "dora"
            if suffix == "dora_scale"
            else None
        )
        if part is None:
            return None
        found = _LYCORIS_LAYER.match(prefix)
        if found:
            return f"layers.{found.group(1)}.{found.group(2)}.{found.group(3)}", part
        return prefix[len("lycoris_") :], part
    s = key
    for pfx in _PREFIXES:
        if s.startswith(pfx):
            s = s[len(pfx) :]
            break
    if s.endswith(".alpha"):
        module, part = s[: -len(".alpha")], "alpha"
    else:
        pos = s.find(".lora_")
        if pos < 0:
            return None
        mark = s[pos:]
        part = (
            "A"
            if mark.startswith((".lora_A.", ".lora_down."))
            else "B"
            if mark.startswith((".lora_B.", ".lora_up."))
            else None
        )
        if part is None:
            return None
        module = s[:pos]
    if module.startswith("decoder."):
        module = module[len("decoder.") :]
    return module, part


def _is_dit_module(module: str) -> bool:
    return bool(_LAYER_MODULE.fullmatch(module)) or module in _OTHER_MODULES


def _kind(module: str) -> str:
    found = _LAYER_MODULE.fullmatch(module)
    return found.group(2) if found else module


def _looks_like(names: Iterable[str]) -> str:
    names = list(names)
    for pattern, what in _LOOKS_LIKE:
        if any(pattern.search(n) for n in names):
            return what
    return "another model"


_ACE = re.compile(r"ace[-_ ]?step", re.I)
_ACE_V1 = re.compile(r"v1[-_.]?3\.?5b|3\.5b|ace[-_ ]?step[-_ ]?v1(?![-_.]?5)(\b|[-_])", re.I)


def _local_path(text: str) -> bool:
    return (
        text.startswith(("/", "./", "../", "~", "\\"))
        or re.match(r"^[A-Za-z]:[\\/]", text) is not None
        or "\\" in text
        or text.count("/") > 1
    )


def _base_verdict(base: str, where: str) -> tuple[bool, str] | None:
    """(refuse?, what for) from a base model's name; None when it says nothing."""
    base = base.strip()
    if not base:
        return None
    if _ACE.search(base):
        if _ACE_V1.search(base):
            return True, f"ACE-Step v1 (3.5B; {where} names {short_text(base)})"
        return False, base
    if _local_path(base):
        return None  # a trainer's local folder: its tensors decide
    return True, f"{short_text(base)} ({where})"


def _declared_base(config: dict[str, Any], metadata: dict[str, str], shown: str) -> str | None:
    """The base model the files name (PEFT's config, a trainer's metadata); refused with
    the reason when that is another model than ACE-Step 1.5."""
    found = []
    base = config.get("base_model_name_or_path")
    if isinstance(base, str):
        found.append((base, f"{PEFT_CONFIG}'s base_model_name_or_path"))
    for key in (
        "modelspec.architecture",
        "ss_base_model_version",
        "ss_sd_model_name",
        "base_model",
        "base_model_name_or_path",
    ):
        if metadata.get(key):
            found.append((metadata[key], f"its metadata's {key}"))
    for value, where in found:
        verdict = _base_verdict(value, where)
        if verdict is not None and verdict[0]:
            raise MadeForAnotherModel(
                f"{shown} was made for {verdict[1]}, not ACE-Step 1.5's DiT: refused", verdict[1]
            )
    named = [
        value.strip()
        for value, where in found
        if where.endswith("base_model_name_or_path") or where.endswith("base_model")
    ]
    return next((short_text(v, 200) for v in named if v), None)


def _dit_modules(tensors: dict[str, Tensor], shown: str) -> dict[str, dict[str, Tensor]]:
    """The adapter's tensors by the DiT module they change (``layers.3.self_attn.q_proj``)
    and part; refused when none of its modules is the DiT's."""
    modules: dict[str, dict[str, Tensor]] = {}
    for name, tensor in tensors.items():
        found = _module_of(name)
        if found is not None:
            modules.setdefault(found[0], {})[found[1]] = tensor
    what, sample = _looks_like(tensors), next(iter(tensors))
    if not modules:
        if what == "another model":
            raise NotAnAdapter(
                f"{shown} holds no LoRA or LoKr tensors (e.g. {short_repr(sample)}): it "
                f"is not an adapter (a whole model's weights?)"
            )
        raise MadeForAnotherModel(
            f"{shown} holds no LoRA or LoKr tensors, and its tensors "
            f"(e.g. {short_repr(sample)}) are those of {what}: refused",
            what,
        )
    dit = {m: parts for m, parts in modules.items() if _is_dit_module(m)}
    if not dit:
        raise MadeForAnotherModel(
            f"{shown} was made for {what}: none of its {len(modules)} modules (e.g. "
            f"{short_repr(next(iter(modules)))}) is in ACE-Step 1.5's DiT, whose layers are "
            f"'layers.N.self_attn.q_proj' and the like: refused",
            what,
        )
    return dit


def _dit_size(modules: dict[str, dict[str, Tensor]], shown: str) -> tuple[str | None, set[int]]:
    """Which DiT the shapes fit ("2B", "XL", or None when they do not say) and the ranks;
    refused when a width or a layer no ACE-Step 1.5 DiT has is changed."""
    widths: dict[int, str] = {}
    dtypes: set[str] = set()
    ranks: set[int] = set()
    for module, parts in modules.items():
        a, b = parts.get("A"), parts.get("B")
        dtypes.update(t.dtype for t in (a, b) if t is not None)
        if a is None or b is None or len(a.shape) != 2 or len(b.shape) != 2:
            continue
        rank, fan_in, fan_out = a.shape[0], a.shape[1], b.shape[0]
        if b.shape[1] != rank:
            raise NotAnAdapter(
                f"{shown} is inconsistent: {module} has rank {rank} in lora_A "
                f"but {b.shape[1]} in lora_B"
            )
        ranks.add(rank)
        kind = _kind(module)
        width = fan_in if kind in _TAKES_HIDDEN else fan_out if kind in _GIVES_HIDDEN else None
        if width is not None:
            widths.setdefault(width, module)
    for width, module in widths.items():
        if width not in DIT_SIZES:
            what = f"a model {width} features wide"
            raise MadeForAnotherModel(
                f"{shown} was made for {what}: its {module} works on {width} features, "
                f"ACE-Step 1.5's DiT on 2048 (2B) or 2560 (XL): refused",
                what,
            )
    if len(widths) > 1:
        raise NotAnAdapter(
            f"{shown} is inconsistent: "
            + ", ".join(f"{m} works on {w} features" for w, m in widths.items())
        )
    if dtypes and not dtypes & set(ENGINE_DTYPES):
        raise NotAnAdapter(
            f"{shown} stores its weights as {', '.join(sorted(dtypes))}; "
            f"the engine reads {', '.join(ENGINE_DTYPES)}"
        )
    size, depth = DIT_SIZES[next(iter(widths))] if widths else (None, 32)
    layers = [int(m.group(1)) for m in map(_LAYER_MODULE.fullmatch, modules) if m]
    deepest = max(layers, default=-1)
    if deepest >= depth:
        limit = f"{depth} layers ({size})" if size else "24 layers (2B) or 32 (XL)"
        what = "a deeper model than ACE-Step 1.5's DiT"
        raise MadeForAnotherModel(
            f"{shown} was made for {what}: it changes layer {deepest}, "
            f"the DiT has {limit}: refused",
            what,
        )
    if size is None and deepest >= 24:
        size = "XL"  # only the XL DiT has layers 24 to 31
    return size, ranks


def examine(
    tensors: dict[str, Tensor],
    metadata: dict[str, str],
    config: dict[str, Any],
    *,
    fmt: str,
    shown: str,
    alphas: list[float] | None = None,
) -> Facts:
    """What the adapter is for, from its tensors, its metadata and its PEFT config (and
    the per-module ``alphas`` a single file bakes in); MadeForAnotherModel when they say it
    is not for ACE-Step 1.5's DiT."""
    base = _declared_base(config, metadata, shown)
    peft_type = config.get("peft_type")
    if isinstance(peft_type, str) and peft_type.upper() not in PEFT_TYPES:
        raise NotAnAdapter(
            f"{shown} is a PEFT {peft_type} adapter; the engine applies LoRA and LoKr adapters only"
        )
    modules = _dit_modules(tensors, shown)
    dit, ranks = _dit_size(modules, shown)
    alpha = config.get("lora_alpha")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        alpha = alphas[0] if alphas and len(set(alphas)) == 1 else None
    rank = config.get("r") if isinstance(config.get("r"), int) else max(ranks, default=None)
    if fmt == "comfyui" and any("lokr" in parts for parts in modules.values()):
        fmt = "lycoris"
    return Facts(
        format=fmt,
        made_for=f"ACE-Step 1.5 ({dit} DiT)" if dit else "ACE-Step 1.5 (DiT)",
        dit=dit,
        base_model=base,
        rank=rank,
        alpha=float(alpha) if alpha is not None else None,
        targets=sorted({_kind(m) for m in modules}),
        modules=len(modules),
    )


def inspect(path: Path, shown: str | None = None) -> Facts:
    """An adapter's facts from its files: a ``.safetensors`` file or a PEFT folder."""
    path = Path(path)
    if path.is_dir():
        weights = path / PEFT_WEIGHTS
        shown = shown or f"{path.name}/"
        if not weights.is_file():
            if (path / "adapter_model.bin").is_file():
                raise NotAnAdapter(
                    f"{shown} holds adapter_model.bin (a PyTorch pickle), not "
                    f"{PEFT_WEIGHTS}; the engine reads safetensors only"
                )
            raise NotAnAdapter(f"{shown} is not a PEFT adapter folder: it has no {PEFT_WEIGHTS}")
        tensors, metadata = read_header(weights, f"{shown}{PEFT_WEIGHTS}")
        return examine(
            tensors,
            metadata,
            read_config(path / PEFT_CONFIG),
            fmt="peft",
            shown=shown.rstrip("/"),
            alphas=_alphas(weights, tensors),
        )
    tensors, metadata = read_header(path, shown)
    return examine(
        tensors,
        metadata,
        {},
        fmt="comfyui",
        shown=shown or path.name,
        alphas=_alphas(path, tensors),
    )


def _alphas(path: Path, tensors: dict[str, Tensor], most: int = 4096) -> list[float]:
    """The scalar ``*.alpha`` values a file bakes in (F32, shape [], 4 bytes each)."""
    found = [
        t
        for t in tensors.values()
        if t.name.endswith(".alpha") and t.dtype == "F32" and t.shape == []
    ][:most]
    values = []
    try:
        with open(path, "rb") as fh:
            for t in found:
                fh.seek(t.start)
                (value,) = struct.unpack("<f", fh.read(4))
                values.append(round(value, 4))
    except (OSError, struct.error):
        return []
    return values


# --------------------------------------------------------------------------- the store


@dataclass
class Adapter:
    """One installed adapter."""

    name: str  # what a song names (its ``adapter`` field)
    engine_name: str  # what the engine calls it (its /props "adapters")
    path: str
    size: int
    added: float
    format: str = ""
    made_for: str = ""
    dit: str | None = None
    base_model: str | None = None
    rank: int | None = None
    alpha: float | None = None
    targets: list[str] = field(default_factory=list)
    problem: str | None = None  # an adapter put there by hand that cannot be read

    @classmethod
    def of(cls, name: str, path: Path, size: int, added: float, facts: Facts) -> "Adapter":
        return cls(
            name,
            path.name,
            str(path),
            size,
            added,
            facts.format,
            facts.made_for,
            facts.dit,
            facts.base_model,
            facts.rank,
            facts.alpha,
            list(facts.targets),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_name(name: Any, field_name: str = "name") -> str:
    """A name an adapter may be added under (letters, digits, ``. _ + -``; no
    ``.safetensors``, which is added to a single file's name)."""
    if isinstance(name, str) and name.lower().endswith(SUFFIX):
        name = name[: -len(SUFFIX)]
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise AdapterError(
            f"{field_name}: {name!r} cannot name an adapter: use letters, digits "
            f"and . _ + - (at most 100, starting with a letter or digit)",
            field=field_name,
        )
    return name


def name_from(path: Path) -> str:
    """The name an adapter gets from its file or folder name, made acceptable."""
    stem = path.name[: -len(SUFFIX)] if path.name.lower().endswith(SUFFIX) else path.name
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", stem).strip("-._+")[:100]
    return cleaned or "adapter"


def _refuse_link(path: Path) -> None:
    """An adapter is taken from the files themselves, never through a symbolic link (a link
    could point at any file the node may read)."""
    if path.is_symlink():
        raise NotAnAdapter(
            f"path: {path} is a symbolic link; give the file or folder itself (links are refused)"
        )


def copy_regular_file(src: Path, dest: Path) -> None:
    """Copy ``src`` only when it is a regular file at the moment it is opened (a link
    put in its place after the checks is refused, not followed)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(src, flags)
    except OSError:
        if src.is_symlink():
            _refuse_link(src)
        raise
    with open(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            raise AdapterError(f"path: {src} is not a regular file")
        with open(dest, "xb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _fsync_tree(path: Path) -> None:
    files = [path] if path.is_file() else [p for p in path.iterdir() if p.is_file()]
    for f in files:
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


class AdapterStore:
    """The adapters folder of one Cantor home (``models/adapters``)."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder is not None else paths().models_dir / FOLDER
        self.staging = self.folder.parent / STAGING

    def ensure(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def _lock(self):
        """The store's lock (between the node's threads, and a CLI or node of this home)."""
        from filelock import FileLock

        locks = paths().locks_dir
        locks.mkdir(parents=True, exist_ok=True)
        return FileLock(str(locks / "adapters.lock"), timeout=60)

    # -- what is there ------------------------------------------------------------------

    def _entries(self) -> list[tuple[str, str, Path]]:
        """(name, engine name, path) of every adapter the engine would see, sorted."""
        out = []
        try:
            children = sorted(self.folder.iterdir(), key=lambda p: p.name)
        except OSError:
            return []
        for p in children:
            if p.name.startswith("."):
                continue
            if p.is_file() and p.name.endswith(SUFFIX):
                out.append((p.name[: -len(SUFFIX)], p.name, p))
            elif p.is_dir() and (p / PEFT_WEIGHTS).is_file():
                out.append((p.name, p.name, p))
        return out

    def list(self) -> list[Adapter]:
        """Every installed adapter, with what its files say (an unreadable one carries its
        ``problem``)."""
        found = []
        for name, engine_name, path in self._entries():
            try:
                size, added = _tree_size(path), path.stat().st_mtime
            except OSError:
                continue
            try:
                found.append(Adapter.of(name, path, size, added, inspect(path, engine_name)))
            except AdapterError as exc:
                found.append(Adapter(name, engine_name, str(path), size, added, problem=str(exc)))
        return found

    def names(self) -> builtins.list[str]:  # (list is a method here)
        return [name for name, _e, _p in self._entries()]

    def get(self, name: str) -> Adapter:
        """The adapter a song names (UnknownAdapter naming the installed ones)."""
        for adapter in self.list():
            if adapter.name == name or adapter.engine_name == name:
                return adapter
        raise UnknownAdapter(name, self.names())

    def fingerprint(self) -> tuple:
        """Changes whenever an adapter is added, replaced or removed (what an engine started
        earlier has not seen)."""
        out = []
        for _name, engine_name, path in self._entries():
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((engine_name, st.st_ino, st.st_mtime_ns))
        return tuple(out)

    # -- adding -------------------------------------------------------------------------

    def _taken(self, name: str) -> str | None:
        """The entry that a new adapter called ``name`` would clash with (any case, either
        layout: file systems that ignore case would merge them)."""
        low = name.lower()
        try:
            children = list(self.folder.iterdir())
        except OSError:
            return None
        for p in children:
            stem = p.name[: -len(SUFFIX)] if p.name.lower().endswith(SUFFIX) else p.name
            if stem.lower() == low:
                return p.name
        return None

    def _clash(self, name: str) -> AdapterError:
        return AdapterError(
            f"name: an adapter named {name!r} is already installed; remove it "
            f"first (`cantor adapters rm {name}`) or add this one under "
            f"another name",
            field="name",
            status=409,
        )

    def _new_stage(self) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        self._sweep_staging()
        stage = self.staging / f"{os.getpid()}-{secrets.token_hex(6)}"
        stage.mkdir()
        return stage

    def _sweep_staging(self) -> None:
        """What an add that was killed left in the staging folder (an hour old)."""
        now = time.time()
        for p in self.staging.iterdir():
            try:
                if now - p.stat().st_mtime > STALE_STAGING_S:
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
            except OSError:
                pass

    def _place(self, staged: Path, name: str, facts: Facts) -> Adapter:
        """Rename the checked copy into the adapters folder, unless the name was taken
        meanwhile (under the store's lock: two adds of one name cannot both win)."""
        dest = self.folder / (name + ("" if staged.is_dir() else SUFFIX))
        with self._lock():
            self.ensure()
            if self._taken(name):
                raise self._clash(name)
            os.replace(staged, dest)
        return Adapter.of(name, dest, _tree_size(dest), dest.stat().st_mtime, facts)

    def source_of(self, path: str | os.PathLike) -> tuple[Path, bool]:
        """(the adapter's path, is it a PEFT folder) for a path on this machine: a
        ``.safetensors`` file, a PEFT folder, or the ``adapter_model.safetensors`` in one."""
        text = os.path.expanduser(str(path)).strip()
        if not text:
            raise AdapterError("path: give a .safetensors file or a PEFT adapter folder")
        src = Path(text)
        if not src.is_absolute():
            raise AdapterError(f"path: {text} is not an absolute path on the node's machine")
        if not src.exists() and not src.is_symlink():
            raise AdapterError(f"path: {src} does not exist on the node's machine")
        _refuse_link(src)
        if src.is_file() and src.name == PEFT_WEIGHTS:
            src = src.parent
        if src.is_dir():
            for part in (PEFT_WEIGHTS, PEFT_CONFIG):
                _refuse_link(src / part)
            if not (src / PEFT_WEIGHTS).is_file():
                inspect(src)  # says what is missing
            return src, True
        if not src.is_file():
            raise AdapterError(f"path: {src} is not a regular file or folder")
        if not src.name.lower().endswith(SUFFIX):
            raise NotAnAdapter(
                f"{src.name} is not a .safetensors file (an adapter is a "
                f".safetensors file or a PEFT folder holding {PEFT_WEIGHTS})"
            )
        return src, False

    def add(self, path: str | os.PathLike, name: str | None = None) -> Adapter:
        """Copy an adapter in: a ``.safetensors`` file (ComfyUI or LyCORIS) or a PEFT folder
        (its ``adapter_model.safetensors`` and ``adapter_config.json``). The copy is checked
        and only then renamed into the folder. AdapterError (with its HTTP status) when it
        is not an adapter, was made for another model, or its name is taken."""
        from ..fetch import download as dl

        src, peft = self.source_of(path)
        name = check_name(name) if name is not None else name_from(src)
        inspect(src)  # refuse before copying gigabytes
        if self._taken(name):
            raise self._clash(name)
        files = (
            [src / PEFT_WEIGHTS] + ([src / PEFT_CONFIG] if (src / PEFT_CONFIG).is_file() else [])
            if peft
            else [src]
        )
        try:
            needed = sum(f.stat().st_size for f in files)
        except OSError as exc:
            raise AdapterError(f"path: {src} cannot be read: {exc.strerror or exc}") from None
        self.ensure()
        try:
            dl.check_free_space(self.folder, needed)
        except dl.NotEnoughSpace as exc:
            raise AdapterError(str(exc), field="path", status=507) from None
        stage = self._new_stage()
        try:
            staged = stage / (name if peft else name + SUFFIX)
            try:
                if peft:
                    staged.mkdir()
                    for f in files:
                        copy_regular_file(f, staged / f.name)
                else:
                    copy_regular_file(src, staged)
                _fsync_tree(staged)
            except OSError as exc:
                raise AdapterError(
                    f"path: {src} could not be copied: {exc.strerror or exc}", status=500
                ) from None
            facts = inspect(staged, src.name + ("/" if peft else ""))  # what is kept
            return self._place(staged, name, facts)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    async def receive(
        self, name: str, chunks: AsyncIterator[bytes], length: int | None = None
    ) -> Adapter:
        """An uploaded ``.safetensors`` (from another machine) kept as ``name`` once whole
        and checked; nothing is kept from a refused or cut upload."""
        import asyncio

        from ..fetch import download as dl

        name = check_name(name)
        if self._taken(name):
            raise self._clash(name)
        if length is not None and length > UPLOAD_CAP:
            raise AdapterError(
                f"body: {name} is {length} bytes; at most {UPLOAD_CAP} are taken",
                field="body",
                status=413,
            )
        self.ensure()
        if length is not None:
            try:
                dl.check_free_space(self.folder, length)
            except dl.NotEnoughSpace as exc:
                raise AdapterError(str(exc), field="body", status=507) from None
        stage = await asyncio.to_thread(self._new_stage)
        staged = stage / (name + SUFFIX)

        def check(got: int, _chunk: bytes) -> None:
            if got > UPLOAD_CAP:
                raise AdapterError(
                    f"body: {name} is larger than {UPLOAD_CAP} bytes", field="body", status=413
                )

        try:
            got = await write_stream(staged, chunks, check)
            if length is not None and got != length:
                raise AdapterError(
                    f"body: the upload of {name} stopped after {got} of {length} bytes",
                    field="body",
                    status=400,
                )
            try:
                facts = await asyncio.to_thread(inspect, staged, name + SUFFIX)
            except AdapterError as exc:
                exc.field = "body"
                raise
            return await asyncio.to_thread(self._place, staged, name, facts)
        finally:
            await asyncio.to_thread(shutil.rmtree, stage, True)

    # -- removing -----------------------------------------------------------------------

    def remove(self, name: str) -> int:
        """Delete an adapter; the bytes freed. It leaves the folder in one rename, so an
        engine starting meanwhile sees it whole or not at all."""
        with self._lock():
            entry = next(((n, e, p) for n, e, p in self._entries() if name in (n, e)), None)
            if entry is None:
                raise UnknownAdapter(name, self.names())
            path = entry[2]
            size = _tree_size(path)
            self.staging.mkdir(parents=True, exist_ok=True)
            gone = self.staging / f"removed-{secrets.token_hex(6)}-{path.name}"
            os.replace(path, gone)
        if gone.is_dir():
            shutil.rmtree(gone, ignore_errors=True)
        else:
            gone.unlink(missing_ok=True)
        return size


def store() -> AdapterStore:
    """This Cantor home's adapters (``models/adapters``)."""
    return AdapterStore()
