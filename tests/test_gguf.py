"""GGUF header reading and writing."""

from __future__ import annotations

import struct

import pytest

from cantor_desktop.models import gguf


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def test_minimal_header_matches_reference_layout(tmp_path):
    p = gguf.write_header_only(tmp_path / "lm.gguf", gguf.ARCH_LM)
    data = p.read_bytes()
    assert data[:4] == b"GGUF"
    assert struct.unpack_from("<Iqq", data, 4) == (3, 0, 1)
    expected = (
        b"GGUF"
        + struct.pack("<Iqq", 3, 0, 1)
        + _s("general.architecture")
        + struct.pack("<I", 8)
        + _s("acestep-lm")
    )
    assert data == expected
    assert gguf.read_architecture(p) == "acestep-lm"
    assert not list(tmp_path.glob(".*tmp"))


def test_extra_keys_round_trip(tmp_path):
    p = gguf.write_header_only(
        tmp_path / "d.gguf", gguf.ARCH_DIT, {"general.name": "sketch", "x.count": 7, "x.neg": -5}
    )
    assert gguf.read_metadata(p) == {
        "general.architecture": "acestep-dit",
        "general.name": "sketch",
        "x.count": 7,
        "x.neg": -5,
    }
    assert gguf.KIND_BY_ARCH[gguf.read_architecture(p)] == "dit"
    assert gguf.model_kind(p) == "dit"


def test_architecture_found_after_every_value_type(tmp_path):
    body = b""
    n = 0

    def kv(key, vtype, payload):
        nonlocal body, n
        body += _s(key) + struct.pack("<I", vtype) + payload
        n += 1

    kv("a.u8", 0, struct.pack("<B", 1))
    kv("a.i8", 1, struct.pack("<b", -1))
    kv("a.u16", 2, struct.pack("<H", 2))
    kv("a.i16", 3, struct.pack("<h", -2))
    kv("a.u32", 4, struct.pack("<I", 3))
    kv("a.i32", 5, struct.pack("<i", -3))
    kv("a.f32", 6, struct.pack("<f", 1.5))
    kv("a.bool", 7, struct.pack("<?", True))
    kv("a.str", 8, _s("hello"))
    kv("a.arr_u32", 9, struct.pack("<IQ", 4, 3) + struct.pack("<3I", 1, 2, 3))
    kv("a.arr_str", 9, struct.pack("<IQ", 8, 2) + _s("x") + _s("yz"))
    kv("a.arr_arr", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 0, 2) + b"\x01\x02")
    kv("a.u64", 10, struct.pack("<Q", 2**40))
    kv("a.i64", 11, struct.pack("<q", -(2**40)))
    kv("a.f64", 12, struct.pack("<d", 2.25))
    kv("general.architecture", 8, _s("acestep-vae"))
    p = tmp_path / "v.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<Iqq", 3, 0, n) + body + b"\0" * 64)
    assert gguf.read_architecture(p) == "acestep-vae"
    meta = gguf.read_metadata(p)
    assert meta["a.u64"] == 2**40 and meta["a.i64"] == -(2**40)
    assert meta["a.f64"] == 2.25 and meta["a.bool"] is True and meta["a.str"] == "hello"
    assert "a.arr_u32" not in meta


def test_not_a_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(gguf.GGUFError, match="not a GGUF"):
        gguf.read_architecture(p)


def test_empty_file(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"")
    with pytest.raises(gguf.GGUFError, match="not a GGUF"):
        gguf.read_architecture(p)


@pytest.mark.parametrize("cut", [6, 12, 24, 30, 40, 60])
def test_truncated_header(tmp_path, cut):
    full = gguf.header_bytes(gguf.ARCH_TEXT_ENC, {"general.name": "abc"})
    full_no_arch_first = full  # the architecture is the first key
    p = tmp_path / "t.gguf"
    p.write_bytes(full_no_arch_first[:cut])
    with pytest.raises(gguf.GGUFError, match="truncated"):
        gguf.read_architecture(p)


def test_truncated_array_is_reported(tmp_path):
    p = tmp_path / "t.gguf"
    p.write_bytes(
        b"GGUF"
        + struct.pack("<Iqq", 3, 0, 2)
        + _s("a.arr")
        + struct.pack("<IIQ", 9, 4, 1000)
        + b"\0" * 16
    )
    with pytest.raises(gguf.GGUFError, match="truncated"):
        gguf.read_architecture(p)


def test_missing_architecture(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(
        b"GGUF" + struct.pack("<Iqq", 3, 0, 1) + _s("general.name") + struct.pack("<I", 8) + _s("x")
    )
    with pytest.raises(gguf.GGUFError, match="no general.architecture"):
        gguf.read_architecture(p)


def test_missing_file(tmp_path):
    with pytest.raises(gguf.GGUFError, match="cannot read"):
        gguf.read_architecture(tmp_path / "nope.gguf")


def test_error_is_value_error():
    assert issubclass(gguf.GGUFError, ValueError)


def test_kinds():
    assert gguf.KIND_BY_ARCH == {
        "acestep-lm": "lm",
        "acestep-dit": "dit",
        "acestep-text-enc": "text-enc",
        "acestep-vae": "vae",
    }


def test_threads_writing_the_same_header_never_share_a_temp_file(tmp_path):
    # two songs planned at once on a fresh home both write the sketch model's files
    import threading

    from cantor_desktop.models import gguf

    errors = []
    folder = tmp_path / "sketch-models"
    folder.mkdir()

    def write():
        try:
            for _ in range(100):
                gguf.write_header_only(folder / "sketch-lm.gguf", gguf.ARCH_LM)
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [p.name for p in folder.iterdir()] == ["sketch-lm.gguf"]
    assert gguf.read_architecture(folder / "sketch-lm.gguf") == gguf.ARCH_LM


# -- hostile headers: linear, bounded, one kind of error ------------------------------------


def _header(*kvs: bytes) -> bytes:
    return b"GGUF" + struct.pack("<Iqq", 3, 0, len(kvs)) + b"".join(kvs)


def _arch_kv(arch: str = "acestep-dit") -> bytes:
    return _s(gguf.ARCH_KEY) + struct.pack("<I", gguf.T_STRING) + _s(arch)


def _nested(depth: int) -> bytes:
    """``a`` = an array of one array of one array … ``depth`` deep, the innermost empty."""
    return (
        _s("a")
        + struct.pack("<I", gguf.T_ARRAY)
        + struct.pack("<IQ", gguf.T_ARRAY, 1) * (depth - 1)
        + struct.pack("<IQ", gguf.T_UINT8, 0)
    )


def test_nested_arrays_are_read_up_to_the_cap_and_refused_past_it(tmp_path):
    """The reader keeps a stack of counts (5,000 deep would be a RecursionError for a
    recursive one) and refuses past MAX_DEPTH, naming it."""
    ok = tmp_path / "ok.gguf"
    ok.write_bytes(_header(_nested(gguf.MAX_DEPTH), _arch_kv()))
    assert gguf.read_architecture(ok) == "acestep-dit"
    deep = tmp_path / "deep.gguf"
    deep.write_bytes(_header(_nested(5000), _arch_kv()))
    with pytest.raises(gguf.GGUFError, match=f"nested more than {gguf.MAX_DEPTH} deep"):
        gguf.read_architecture(deep)
    with pytest.raises(gguf.GGUFError, match="nested"):
        gguf.read_metadata(deep)


def test_array_string_and_header_caps_are_named(tmp_path):
    long_array = tmp_path / "long.gguf"
    long_array.write_bytes(
        _header(
            _s("a") + struct.pack("<IIQ", gguf.T_ARRAY, gguf.T_UINT8, gguf.MAX_ARRAY + 1),
            _arch_kv(),
        )
    )
    with pytest.raises(gguf.GGUFError, match=f"at most {gguf.MAX_ARRAY}"):
        gguf.read_architecture(long_array)
    strings = tmp_path / "strings.gguf"
    strings.write_bytes(
        _header(
            _s("a") + struct.pack("<IIQ", gguf.T_ARRAY, gguf.T_STRING, gguf.MAX_STRINGS + 1),
            _arch_kv(),
        )
    )
    with pytest.raises(gguf.GGUFError, match=f"more than {gguf.MAX_STRINGS} strings"):
        gguf.read_architecture(strings)
    big = tmp_path / "big.gguf"  # a header past MAX_HEADER (sparse: no 64 MB written)
    with open(big, "wb") as f:
        f.write(_header(_s("a") + struct.pack("<IQ", gguf.T_STRING, gguf.MAX_HEADER)))
        f.truncate(gguf.MAX_HEADER + 2**20)
    with pytest.raises(gguf.GGUFError, match="larger than 64 MiB"):
        gguf.read_metadata(big)


def test_many_strings_are_skipped_in_linear_time(tmp_path):
    """A tokenizer-sized string array (the real LM's header) and one of the most strings
    allowed are both skipped; the second holds 2,097,152 strings."""
    n = gguf.MAX_STRINGS
    path = tmp_path / "vocab.gguf"
    path.write_bytes(
        _header(
            _s("tokenizer.ggml.tokens")
            + struct.pack("<IIQ", gguf.T_ARRAY, gguf.T_STRING, n)
            + _s("tk") * n,
            _arch_kv("acestep-lm"),
        )
    )
    assert gguf.read_architecture(path) == "acestep-lm"


def test_a_non_gguf_file_is_named_without_quoting_its_bytes(tmp_path):
    secret = tmp_path / "x.gguf"
    secret.write_bytes(b"hunter2 is the password")
    with pytest.raises(gguf.GGUFError) as caught:
        gguf.read_architecture(secret)
    assert "hunt" not in str(caught.value) and "does not start with GGUF" in str(caught.value)


def test_mutated_headers_give_only_gguf_errors(tmp_path):
    """500 random corruptions of a header with strings, an array and numbers: each reads
    or fails with GGUFError (never another exception)."""
    import random

    good = _header(
        _arch_kv(),
        _s("arr")
        + struct.pack("<IIQ", gguf.T_ARRAY, gguf.T_STRING, 3)
        + _s("a")
        + _s("bb")
        + _s(""),
        _nested(3),
        _s("n") + struct.pack("<II", gguf.T_UINT32, 7),
    )
    rnd = random.Random(28)
    path = tmp_path / "m.gguf"
    outcomes = {"read": 0, "refused": 0}
    for _ in range(500):
        data = bytearray(good)
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        truncated = rnd.random() < 0.3
        if truncated:
            data = data[: rnd.randrange(len(data))]
        path.write_bytes(bytes(data))
        try:
            found = gguf.read_metadata(path)
        except gguf.GGUFError:
            outcomes["refused"] += 1
            continue
        assert not truncated, "a header cut short was read as whole"
        assert isinstance(found, dict)
        outcomes["read"] += 1
    # flips in values read (they are values still); flips in lengths, types and the magic,
    # and every header cut short, refused
    assert outcomes["read"] >= 10 and outcomes["refused"] >= 300, outcomes  # 22 and 478
