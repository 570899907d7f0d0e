"""The export's own ITU-R BS.1770-4 meter (cantor_desktop/export/bs1770.py, numpy alone)
against its peers: the standard's coefficient tables and its stated readings, EBU Tech 3341's
test signals, scipy's lfilter for the K-weighting, and pyloudnorm (the test extra) on real
Sketch songs, noise, tones and bursts, mono and stereo, at 44.1 and 48 kHz."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyloudnorm
import pytest
import scipy.signal
import soundfile as sf
import soxr

from cantor_desktop.export import bs1770
from cantor_desktop.export import loudness as lu

from test_export import sketch_audio

ROOT = Path(__file__).resolve().parent.parent

# ITU-R BS.1770-4 Annex 1, Tables 1 and 2 (48 kHz), as printed there
STANDARD = {
    "pre-filter": (
        (1.53512485958697, -2.69169618940638, 1.19839281085285),
        (1.0, -1.69065929318241, 0.73248077421585),
    ),
    "RLB": ((1.0, -2.0, 1.0), (1.0, -1.99004745483398, 0.99007225036621)),
}


def power_gain(freq: float, rate: int, sections) -> float:
    """|H(e^jω)|² of biquads in series at ``freq``."""
    z1 = np.exp(-2j * np.pi * freq / rate)
    h = 1.0
    for b, a in sections:
        h *= np.polyval(b[::-1], z1) / np.polyval(a[::-1], z1)
    return float(abs(h) ** 2)


def tone(steps, rate: int = 48000, freq: float = 1000.0, channels: int = 2) -> np.ndarray:
    """A phase-continuous sine whose level (dBFS, peak) changes at each (level, seconds)."""
    amp = np.concatenate([np.full(round(s * rate), 10.0 ** (level / 20.0)) for level, s in steps])
    x = amp * np.sin(2 * np.pi * freq * np.arange(len(amp)) / rate)
    return np.repeat(x[:, None], channels, axis=1)


def ideal_loudness(steps, gain: float, channels: int = 2) -> float:
    """BS.1770-4 equations (1)-(7) on ideal block powers: every 100 ms of a 1 kHz tone holds
    100 whole periods, so its mean square after K-weighting is exactly A²/2·|H(1 kHz)|² per
    channel; blocks are four such segments. Plain Python, written from the standard."""
    segments = []
    for level, seconds in steps:
        segments += [channels * (10.0 ** (level / 20.0)) ** 2 / 2 * gain] * round(seconds * 10)
    z = [sum(segments[j : j + 4]) / 4 for j in range(len(segments) - 3)]
    loud = [-0.691 + 10 * math.log10(v) for v in z]
    gated = [j for j in range(len(z)) if loud[j] > -70]
    relative = -0.691 + 10 * math.log10(sum(z[j] for j in gated) / len(gated)) - 10
    gated = [j for j in gated if loud[j] > relative]
    return -0.691 + 10 * math.log10(sum(z[j] for j in gated) / len(gated))


def reference(audio: np.ndarray, rate: int, filters: str = "K-weighting") -> float:
    """pyloudnorm's reading. Its default K-weighting is designed from the RBJ cookbook with
    round figures (and an RLB of unit pass-band gain): it reads ≈ 0.04 LU under the standard's
    coefficients; its "DeMan" filters are those coefficients fitted to an analog prototype."""
    return float(pyloudnorm.Meter(rate, filter_class=filters).integrated_loudness(audio))


# -- the K-weighting ----------------------------------------------------------------------------


def test_k_weighting_at_48_khz_is_the_standards_table_and_round_trips_through_the_prototype():
    pre, rlb = bs1770.k_weighting(48000)
    assert (pre, rlb) == (STANDARD["pre-filter"], STANDARD["RLB"])
    for b, a in STANDARD.values():
        again_b, again_a = bs1770.biquad(bs1770.prototype(b, a), 48000)
        assert np.allclose(again_b, b, rtol=0, atol=1e-14)
        assert np.allclose(again_a, a, rtol=0, atol=1e-14)
    shelf, high_pass = (bs1770.prototype(b, a) for b, a in STANDARD.values())
    # the shelf: ≈ +4 dB above ≈ 1.7 kHz, unit gain at DC; the RLB: a 38 Hz high-pass, Q ≈ ½
    assert 20 * math.log10(shelf.high) == pytest.approx(4.0, abs=1e-3)
    assert shelf.low == pytest.approx(1.0, abs=1e-12)
    assert shelf.f0 == pytest.approx(1681.97, abs=0.01) and shelf.q == pytest.approx(
        0.7072, abs=1e-4
    )
    assert high_pass.low == 0.0 and high_pass.band == 0.0
    assert high_pass.f0 == pytest.approx(38.135, abs=1e-3) and high_pass.q == pytest.approx(
        0.5003, abs=1e-4
    )


@pytest.mark.parametrize("rate", [44100, 32000, 96000])
def test_k_weighting_at_other_rates_is_the_same_analog_filter(rate):
    """pyloudnorm's "DeMan" filters discretise the same prototype (fitted numerically to
    about 12 digits); they keep the RLB numerator at [1, −2, 1], where ours keeps the
    analog pass-band gain (b scaled by the same factor at every frequency)."""
    (pre_b, pre_a), (rlb_b, rlb_a) = bs1770.k_weighting(rate)
    meter = pyloudnorm.Meter(rate, filter_class="DeMan")
    theirs = [(f.b, f.a) for f in meter._filters.values()]
    assert np.allclose(pre_b, theirs[0][0], rtol=1e-9) and np.allclose(
        pre_a, theirs[0][1], rtol=1e-9
    )
    assert np.allclose(rlb_a, theirs[1][1], rtol=1e-9)
    # their pass-band gain is 4 / (1 − a1 + a2) at each rate; ours that of 48 kHz
    scale = np.asarray(rlb_b) / theirs[1][0]
    _b, a48 = STANDARD["RLB"]
    assert np.allclose(scale, (1 - rlb_a[1] + rlb_a[2]) / (1 - a48[1] + a48[2]), rtol=1e-12)
    assert abs(20 * math.log10(scale[0])) < (0.005 if rate == 44100 else 0.05)
    # the response at 20 Hz … 20 kHz is the 48 kHz one (bilinear warping aside, < 0.01 dB
    # below 10 kHz)
    for freq in (20.0, 100.0, 1000.0, 5000.0, 10000.0):
        ours = power_gain(freq, rate, bs1770.k_weighting(rate))
        standard = power_gain(freq, 48000, STANDARD.values())
        assert 10 * math.log10(ours / standard) == pytest.approx(0.0, abs=0.01)


@pytest.mark.parametrize("rate", [48000, 44100])
def test_fft_filtering_is_scipys_lfilter_from_rest(rate):
    """The overlap-save FFT filter against the recursive filter itself (scipy.signal.lfilter,
    zero initial state, the same coefficients): several FFT blocks, a loud start, silence,
    a burst at the very end."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rate * 5, 2)) * 0.3
    x[: rate // 10] = 1.0  # full-scale DC step at the start
    x[2 * rate : 4 * rate] = 0.0
    x[-200:] = rng.standard_normal((200, 2))
    ours = bs1770.k_weighted(x, rate)
    theirs = x
    for b, a in bs1770.k_weighting(rate):
        theirs = scipy.signal.lfilter(b, a, theirs, axis=0)
    assert ours.shape == x.shape
    assert np.max(np.abs(ours - theirs)) < 1e-10
    # the K-weighted mono signal is the same filter
    assert np.allclose(bs1770.k_weighted(x[:, 0], rate)[:, 0], theirs[:, 0], atol=1e-10)


# -- the standard's and EBU's readings ---------------------------------------------------------


def test_a_997_hz_sine_at_0_dbfs_in_one_channel_reads_minus_3_01_lufs():
    """BS.1770-4 Annex 1: "a 0 dB FS 1 kHz sine wave in the left, centre or right channel
    gives −3.01 LKFS". That is the 997 Hz test tone (AES17): −0.691 + 10·log10(½·|H|²) with
    the K-filter's gain there, +0.691 dB, is −3.0103. At exactly 1000 Hz the filter gives
    +0.698 dB, hence −3.004."""
    x = np.zeros((48000 * 10, 2))
    x[:, 0] = tone([(0.0, 10.0)], freq=997.0, channels=1)[:, 0]
    gain = power_gain(997.0, 48000, STANDARD.values())
    assert 10 * math.log10(gain) == pytest.approx(0.691, abs=5e-4)
    assert bs1770.integrated_loudness(x, 48000) == pytest.approx(
        -0.691 + 10 * math.log10(0.5 * gain), abs=1e-3
    )
    assert round(bs1770.integrated_loudness(x, 48000), 2) == -3.01


@pytest.mark.parametrize("rate", [48000, 44100])
@pytest.mark.parametrize("level", [-6.0, -20.0, -40.0])
def test_a_stereo_1_khz_sine_reads_its_exact_value(rate, level):
    """Stereo, the same sine at ``level`` dBFS in both channels: every 400 ms block holds 400
    whole periods, so the reading is −0.691 + 10·log10(2·A²/2·|H(1 kHz)|²) = level − 0.691 +
    the K-filter's gain at 1 kHz (+0.6977 dB at 48 kHz): −19.9933 LUFS at −20 dBFS. |H| from
    the standard's table at 48 kHz, from pyloudnorm's "DeMan" coefficients at 44.1 kHz
    (whose RLB numerator differs by a constant: 0.004 dB)."""
    x = tone([(level, 20.0)], rate)
    if rate == 48000:
        gain = power_gain(1000.0, rate, STANDARD.values())
        tolerance = 1e-4
    else:
        meter = pyloudnorm.Meter(rate, filter_class="DeMan")
        gain = power_gain(1000.0, rate, [(f.b, f.a) for f in meter._filters.values()])
        tolerance = 0.005
    expected = level - 0.691 + 10 * math.log10(gain)
    assert bs1770.integrated_loudness(x, rate) == pytest.approx(expected, abs=tolerance)
    if level == -20.0 and rate == 48000:
        assert expected == pytest.approx(-19.9933, abs=1e-4)


EBU_3341 = {
    # EBU Tech 3341 (2016), Table 1, cases 1-5: stereo 1 kHz sines; expected −23.0 (case 2:
    # −33.0) ± 0.1 LUFS. Cases 3-5 exercise the relative gate, 4 the absolute one, 5 a
    # section whose blocks sit near the relative gate.
    1: ([(-23.0, 20.0)], -23.0),
    2: ([(-33.0, 20.0)], -33.0),
    3: ([(-36.0, 10.0), (-23.0, 60.0), (-36.0, 10.0)], -23.0),
    4: ([(-72.0, 10.0), (-36.0, 10.0), (-23.0, 60.0), (-36.0, 10.0), (-72.0, 10.0)], -23.0),
    5: ([(-26.0, 20.0), (-20.0, 20.1), (-26.0, 20.0)], -23.0),
}


@pytest.mark.parametrize("case", list(EBU_3341))
def test_ebu_tech_3341_cases_1_to_5(case):
    steps, expected = EBU_3341[case]
    x = tone(steps, 48000)
    got = bs1770.integrated_loudness(x, 48000)
    assert got == pytest.approx(expected, abs=0.1)
    # and to the last digit what the standard's equations give on the ideal block powers
    # (the blocks across a level change included: case 3 reads −23.014, not −23.000)
    assert got == pytest.approx(
        ideal_loudness(steps, power_gain(1000.0, 48000, STANDARD.values())), abs=1e-4
    )


def test_silence_and_short_audio_read_minus_infinity():
    assert bs1770.integrated_loudness(np.zeros((48000 * 5, 2)), 48000) == float("-inf")
    assert bs1770.integrated_loudness(np.full((48000 * 5, 2), 1e-5), 48000) == float("-inf")
    short = tone([(-10.0, 0.39)])
    assert bs1770.integrated_loudness(short, 48000) == float("-inf")
    assert bs1770.integrated_loudness(tone([(-10.0, 0.4)]), 48000) > -15  # one block
    assert lu.integrated_loudness(np.zeros((0, 2), np.float32), 44100) == float("-inf")
    with pytest.raises(ValueError):
        bs1770.integrated_loudness(np.zeros((48000, 6)), 48000)


def test_cancel_is_checked_while_measuring():
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bs1770.integrated_loudness(np.zeros((48000 * 20, 2)), 48000, check)
    assert len(calls) == 3


# -- against pyloudnorm on real signals ---------------------------------------------------------


def _signals():
    rng = np.random.default_rng(11)
    song = sketch_audio()  # 20 s, 48 kHz stereo
    song2 = sketch_audio(caption="dreamy synthwave", bpm=110, key="F# minor", duration=30.0, seed=3)
    white = rng.standard_normal((48000 * 12 + 1234, 2)) * 0.1  # not whole 100 ms
    pink = np.cumsum(rng.standard_normal((48000 * 12, 2)), axis=0)
    pink = scipy.signal.lfilter([1, -1], [1, -0.995], pink, axis=0)  # brown → pinkish
    pink = 0.2 * pink / np.max(np.abs(pink))
    burst = np.zeros((48000 * 10, 2))
    burst[48000 * 4 : 48000 * 4 + 24000] = rng.standard_normal((24000, 2)) * 0.3  # 0.5 s
    loud_quiet = np.concatenate(
        [rng.standard_normal((48000 * 6, 2)) * 0.3, rng.standard_normal((48000 * 6, 2)) * 0.01]
    )  # rel. gate
    return {
        "sketch song": song,
        "sketch song 2": song2,
        "sketch song mono": song[:, :1],
        "white noise": white,
        "pink noise mono": pink[:, :1],
        "pink noise": pink,
        "silence with a 0.5 s burst": burst,
        "loud then quiet noise": loud_quiet,
        "100 Hz sine -6 dBFS": tone([(-6.0, 10.0)], freq=100.0),
        "1 kHz sine -30 dBFS mono": tone([(-30.0, 10.0)], channels=1),
        "5 kHz sine -12 dBFS": tone([(-12.0, 10.0)], freq=5000.0),
        "12 kHz sine -50 dBFS": tone([(-50.0, 10.0)], freq=12000.0),
        "sine -65 dBFS (near the absolute gate)": tone([(-65.0, 10.0)], freq=440.0),
        "left only": np.concatenate([song[:, :1], np.zeros_like(song[:, :1])], axis=1),
    }


@pytest.mark.parametrize("rate", [48000, 44100])
def test_matches_pyloudnorm_on_songs_noise_tones_and_bursts(rate):
    rows = []
    for name, x in _signals().items():
        x = np.ascontiguousarray(x, dtype=np.float32)
        if rate != 48000:
            x = soxr.resample(x, 48000, rate, quality="VHQ")
        ours = lu.integrated_loudness(x, rate)
        default = reference(x, rate)
        deman = reference(x, rate, "DeMan")
        rows.append((name, x.shape[1], ours, default, deman))
        assert math.isfinite(ours), name
        assert abs(ours - default) <= 0.1, (name, ours, default)
        # with the standard's own coefficients the only differences left are the block
        # count of a length that is not whole 100 ms steps, and the RLB gain (≤ 0.004 dB)
        assert abs(ours - deman) <= 0.01, (name, ours, deman)
    print(
        "\n".join(
            f"{rate} {n:<40} {c} ch  ours {o:8.3f}  pyloudnorm {d:8.3f}  DeMan {m:8.3f}"
            for n, c, o, d, m in rows
        )
    )


# -- no scipy at run time -----------------------------------------------------------------------


def test_an_export_with_loudness_loads_no_scipy_in_the_cli_or_the_app(tmp_path):
    """A process that imports the app's window module and runs `cantor export FILE` with a
    loudness target (measure, limit, true peak, MP3 decode check) has no scipy or
    pyloudnorm module loaded at the end."""
    src = tmp_path / "song.wav"
    sf.write(str(src), sketch_audio(duration=10.0), 48000, subtype="PCM_24")
    code = (
        "import json, sys\n"
        "import cantor_desktop.ui.main\n"
        "from cantor_desktop.cli.main import main\n"
        f"code = main(['export', {str(src)!r}, '-o', {str(tmp_path / 'out')!r}, '--format',"
        " 'mp3', '--rate', '44100', '--loudness', '-14', '--no-remember'])\n"
        "print(json.dumps({'code': code, 'loaded': sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('scipy', 'pyloudnorm'))}))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={
            **__import__("os").environ,
            "CANTOR_HOME": str(tmp_path / "home"),
            "QT_QPA_PLATFORM": "offscreen",
        },
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "loaded": []}
    (mp3,) = (tmp_path / "out").glob("*.mp3")
    audio, rate = sf.read(str(mp3), dtype="float32", always_2d=True)
    assert rate == 44100 and abs(reference(audio, rate) + 14.0) <= 0.5
