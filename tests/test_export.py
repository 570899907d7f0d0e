"""Export: real Sketch renders exported to every format and rate, decoded back and checked;
loudness measured again with pyloudnorm (the test extra's reference; the export's own meter
is numpy alone, tests/test_export_loudness.py) and true peak again (oversampled); tags read
back with mutagen; the WAV acid and LIST chunks parsed by a reader of this test's own."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from cantor_desktop import config, export
from cantor_desktop.export import loudness as lu
from cantor_desktop.song.naming import render, safe_name
from cantor_desktop.sketch import render as sketch_render
from cantor_desktop.sketch.engine import song_from_request
from cantor_desktop.sketch.request import normalise

SR = 48000
_CACHE: dict = {}


def sketch_audio(
    caption="lofi piano groove",
    bpm=92,
    key="A minor",
    duration=20.0,
    seed=5,
    lyrics="[Instrumental]",
) -> np.ndarray:
    """A real Sketch render (the engine's own request → song → renderer path)."""
    args = (caption, bpm, key, duration, seed, lyrics)
    if args not in _CACHE:
        req = normalise(
            {
                "caption": caption,
                "bpm": bpm,
                "keyscale": key,
                "duration": duration,
                "lyrics": lyrics,
            }
        )
        song = song_from_request(req, seed)
        r = sketch_render.Renderer(song, 4)
        for k in range(4):
            r.step(k)
        _CACHE[args] = sketch_render.master(r.finish(), normalise=True)
    return _CACHE[args].copy()


def write_song(
    folder: Path,
    audio: np.ndarray,
    *,
    sidecar: dict | None = None,
    name="2026-11-30_1412_lofi-piano-groove_seed5",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.wav"
    sf.write(str(path), audio, SR, subtype="PCM_24")
    if sidecar is not None:
        path.with_suffix(".json").write_text(json.dumps(sidecar), "utf-8")
    return path


SIDECAR = {
    "cantor_song": 1,
    "id": "0123456789abcdef",
    "take": 2,
    "takes": 2,
    "request": {
        "caption": "lofi piano groove, rain on the window",
        "lyrics": "[Instrumental]",
        "bpm": None,
        "key": None,
        "seed": 5,
        "model": "sketch",
    },
    "lm_metadata": None,
    "seed": 5,
    "bpm": 92,
    "key": "A minor",
    "facts_from": {"bpm": "measured", "key": "measured"},
    "model": {"name": "sketch", "family": "sketch"},
    "timings": {"queued_at": 1796040000.0},
}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def riff_chunks(path: Path) -> list[tuple[bytes, bytes]]:
    """(id, body) of each top-level chunk of a RIFF/WAVE file."""
    data = path.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert struct.unpack_from("<I", data, 4)[0] == len(data) - 8
    pos, out = 12, []
    while pos + 8 <= len(data):
        cid, length = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        out.append((cid, data[pos + 8 : pos + 8 + length]))
        pos += 8 + length + (length & 1)
    assert pos == len(data)
    return out


def parse_acid(body: bytes) -> dict:
    flags, root, _q1, _q2, beats, denom, numer, tempo = struct.unpack("<IHHfIHHf", body)
    return {"flags": flags, "root": root, "beats": beats, "meter": (numer, denom), "tempo": tempo}


def parse_info(body: bytes) -> dict:
    assert body[:4] == b"INFO"
    pos, out = 4, {}
    while pos + 8 <= len(body):
        cid, length = body[pos : pos + 4].decode(), struct.unpack_from("<I", body, pos + 4)[0]
        out[cid] = body[pos + 8 : pos + 8 + length].rstrip(b"\0").decode("utf-8")
        pos += 8 + length + (length & 1)
    return out


def reference_loudness(audio: np.ndarray, rate: int) -> float:
    """pyloudnorm's BS.1770-4 reading (with the standard's coefficients: "DeMan")."""
    import pyloudnorm

    return float(pyloudnorm.Meter(rate, filter_class="DeMan").integrated_loudness(audio))


def measured(path: Path) -> tuple[np.ndarray, int, float, float]:
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return audio, rate, reference_loudness(audio, rate), lu.true_peak(audio, rate)


# -- every format × rate ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(export.FORMATS))
@pytest.mark.parametrize("rate", [48000, 44100])
def test_every_format_and_rate_decodes_with_its_tags(tmp_path, fmt, rate):
    src = write_song(tmp_path / "songs", sketch_audio(), sidecar=SIDECAR)
    before = digest(src), src.stat().st_mtime_ns, digest(src.with_suffix(".json"))
    options = export.ExportOptions(format=fmt, rate=rate)
    result = export.export_file(src, tmp_path / "out", options)

    assert result.path.parent == tmp_path / "out"
    assert result.path.name == f"lofi-piano-groove-rain-on-the_92bpm_Am_take2{options.extension}"
    assert not list((tmp_path / "out").glob("*.part"))
    audio, got_rate, _, _ = measured(result.path)
    assert got_rate == rate
    assert abs(len(audio) / rate - 20.0) < (0.08 if fmt == "mp3" else 0.001)
    info = sf.info(str(result.path))
    assert info.format == export.FORMATS[fmt][0] and info.subtype == export.FORMATS[fmt][1]
    # the content survived: same loudness as the source, resampled or not
    assert abs(reference_loudness(audio, rate) - reference_loudness(sketch_audio(), SR)) < 0.1
    # the original is untouched, byte for byte, and not moved
    assert (digest(src), src.stat().st_mtime_ns, digest(src.with_suffix(".json"))) == before

    if fmt == "flac":
        from mutagen.flac import FLAC

        tags = FLAC(str(result.path))
        assert tags["BPM"] == ["92"] and tags["KEY"] == ["Am"] and tags["INITIALKEY"] == ["Am"]
        assert tags["CANTOR_SEED"] == ["5"] and tags["CANTOR_MODEL"] == ["sketch"]
        assert "lofi piano groove" in tags["COMMENT"][0] and "seed 5" in tags["COMMENT"][0]
        assert tags["CANTOR_BPM_SOURCE"] == ["measured"]
    else:
        if fmt == "mp3":
            from mutagen.mp3 import MP3 as Kind
        elif fmt == "aiff":
            from mutagen.aiff import AIFF as Kind
        else:
            from mutagen.wave import WAVE as Kind
        tags = Kind(str(result.path)).tags
        assert tags is not None and tags.version[:2] == (2, 3)
        assert str(tags["TBPM"]) == "92" and str(tags["TKEY"]) == "Am"
        assert "seed 5" in str(tags.getall("COMM")[0])
        assert str(tags["TXXX:SEED"]) == "5" and str(tags["TXXX:MODEL"]) == "sketch"
        assert str(tags["TXXX:KEY"]) == "A minor"
    if fmt == "mp3":
        from mutagen.mp3 import MP3

        assert MP3(str(result.path)).info.bitrate == 320000
    if fmt.startswith("wav"):
        chunks = riff_chunks(result.path)
        ids = [cid for cid, _ in chunks]
        assert ids.index(b"acid") < ids.index(b"data") and ids.index(b"LIST") < ids.index(b"data")
        acid = parse_acid(dict(chunks)[b"acid"])
        assert acid["tempo"] == pytest.approx(92.0)
        assert acid["root"] == 48 + 9 and acid["flags"] & 0x02  # A, root note set
        assert acid["beats"] == round(20.0 * 92 / 60) and acid["meter"] == (4, 4)
        info = parse_info(dict(chunks)[b"LIST"])
        assert info["INAM"].startswith("lofi piano groove")
        assert "seed 5" in info["ICMT"] and "model sketch" in info["ICMT"]
        assert info["ISFT"] == "Cantor Desktop" and "A minor" in info["IKEY"]


# -- loudness ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target,peak,fmt,rate",
    [
        (-14.0, -1.0, "flac", 44100),
        (-16.0, -1.0, "wav24", 48000),
        (-9.0, -1.0, "wav32", 44100),
        (-23.0, -2.0, "aiff", 48000),
        (-14.0, -1.0, "mp3", 44100),
    ],
)
def test_loudness_targets_are_met_with_true_peaks_under_the_ceiling(
    tmp_path, target, peak, fmt, rate
):
    src = write_song(
        tmp_path,
        sketch_audio(caption="dreamy synthwave", bpm=110, key="F# minor", duration=30.0, seed=3),
    )
    options = export.ExportOptions(format=fmt, rate=rate, loudness=target, peak=peak)
    result = export.export_file(src, tmp_path / "out", options)
    _audio, got_rate, loudness, tp = measured(result.path)
    assert got_rate == rate
    assert abs(loudness - target) <= 0.5, (loudness, result)
    assert tp <= peak + 0.01, (tp, result)  # measured on the decoded file
    assert abs(result.loudness - loudness) < 0.2 and result.true_peak <= peak


def test_limiter_gain_never_lets_a_peak_through_and_eases_back():
    rate = 48000
    peaks = np.full(rate, 0.5, dtype=np.float32)
    peaks[10000] = 2.0  # one peak 12 dB over
    peaks[30000:30010] = 1.5
    g = lu.limiter_gain(peaks, 1.0, rate)
    assert np.all(peaks * g <= 1.0 + 1e-6)
    assert g[10000] == pytest.approx(0.5, abs=1e-3)
    assert g[0] == pytest.approx(1.0) and g[-1] == pytest.approx(1.0)
    assert np.max(np.abs(np.diff(g))) < 0.01  # smooth: no click
    assert lu.limiter_gain(peaks * 0.4, 1.0, rate) is None
    x = np.random.default_rng(1).random(1001).astype(np.float32)
    for width in (1, 3, 7, 101):
        slow = np.array(
            [x[max(0, i - width // 2) : i + width // 2 + 1].min() for i in range(len(x))]
        )
        assert np.array_equal(lu.moving_min(x, width), slow)


def test_true_peak_sees_between_the_samples():
    rate = 48000
    n = np.arange(rate)
    # a quarter of the sample rate at 45°: every sample is at ±0.707, the wave peaks at 1.0
    x = np.sin(2 * np.pi * (rate / 4) * n / rate + np.pi / 4).astype(np.float32)[:, None]
    assert np.max(np.abs(x)) == pytest.approx(0.7071, abs=1e-3)
    assert lu.true_peak(x, rate) == pytest.approx(0.0, abs=0.1)


def test_resampling_rejects_what_44_1_khz_cannot_hold(tmp_path):
    """soxr VHQ: a 23 kHz tone (above 44.1 kHz's Nyquist) is gone, a 1 kHz tone passes
    unchanged in level and frequency."""
    t = np.arange(SR * 2) / SR
    for freq, expect in ((23000.0, None), (1000.0, 1000.0)):
        tone = (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
        src = tmp_path / f"tone{int(freq)}.wav"
        sf.write(str(src), np.stack([tone, tone], axis=1), SR, subtype="FLOAT")
        result = export.export_file(
            src,
            tmp_path / "out",
            export.ExportOptions(format="wav32", rate=44100),
            meta=export.SongMeta(title=f"tone{int(freq)}", bpm=120, key="C major"),
        )
        out, rate = sf.read(str(result.path), dtype="float64")
        middle = out[rate // 2 : rate // 2 + rate // 2, 0]
        level = 20 * np.log10(np.sqrt(np.mean(middle**2)) + 1e-30)
        if expect is None:
            assert level < -120
        else:
            assert level == pytest.approx(20 * np.log10(0.5 / np.sqrt(2)), abs=0.01)
            spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
            assert np.fft.rfftfreq(len(middle), 1 / rate)[np.argmax(spectrum)] == pytest.approx(
                1000.0, abs=2.0
            )


# -- names, options, atomic writes ---------------------------------------------------------------


def test_patterns_make_safe_names_on_every_os():
    fields = {
        "title": '../../etc/passwd: a/b\\c 🎵🔥 *?<>|"',
        "bpm": "92",
        "key": "Fsharpm",
        "n": 1,
    }
    name = render("{title}_{bpm}bpm_{key}_take{n}", fields)
    assert "/" not in name and "\\" not in name and ":" not in name and ".." not in name
    assert not any(ch in name for ch in '*?<>|"') and "🎵" not in name and "🔥" not in name
    assert name.endswith("_92bpm_Fsharpm_take1") and not name.startswith(".")
    assert safe_name("Song #2, take #1") == "Song 2, take 1"  # no # in any file name
    assert safe_name("..") == "song" and safe_name("🎵🎵") == "song"
    assert safe_name("CON") == "_CON" and safe_name("nul.txt") == "_nul.txt"
    assert safe_name("trailing dot. ") == "trailing dot"
    assert safe_name("Café") == "Café" and safe_name("e\u0301t\u00e9") == "été"  # NFC
    assert safe_name("日本の歌") == "日本の歌"
    long = safe_name("ä" * 400)
    assert len(long.encode()) <= 150 and long == "ä" * 75
    assert safe_name("a\x00b\x01c\x7f") == "abc" and safe_name("a\tb\nc") == "a b c"
    # unknown values read as such, not as "None"
    assert render("{title}_{bpm}", {"title": "x"}) == "x_unknown"


def test_a_caption_with_slashes_colons_and_emoji_exports_under_a_safe_name(tmp_path):
    src = write_song(tmp_path, sketch_audio(duration=10.0))
    meta = export.SongMeta(caption="AC/DC: ../rock 🤘 anthem", bpm=120, key="E minor")
    result = export.export_file(
        src,
        tmp_path / "out",
        export.ExportOptions(format="flac", pattern="{caption}_{bpm}_{key}"),
        meta=meta,
    )
    assert result.path.parent == tmp_path / "out"
    assert result.path.name == "ac-dc-rock-anthem_120_Em.flac"


def test_bad_options_name_the_field():
    cases = {
        "format": dict(format="ogg"),
        "rate": dict(rate=22050),
        "loudness": dict(loudness=-2.0),
        "peak": dict(peak=3.0),
        "pattern": dict(pattern="{title}_{colour}"),
    }
    for field, kwargs in cases.items():
        with pytest.raises(export.ExportError) as err:
            export.ExportOptions(**kwargs)
        assert err.value.field == field and str(err.value).startswith(f"{field}:")
    for field, kwargs in {
        "loudness": dict(loudness="loud"),
        "rate": dict(rate="fast"),
        "peak": dict(peak="high"),
        "pattern": dict(pattern="{n:03d}"),
    }.items():
        with pytest.raises(export.ExportError) as err:
            export.ExportOptions.parse(**kwargs)
        assert err.value.field == field
    assert export.ExportOptions.parse(rate="44.1kHz", loudness="streaming").rate == 44100
    assert export.ExportOptions.parse(loudness="off").loudness is None
    assert export.ExportOptions.parse(loudness="−16").loudness == -16.0  # a real minus


def test_choices_are_remembered_in_node_toml_and_checked_there(cantor_home):
    options = export.ExportOptions(format="mp3", rate=44100, loudness=-14.0, peak=-1.5)
    config.update(options.config_changes())
    cfg = config.load()
    assert export.ExportOptions.from_config(cfg) == options
    text = (cantor_home / "node.toml").read_text()
    with pytest.raises(config.ConfigError) as err:
        config.set_from_text("export.loudness", "-50")
    assert err.value.key == "export.loudness" and "LUFS" in str(err.value)
    with pytest.raises(config.ConfigError) as err:
        config.set_from_text("export.rate", "96000")
    assert err.value.key == "export.rate"
    with pytest.raises(config.ConfigError):
        config.set_from_text("export.pattern", "{title}/{bpm}")
    assert (cantor_home / "node.toml").read_text() == text  # left as it was


def test_never_overwrites_and_a_cancel_leaves_nothing(tmp_path):
    src = write_song(tmp_path, sketch_audio(duration=30.0))
    meta = export.SongMeta(title="song", bpm=92, key="A minor")
    options = export.ExportOptions(format="flac", rate=44100, loudness=-14.0)
    first = export.export_file(src, tmp_path / "out", options, meta=meta)
    second = export.export_file(src, tmp_path / "out", options, meta=meta)
    assert first.path.name == "song_92bpm_Am_take1.flac"
    assert second.path.name == "song_92bpm_Am_take1-2.flac"
    assert digest(first.path) == digest(second.path)

    stages = []
    stop = threading.Event()

    def progress(fraction, stage):
        stages.append((fraction, stage))
        if stage == "encoding":
            stop.set()

    with pytest.raises(export.ExportCancelled):
        export.export_file(
            src, tmp_path / "out", options, meta=meta, progress=progress, cancel=stop.is_set
        )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [first.path.name, second.path.name]
    )  # no .part, no third file
    fractions = [f for f, _ in stages]
    assert fractions == sorted(fractions) and stages[0][1] == "reading"


def test_an_export_on_a_worker_thread_reports_progress_to_done(tmp_path):
    src = write_song(tmp_path, sketch_audio(duration=10.0))
    seen: list = []
    worker = threading.Thread(
        target=lambda: seen.append(
            export.export_file(
                src,
                tmp_path / "out",
                export.ExportOptions(format="wav24", loudness=-16.0),
                meta=export.SongMeta(title="t", bpm=92, key="A minor"),
                progress=lambda f, s: seen.append((f, s)),
            )
        )
    )
    worker.start()
    worker.join(60)
    assert isinstance(seen[-1], export.ExportResult) and seen[-2] == (1.0, "done")
    assert {s for item in seen[:-1] for s in [item[1]]} >= {
        "reading",
        "loudness",
        "encoding",
        "tagging",
        "done",
    }


def test_a_file_without_a_sidecar_gets_measured_tempo_and_key(tmp_path):
    src = write_song(
        tmp_path, sketch_audio(bpm=128, key="D major", seed=2, duration=30.0), name="loose"
    )
    result = export.export_file(src, tmp_path / "out", export.ExportOptions(format="flac"))
    assert result.path.name == "loose_128bpm_D_take1.flac"
    from mutagen.flac import FLAC

    tags = FLAC(str(result.path))
    assert tags["BPM"] == ["128"] and tags["CANTOR_BPM_SOURCE"] == ["measured"]


def test_bad_sources_and_outputs_are_named(tmp_path):
    options = export.ExportOptions()
    with pytest.raises(export.ExportError) as err:
        export.export_file(tmp_path / "missing.wav", tmp_path / "out", options)
    assert err.value.field == "source"
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all" * 10)
    with pytest.raises(export.ExportError) as err:
        export.export_file(junk, tmp_path / "out", options)
    assert err.value.field == "source"
    src = write_song(tmp_path, sketch_audio(duration=10.0))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(export.ExportError) as err:
        export.export_file(src, blocker, options)
    assert err.value.field == "output"
    assert not list(tmp_path.rglob("*.part"))
    assert os.listdir(tmp_path) and junk.read_bytes() == b"not audio at all" * 10
