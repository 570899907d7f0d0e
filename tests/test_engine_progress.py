"""The progress parser on ace-server's own log lines (formats from the reference)."""

from __future__ import annotations

import pytest

from cantor_desktop.engine.progress import ProgressParser, is_error_line

# A vocal song as ace-server prints it: an LM job, then a synth job with the LM's array.
VOCAL_SONG = """\
[Server] Job 6bdd2739977deb73 created (LM, mode=0)
[Ace-LM] Ready: path=/m/acestep-5Hz-lm-0.6B-Q8_0.gguf, max_seq=8192, max_batch=1, fa=yes, fsm=yes
[Load] LM backend: CPU (CPU threads: 1)
[Store] Load LM: 812 ms
[LM-Phase1] Step 100, 1 active, 41.3 tok/s
[LM-Phase1] Step 200, 1 active, 42.0 tok/s
[LM-Phase2] max_tokens: 1000, CFG: 2.00, N=1, prompts=1
[LM-Phase2] Step 50, 1 active, 50 total codes, 80.0 tok/s
[LM-Phase2] Step 100, 1 active, 100 total codes, 80.0 tok/s
[LM-Phase2] Step 150, 1 active, 150 total codes, 80.0 tok/s
[LM-Phase2] Decode 1900ms
[LM-Phase2 Batch0] seed=1234, 150 codes
[Store] Unload LM (712.4 MB)
[Server] Job 6bdd2739977deb73 done (LM, 1 results)
[Server] Job 429f028b0e5431f3 created (1 requests)
[Store] Load DiT: 2210 ms
[Resolve-T] seed=42, steps=8, guidance=1.0, shift=3.0, duration=30.0s
[DiT] Step 1/8 t=1.000
[DiT] Step 2/8 t=0.955
[DiT] Step 3/8 t=0.900
[DiT] Step 4/8 t=0.833
[DiT] Step 5/8 t=0.750
[DiT] Step 6/8 t=0.643
[DiT] Step 7/8 t=0.500
[DiT] Step 8/8 t=0.300
[VAE] Tiled decode: 4 tiles (chunk=256, overlap=64, stride=192)
[VAE] Tiled decode done: 1840 ms
[MP3] Encoding 30.0s at 128 kbps
[Store] Unload DiT (2550.1 MB)
[Server] Job 429f028b0e5431f3 done (1 tracks)
""".splitlines()


def feed_all(parser: ProgressParser, lines, step: float = 1.0):
    events, now = [], 100.0
    for line in lines:
        now += step
        event = parser.feed(line, now=now)
        if event is not None:
            events.append(event)
    return events


def test_a_vocal_song_rises_monotonically_through_the_stages_to_one():
    events = feed_all(ProgressParser(), VOCAL_SONG)
    fractions = [e.fraction for e in events]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    stages = [e.stage for e in events]
    assert stages[0] == "lm" and "synth" in stages and "decode" in stages and "encode" in stages
    # stages come in order and never go back
    order = {"lm": 0, "synth": 1, "decode": 2, "encode": 3}
    assert [order[s] for s in stages] == sorted(order[s] for s in stages)
    # the LM counts codes against its announced budget: 150 of 1000 codes
    lm150 = next(e for e in events if "150 total codes" in e.line)
    assert lm150.stage_fraction == pytest.approx(0.15 + 0.85 * 0.15)
    dit4 = next(e for e in events if e.line.startswith("[DiT] Step 4/8"))
    assert dit4.stage == "synth" and dit4.stage_fraction == pytest.approx(0.5)
    assert 0.35 < dit4.fraction < 0.9
    assert events[-1].job_id == "429f028b0e5431f3"


def test_unknown_and_bookkeeping_lines_make_no_event():
    parser = ProgressParser()
    for line in (
        "[Ace-LM] Ready: path=x",
        "[Store] Load DiT: 12 ms",
        "[Store] Unload DiT (1.0 MB)",
        "[Server] Listening on 127.0.0.1:8080",
        "[LM-Phase2] Decode 900ms",
        "[Server] Cancel requested for job abc",
        "random text",
        "",
        "[DiT] Step x/y",
        "[Server] DiT not found: nope.gguf",
    ):
        assert parser.feed(line, now=1.0) is None, line


def test_the_lm_measures_codes_against_the_songs_duration_when_known():
    parser = ProgressParser()
    parser.expect_duration(60.0)  # 300 codes
    feed_all(
        parser,
        [
            "[Server] Job a created (LM, mode=0)",
            "[LM-Phase2] max_tokens: 3000, CFG: 2.00, N=2, prompts=1",
        ],
    )
    # a batch of 2 sequences: "total codes" is their sum
    event = parser.feed("[LM-Phase2] Step 150, 2 active, 300 total codes, 80.0 tok/s", now=500)
    assert event.stage_fraction == pytest.approx(0.15 + 0.85 * 150 / 300)


def test_eta_follows_the_step_rate():
    parser = ProgressParser()
    parser.feed("[Server] Job b created (1 requests)", now=0.0)
    parser.feed("[Resolve-T] seed=1, steps=50, guidance=1.0, shift=1.0, duration=30.0s", now=1.0)
    first = parser.feed("[DiT] Step 1/50 t=1.000", now=10.0)
    assert first.eta_seconds is None  # one point is no rate
    event = parser.feed("[DiT] Step 11/50 t=0.800", now=15.0)  # 0.5 s per step
    assert event.eta_seconds == pytest.approx(39 * 0.5)
    event = parser.feed("[DiT] Step 31/50 t=0.400", now=25.0)
    assert event.eta_seconds == pytest.approx(19 * 0.5)


def test_an_instrumental_song_spans_zero_to_one_and_a_new_job_resets():
    parser = ProgressParser()
    synth_only = [line for line in VOCAL_SONG[14:]]
    events = feed_all(parser, synth_only)
    assert events[0].fraction == 0.0 and events[-1].fraction == 1.0
    dit8 = next(e for e in events if e.line.startswith("[DiT] Step 8/8"))
    assert dit8.fraction == pytest.approx(0.85)
    # the next song starts again from zero
    again = feed_all(parser, synth_only[:5])
    assert again[0].fraction == 0.0 and again[-1].fraction < 0.5


def test_fraction_never_goes_back_within_a_song_even_if_steps_restart():
    parser = ProgressParser()
    events = feed_all(
        parser,
        [
            "[Server] Job c created (2 requests)",
            "[DiT] Step 7/8 t=0.5",
            "[DiT] Step 8/8 t=0.3",
            "[DiT] Step 1/8 t=1.0",
            "[DiT] Step 2/8 t=0.9",
        ],
    )
    fractions = [e.fraction for e in events]
    assert fractions == sorted(fractions)


@pytest.mark.parametrize(
    "line",
    [
        "[Server] ERROR: no GGUF models found in /x",
        "[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found",
        "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU",
        "[Server] DiT not found: nope.gguf",
        "[Server] FATAL: synth load failed",
        "[Server] FATAL: cannot bind 127.0.0.1:8080",
    ],
)
def test_error_lines_are_recognised(line):
    assert is_error_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "[DiT] Step 3/8 t=0.900",
        "[Server] Listening on 127.0.0.1:8080",
        'INFO: 127.0.0.1 - "GET /job?id=1&result=1 HTTP/1.1" 404 Not Found',
        "[Server] Job 12 done (1 tracks)",
    ],
)
def test_ordinary_lines_are_not_errors(line):
    assert not is_error_line(line)
