"""A fabricated ACE-Step model set the real ace-server runs whole songs with.

No ACE-Step weights can be downloaded for the tests, but the real engine loads GGUF files
written with the ``gguf`` package and runs every job on them: ``/lm``, ``/synth`` with a WAV
and its latent, one ``[DiT] Step k/N`` line per step, a cancel that lands. The audio is
silence, but every line, every byte of the protocol and every timing the product reacts to
is the engine's own. What the engine reads is named below by file:line in acestep.cpp
fa33775.

The set, in one folder:

- ``acestep-5Hz-lm-0.6B-F16.gguf``: a one-layer LM 64 wide, with the real vocabulary
  (217,204 rows: the special ids are fixed, ``src/prompt.h:16-21``), a small byte-level BPE
  (``src/bpe.h:383-428``) and its output biased so that after each audio code it ends with
  probability :data:`END_CHANCE`: a vocal song stays a few codes (0.2 s each) long, the
  same ones for a seed.
- ``acestep-v15-turbo-Q4_0.gguf`` and ``acestep-v15-base-Q4_0.gguf``: a two-layer DiT at the
  real width (2048: the condition input is 2048 wide, ``src/dit-graph.h:489``, and a LoRA
  made for ACE-Step 1.5 must fit it), two heads and a narrow MLP, with the fixed-size
  parts of the same file: condition encoder, FSQ detokenizer and tokenizer,
  ``silence_latent``, ``acestep.is_turbo`` (``src/model-store.cpp:546-553``). Zero Q4_0
  matrices.
- ``Qwen3-Embedding-0.6B-Q4_0.gguf``: the full-shape text encoder (28 layers, 1024 wide,
  ``src/qwen3-enc.h:327-358``), zero Q4_0.
- ``vae-BF16.gguf``: the full-shape VAE decoder and encoder, zero BF16 (the engine reads
  every tensor as raw BF16, ``src/vae.h:64-160``, ``src/vae-enc.h:56-152``).

:func:`model_set` writes it once per content version (a hash of what the files hold) into
a cache folder kept across test sessions, atomically and under a lock.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
CACHE_ENV = "CANTOR_FABRICATED_MODELS"
"""Where the sets are kept (default: the repository's build/fabricated-models, gitignored)."""

LM = "acestep-5Hz-lm-0.6B-F16.gguf"
LONG_LM = "acestep-5Hz-lm-1.7B-F16.gguf"
"""The "1.7B" slot holds an LM that never ends early: it writes audio codes until its
``max_tokens`` (duration x 5 + 100), seconds of LM work to cancel in (``models.lm = "1.7B"``)."""
TURBO = "acestep-v15-turbo-Q4_0.gguf"
BASE = "acestep-v15-base-Q4_0.gguf"
TEXT_ENC = "Qwen3-Embedding-0.6B-Q4_0.gguf"
VAE = "vae-BF16.gguf"
TURBO_MODEL = TURBO[: -len(".gguf")]
BASE_MODEL = BASE[: -len(".gguf")]

# fixed by the engine
LM_VOCAB = 217_204  # qwen3-lm.h:164
TOKEN_IM_END = 151_645  # prompt.h:17
EOS = 151_643  # bpe.h:417: the text encoder's table needs this row
TEXT_VOCAB = EOS + 1
COND_WIDTH = 2048  # cond-enc.h:18-44, fsq-detok.h:32-44, fsq-tok.h:72-99
COND_FFN = 6144

# chosen here
LM_WIDTH = 64
END_CHANCE = 0.2
"""The chance that the LM ends its audio codes after each one (at its default sampling)."""
SHORT_SEEDS = (10, 15)
"""Seeds whose vocal song (caption, lyrics, bpm, key, time signature, 10 s asked) gets two
audio codes from the fabricated LM: 0.4 s of audio. The engine's sampler decides: seeds 1-24
give 4, 1, 1, 3, 0, 3, 0, 1, 0, 2, 0, 0, 7, 6, 2, 3, 1, 1, 0, 8, 0, 0, 3, 3 codes, and an LM
that ends at once leaves the song at the duration asked (a 10-s song)."""
EDIT_SEED = 20
"""A seed whose vocal song gets eight codes: 1.6 s, long enough to repaint a part of (the
node repaints at least 1 s)."""
DIT_LAYERS = 2
DIT_WIDTH, DIT_HEADS, DIT_KV_HEADS, DIT_HEAD_DIM, DIT_FFN = 2048, 2, 1, 128, 512
BPE_MERGES = 400


@dataclass(frozen=True)
class ModelSet:
    folder: Path
    version: str

    @property
    def files(self) -> dict[str, Path]:
        return {
            "lm": self.folder / LM,
            "long_lm": self.folder / LONG_LM,
            "turbo": self.folder / TURBO,
            "base": self.folder / BASE,
            "text_enc": self.folder / TEXT_ENC,
            "vae": self.folder / VAE,
        }


# ------------------------------------------------------------------------ tensors


def _gguf():
    import gguf  # a test dependency (pyproject's test extra)

    return gguf


@dataclass
class _Tensor:
    """One tensor: its shape in PyTorch order (the gguf package writes ggml's, reversed),
    its type, and its values (None: zero)."""

    name: str
    shape: tuple[int, ...]
    kind: str  # "F32" | "F16" | "BF16" | "Q4_0"
    values: np.ndarray | None = None

    def nbytes(self) -> int:
        gguf = _gguf()
        qtype = getattr(gguf.GGMLQuantizationType, self.kind)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        if self.shape[-1] % block:
            raise ValueError(f"{self.name}: {self.shape[-1]} is not a multiple of {block}")
        return math.prod(self.shape[:-1]) * (self.shape[-1] // block) * size

    def data(self) -> np.ndarray:
        if self.values is None:
            return np.zeros(self.nbytes(), np.uint8)
        values = np.asarray(self.values, np.float32).reshape(self.shape)
        if self.kind == "F32":
            return values.astype("<f4")
        if self.kind == "F16":
            return values.astype("<f2")
        if self.kind == "BF16":
            return (values.astype("<f4").view("<u4") >> 16).astype("<u2")
        raise ValueError(f"{self.name}: values are written as F32, F16 or BF16, not {self.kind}")


def _matrix(name: str, out_features: int, in_features: int) -> _Tensor:
    """A linear layer's weight (zero): Q4_0 when its rows allow, else F32."""
    kind = "Q4_0" if in_features % 32 == 0 else "F32"
    return _Tensor(name, (out_features, in_features), kind)


def _vector(name: str, n: int, values=None) -> _Tensor:
    return _Tensor(name, (n,), "F32", values)


def _qwen3_layer(prefix: str, width: int, ffn: int, heads: int, kv_heads: int, head_dim: int):
    """The tensors ``qwen3_load_layer`` reads (qwen3-enc.h:264-314)."""
    return [
        _vector(f"{prefix}.input_layernorm.weight", width),
        _vector(f"{prefix}.post_attention_layernorm.weight", width),
        _matrix(f"{prefix}.self_attn.q_proj.weight", heads * head_dim, width),
        _matrix(f"{prefix}.self_attn.k_proj.weight", kv_heads * head_dim, width),
        _matrix(f"{prefix}.self_attn.v_proj.weight", kv_heads * head_dim, width),
        _matrix(f"{prefix}.self_attn.o_proj.weight", width, heads * head_dim),
        _vector(f"{prefix}.self_attn.q_norm.weight", head_dim),
        _vector(f"{prefix}.self_attn.k_norm.weight", head_dim),
        _matrix(f"{prefix}.mlp.gate_proj.weight", ffn, width),
        _matrix(f"{prefix}.mlp.up_proj.weight", ffn, width),
        _matrix(f"{prefix}.mlp.down_proj.weight", width, ffn),
    ]


@dataclass
class _File:
    """What one GGUF file holds: its architecture, its keys, its tensors."""

    arch: str
    kv: list[tuple[str, object]]
    tensors: list[_Tensor]

    def digest(self, h) -> None:
        """Feed everything written into the hash ``h`` (zero tensors by their shape)."""
        h.update(json.dumps([self.arch, self.kv]).encode())
        for t in self.tensors:
            h.update(f"{t.name}|{t.shape}|{t.kind}|".encode())
            if t.values is not None:
                h.update(np.ascontiguousarray(t.values, np.float32).tobytes())


def _write(path: Path, spec: _File) -> None:
    """One GGUF file, streamed tensor by tensor (the big ones are never all in memory)."""
    gguf = _gguf()
    arch, kv, tensors = spec.arch, spec.kv, spec.tensors
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in kv:
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))  # type: ignore[call-overload]
    for t in tensors:
        qtype = getattr(gguf.GGMLQuantizationType, t.kind)
        writer.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes(), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in tensors:
        writer.write_tensor_data(t.data())
    writer.close()


# ------------------------------------------------------------------------ tokenizer


def _byte_symbols() -> list[str]:
    """GPT-2's byte → printable character table (bpe.h:20-60, the standard one)."""
    keep = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(0xA1, 0xAC + 1))
        + list(range(0xAE, 0xFF + 1))
    )
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


_CORPUS = """\
caption: bpm: duration: keyscale: language: timesignature: lyrics: instrumental: true
<think> </think> # Instruction # Caption # Lyric # Metas
A B C D E F G major minor # b 2 3 4 6 10 30 60 90 96 100 120 128 140 200 300 600
en de fr es it ja zh unknown
[Intro] [Verse] [Pre-Chorus] [Chorus] [Bridge] [Outro] [Instrumental]
la la la, the night is young and the lights are low
dreamy synthwave with warm pads and a steady beat, lofi piano, indie band, jazz trio
we sing along the river, under a sky of stars, and the song goes on and on
"""


def tokenizer(merges: int = BPE_MERGES) -> tuple[list[str], list[str]]:
    """A byte-level BPE: the 256 byte symbols, then ``merges`` pairs learnt from a small
    text (most frequent pair first, ties by the pair's text). Returns (tokens, merges) as
    ``tokenizer.ggml.tokens`` and ``tokenizer.ggml.merges`` hold them."""
    symbols = _byte_symbols()
    words = Counter(
        tuple(symbols[b] for b in w.encode("utf-8"))
        for w in re.findall(r" ?[A-Za-z]+| ?\d| ?[^\sA-Za-z\d]+|\s+", _CORPUS)
    )
    tokens = list(symbols)
    known = set(tokens)
    rules: list[str] = []
    while len(rules) < merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = min(pairs.items(), key=lambda item: (-item[1], item[0]))
        rules.append(f"{a} {b}")
        if a + b not in known:
            tokens.append(a + b)
            known.add(a + b)
        merged: Counter[tuple[str, ...]] = Counter()
        for word, n in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return tokens, rules


def _tokenizer_kv() -> list[tuple[str, object]]:
    tokens, merges = tokenizer()
    return [
        ("tokenizer.ggml.model", "gpt2"),
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.merges", merges),
    ]


# ------------------------------------------------------------------------ the files


def end_bias(chance: float = END_CHANCE, temperature: float = 0.85) -> float:
    """How much higher the end token's logit must be than each audio code's for the LM to
    end with ``chance`` after each code at ``temperature`` (the engine's default, 0.85)."""
    codes = 65_535  # prompt.h:21
    return temperature * math.log(chance / (1 - chance) * codes)


def lm_file(*, never_ends: bool = False) -> _File:
    """Every layer's matrices are zero, so the residual stream is the input token's
    embedding. Each row of the (tied) embedding is 1 in one dimension and 0 elsewhere, the
    end token's larger: after the final norm the hidden state is the same for every input,
    and each logit is its row's value there (times the final norm's weight): one fixed
    distribution, whatever came before. Every row stays positive, so no input flips the
    hidden state's sign. The long LM's end row is near 0 and its logits 40 times larger:
    its end token is about e^-46 as likely as a code."""
    heads, kv_heads, head_dim, ffn = 2, 1, 32, 128
    config = {
        "vocab_size": LM_VOCAB,
        "hidden_size": LM_WIDTH,
        "intermediate_size": ffn,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "num_hidden_layers": 1,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    }
    embed = np.zeros((LM_VOCAB, LM_WIDTH), np.float32)
    embed[:, 1] = 1.0
    embed[TOKEN_IM_END, 1] = 0.01 if never_ends else 1.0 + end_bias()
    scale = 40.0 if never_ends else 1.0
    norm = np.zeros(LM_WIDTH, np.float32)
    norm[1] = scale / math.sqrt(LM_WIDTH)  # rms_norm scales the lone value up by sqrt(width)
    tensors = [
        _Tensor("model.embed_tokens.weight", (LM_VOCAB, LM_WIDTH), "F16", embed),
        _vector("model.norm.weight", LM_WIDTH, norm),
    ]
    for t in _qwen3_layer("model.layers.0", LM_WIDTH, ffn, heads, kv_heads, head_dim):
        tensors.append(_Tensor(t.name, t.shape, "F32", t.values))
    return _File(
        "acestep-lm",
        [
            ("general.name", "fabricated ACE-Step LM (tests)"),
            ("acestep.config_json", json.dumps(config)),
        ]
        + _tokenizer_kv(),
        tensors,
    )


def text_encoder_file() -> _File:
    tensors = [
        _matrix("embed_tokens.weight", TEXT_VOCAB, 1024),
        _vector("norm.weight", 1024),
    ]
    for i in range(28):
        tensors += _qwen3_layer(f"layers.{i}", 1024, 3072, 16, 8, 128)
    return _File(
        "acestep-text-enc",
        [("general.name", "fabricated Qwen3-Embedding (tests)")] + _tokenizer_kv(),
        tensors,
    )


def _temb(prefix: str, width: int) -> list[_Tensor]:
    return [
        _matrix(f"{prefix}.linear_1.weight", width, 256),
        _vector(f"{prefix}.linear_1.bias", width),
        _matrix(f"{prefix}.linear_2.weight", width, width),
        _vector(f"{prefix}.linear_2.bias", width),
        _matrix(f"{prefix}.time_proj.weight", 6 * width, width),
        _vector(f"{prefix}.time_proj.bias", 6 * width),
    ]


def _cond_parts() -> list[_Tensor]:
    """The fixed-size parts every ACE-Step 1.5 DiT file carries: condition encoder
    (cond-enc.h:116-145), FSQ detokenizer (fsq-detok.h:86-102) and tokenizer
    (fsq-tok.h:86-99), null condition."""
    w, f = COND_WIDTH, COND_FFN
    out = [
        _matrix("encoder.lyric_encoder.embed_tokens.weight", w, 1024),
        _vector("encoder.lyric_encoder.embed_tokens.bias", w),
        _vector("encoder.lyric_encoder.norm.weight", w),
        _matrix("encoder.timbre_encoder.embed_tokens.weight", w, 64),
        _vector("encoder.timbre_encoder.embed_tokens.bias", w),
        _vector("encoder.timbre_encoder.norm.weight", w),
        _matrix("encoder.text_projector.weight", w, 1024),
        _Tensor("null_condition_emb", (1, 1, w), "F32"),
        _Tensor("tokenizer.quantizer.project_out.weight", (w, 6), "F32"),
        _vector("tokenizer.quantizer.project_out.bias", w),
        _matrix("detokenizer.embed_tokens.weight", w, w),
        _vector("detokenizer.embed_tokens.bias", w),
        _vector("detokenizer.norm.weight", w),
        _matrix("detokenizer.proj_out.weight", 64, w),
        _vector("detokenizer.proj_out.bias", 64),
        _Tensor("detokenizer.special_tokens", (1, 5, w), "F32"),
        _Tensor("tokenizer.audio_acoustic_proj.weight", (w, 64), "F32"),
        _vector("tokenizer.audio_acoustic_proj.bias", w),
        _matrix("tokenizer.attention_pooler.embed_tokens.weight", w, w),
        _vector("tokenizer.attention_pooler.embed_tokens.bias", w),
        _Tensor("tokenizer.attention_pooler.special_token", (1, 1, w), "F32"),
        _vector("tokenizer.attention_pooler.norm.weight", w),
        _matrix("tokenizer.quantizer.project_in.weight", 6, w),
        _vector("tokenizer.quantizer.project_in.bias", 6),
    ]
    for i in range(8):
        out += _qwen3_layer(f"encoder.lyric_encoder.layers.{i}", w, f, 16, 8, 128)
    for i in range(4):
        out += _qwen3_layer(f"encoder.timbre_encoder.layers.{i}", w, f, 16, 8, 128)
    for i in range(2):
        out += _qwen3_layer(f"detokenizer.layers.{i}", w, f, 16, 8, 128)
        out += _qwen3_layer(f"tokenizer.attention_pooler.layers.{i}", w, f, 16, 8, 128)
    return out


def dit_file(*, turbo: bool) -> _File:
    """A DiT of :data:`DIT_LAYERS` layers at the real width (dit.h:274-411), with two
    attention heads (of 128) and a narrow MLP: its steps cost little beside the VAE."""
    h, heads, kv_heads, head_dim, ffn = DIT_WIDTH, DIT_HEADS, DIT_KV_HEADS, DIT_HEAD_DIM, DIT_FFN
    tensors = _temb("decoder.time_embed", h) + _temb("decoder.time_embed_r", h)
    tensors += [
        _Tensor("decoder.proj_in.1.weight", (h, 192, 2), "F32"),
        _vector("decoder.proj_in.1.bias", h),
        _matrix("decoder.condition_embedder.weight", h, COND_WIDTH),
        _vector("decoder.condition_embedder.bias", h),
    ]
    for i in range(DIT_LAYERS):
        p = f"decoder.layers.{i}"
        tensors += [_vector(f"{p}.self_attn_norm.weight", h)]
        tensors += [
            _matrix(f"{p}.self_attn.q_proj.weight", heads * head_dim, h),
            _matrix(f"{p}.self_attn.k_proj.weight", kv_heads * head_dim, h),
            _matrix(f"{p}.self_attn.v_proj.weight", kv_heads * head_dim, h),
            _vector(f"{p}.self_attn.q_norm.weight", head_dim),
            _vector(f"{p}.self_attn.k_norm.weight", head_dim),
            _matrix(f"{p}.self_attn.o_proj.weight", h, heads * head_dim),
            _vector(f"{p}.cross_attn_norm.weight", h),
            _matrix(f"{p}.cross_attn.q_proj.weight", heads * head_dim, h),
            _matrix(f"{p}.cross_attn.k_proj.weight", kv_heads * head_dim, h),
            _matrix(f"{p}.cross_attn.v_proj.weight", kv_heads * head_dim, h),
            _vector(f"{p}.cross_attn.q_norm.weight", head_dim),
            _vector(f"{p}.cross_attn.k_norm.weight", head_dim),
            _matrix(f"{p}.cross_attn.o_proj.weight", h, heads * head_dim),
            _vector(f"{p}.mlp_norm.weight", h),
            _matrix(f"{p}.mlp.gate_proj.weight", ffn, h),
            _matrix(f"{p}.mlp.up_proj.weight", ffn, h),
            _matrix(f"{p}.mlp.down_proj.weight", h, ffn),
            _Tensor(f"{p}.scale_shift_table", (1, 6, h), "F32"),
        ]
    tensors += [
        _vector("decoder.norm_out.weight", h),
        _Tensor("decoder.scale_shift_table", (1, 2, h), "F32"),
        _Tensor("decoder.proj_out.1.weight", (h, 64, 2), "F32"),
        _vector("decoder.proj_out.1.bias", 64),
        _Tensor("silence_latent", (15000, 64), "F32"),
    ]
    tensors += _cond_parts()
    variant = "turbo" if turbo else "base"
    return _File(
        "acestep-dit",
        [
            ("general.name", f"fabricated ACE-Step 1.5 {variant} DiT (tests)"),
            ("acestep-dit.block_count", DIT_LAYERS),
            ("acestep-dit.embedding_length", h),
            ("acestep-dit.feed_forward_length", ffn),
            ("acestep-dit.attention.head_count", heads),
            ("acestep-dit.attention.head_count_kv", kv_heads),
            ("acestep-dit.attention.key_length", head_dim),
            ("acestep-dit.rope.freq_base", 1000000.0),
            ("acestep-dit.attention.layer_norm_rms_epsilon", 1e-6),
            ("acestep.in_channels", 192),
            ("acestep.audio_acoustic_hidden_dim", 64),
            ("acestep.patch_size", 2),
            ("acestep.sliding_window", 128),
            ("acestep.is_turbo", turbo),
        ],
        tensors,
    )


def _bf16(name: str, shape: tuple[int, ...]) -> _Tensor:
    return _Tensor(name, shape, "BF16")


def _weight_norm(prefix: str, out_ch: int, in_ch: int, kernel: int, *, bias: bool = True):
    out = [
        _bf16(f"{prefix}.weight_g", (out_ch, 1, 1)),
        _bf16(f"{prefix}.weight_v", (out_ch, in_ch, kernel)),
    ]
    return out + ([_bf16(f"{prefix}.bias", (out_ch,))] if bias else [])


def _snake(prefix: str, channels: int) -> list[_Tensor]:
    return [_bf16(f"{prefix}.alpha", (1, channels, 1)), _bf16(f"{prefix}.beta", (1, channels, 1))]


def _res_units(prefix: str, channels: int) -> list[_Tensor]:
    out = []
    for r in range(1, 4):
        p = f"{prefix}.res_unit{r}"
        out += _snake(f"{p}.snake1", channels) + _weight_norm(f"{p}.conv1", channels, channels, 7)
        out += _snake(f"{p}.snake2", channels) + _weight_norm(f"{p}.conv2", channels, channels, 1)
    return out


def vae_file() -> _File:
    """The decoder (vae.h:172-256) and the encoder (vae-enc.h:56-152), full shape."""
    tensors = _weight_norm("decoder.conv1", 2048, 64, 7)
    for i, (cin, cout, stride) in enumerate(
        zip((2048, 1024, 512, 256, 128), (1024, 512, 256, 128, 128), (10, 6, 4, 4, 2))
    ):
        p = f"decoder.block.{i}"
        tensors += _snake(f"{p}.snake1", cin)
        # ConvTranspose1d: weight [in, out, k], weight norm over dim 0 (in)
        tensors += _weight_norm(f"{p}.conv_t1", cin, cout, 2 * stride, bias=False)
        tensors += [_bf16(f"{p}.conv_t1.bias", (cout,))]
        tensors += _res_units(p, cout)
    tensors += _snake("decoder.snake1", 128) + _weight_norm("decoder.conv2", 2, 128, 7, bias=False)

    tensors += _weight_norm("encoder.conv1", 128, 2, 7)
    for i, (cin, cout, stride) in enumerate(
        zip((128, 128, 256, 512, 1024), (128, 256, 512, 1024, 2048), (2, 4, 4, 6, 10))
    ):
        p = f"encoder.block.{i}"
        tensors += _res_units(p, cin)
        tensors += _snake(f"{p}.snake1", cin) + _weight_norm(f"{p}.conv1", cout, cin, 2 * stride)
    tensors += _snake("encoder.snake1", 2048) + _weight_norm("encoder.conv2", 128, 2048, 3)
    return _File("acestep-vae", [("general.name", "fabricated ACE-Step VAE (tests)")], tensors)


def lora_folder(folder: Path, *, layers: tuple[int, ...] = (0, 1), rank: int = 4) -> Path:
    """A PEFT LoRA adapter (as PEFT saves one) for the fabricated DiT's attention: ``q_proj``
    (2048 in, its heads out) and ``o_proj`` (its heads in, 2048 out) of ``layers``."""
    from support.adapter_files import write_safetensors

    inner = DIT_HEADS * DIT_HEAD_DIM
    rng = np.random.default_rng(7)
    tensors = {}
    for n in layers:
        for module, fan_in, fan_out in (
            ("self_attn.q_proj", DIT_WIDTH, inner),
            ("self_attn.o_proj", inner, DIT_WIDTH),
        ):
            base = f"base_model.model.layers.{n}.{module}"
            tensors[f"{base}.lora_A.weight"] = rng.standard_normal((rank, fan_in)).astype("f4")
            tensors[f"{base}.lora_B.weight"] = np.zeros((fan_out, rank), "f4")
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "adapter_model.safetensors", tensors)
    (folder / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "base_model_name_or_path": "ACE-Step/Ace-Step1.5",
                "r": rank,
                "lora_alpha": rank,
                "target_modules": ["q_proj", "o_proj"],
            }
        )
    )
    return folder


def files() -> dict[str, _File]:
    """Every file of the set by name (built, not written)."""
    return {
        LM: lm_file(),
        LONG_LM: lm_file(never_ends=True),
        TURBO: dit_file(turbo=True),
        BASE: dit_file(turbo=False),
        TEXT_ENC: text_encoder_file(),
        VAE: vae_file(),
    }


def write_set(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, spec in files().items():
        _write(folder / name, spec)


def content_version() -> str:
    """A hash of everything the set's files hold (keys, tensor names, shapes, types and
    values), and the gguf package's version: it changes when what is written changes, and
    only then."""
    gguf = _gguf()
    digest = hashlib.sha256(getattr(gguf, "__version__", "").encode())
    for name, spec in files().items():
        digest.update(name.encode())
        spec.digest(digest)
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else ROOT / "build" / "fabricated-models"


def model_set(root: Path | None = None) -> ModelSet:
    """The set, written once per content version and kept: a finished set is a folder with
    a ``done`` mark; of the older versions only the newest is kept. The files are the same
    bytes every time they are written, and a song's audio codes the same for a seed (the
    LM's one distribution, sampled by the engine's seeded generator)."""
    from filelock import FileLock

    root = root or cache_root()
    version = content_version()
    folder = root / f"v{version}"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".lock")):
        if not (folder / "done").is_file():
            # older versions go, but the newest of them stays: a session still running
            # on it keeps its files (each set is about 1.7 GB)
            older = sorted(
                (p for p in root.iterdir() if p.is_dir() and p.name.startswith("v")),
                key=lambda p: p.stat().st_mtime,
            )
            for old in older[:-1]:
                shutil.rmtree(old, ignore_errors=True)
            staging = root / f".writing-{os.getpid()}-{time.monotonic_ns()}"
            try:
                write_set(staging)
                (staging / "done").write_text(json.dumps({"version": version}))
                if folder.exists():
                    shutil.rmtree(folder)
                staging.rename(folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return ModelSet(folder, version)
