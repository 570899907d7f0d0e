"""Every line format the real ace-server prints, through the progress parser and the error
classifier: ``fixtures/ace_server_recorded.txt`` was recorded from the real binary
(tests/real_engine/record_lines.py); ``fixtures/ace_server_formats.txt`` holds the lines that
need real weights, written from the same source's formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantor_desktop.engine.client import join_reasons
from cantor_desktop.engine.progress import LineClassifier, ProgressParser, is_error_line

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def sections(name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in (FIXTURES / name).read_text("utf-8").splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:], [])
        elif current is not None and not line.startswith("(exit code"):
            current.append(line)
    return out


RECORDED = sections("ace_server_recorded.txt")
FORMATS = sections("ace_server_formats.txt")
ALL = {
    **{f"recorded: {k}": v for k, v in RECORDED.items()},
    **{f"formats: {k}": v for k, v in FORMATS.items()},
}

DIT = "/models/acestep-v15-turbo-Q8_0.gguf"
EXPECTED_ERRORS = {
    "recorded: unknown option (exit 1)": ["Unknown option: --bogus"],
    "recorded: no --models (exit 1)": ["[Server] ERROR: --models is required"],
    "recorded: empty models folder (exit 1)": ["[Server] ERROR: no GGUF models found in /models"],
    "recorded: trial probe on the CPU: header-only LM (exit 1)": [
        "[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found"
    ],
    "recorded: GGML_BACKEND=CUDA0 on a CPU-only build (exit 1)": [
        "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"
    ],
    "recorded: a vocal song's /lm on a full header-only set, with a file of another architecture": [
        "[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found"
    ],
    "recorded: an instrumental /synth on header-only DiT, text encoder and VAE (exit 1)": [
        f"[Load] FATAL: invalid DiT config in {DIT}",
        f"[Store] FATAL: DiT config cannot open {DIT}",
        f"[Synth-Load] FATAL: DiT metadata unavailable for {DIT}",
        "[Server] FATAL: synth load failed",
    ],
    "recorded: a /synth naming a DiT that is not there (the job fails, the engine stays), "
    "then SIGTERM": ["[Server] DiT not found: nope.gguf"],
    "recorded: a port already in use": ["[Server] FATAL: cannot bind 127.0.0.1:8080"],
    "recorded: a release build whose library is missing": [
        "/models/ace-server: error while loading shared libraries: libggml.so.0: cannot open "
        "shared object file: No such file or directory"
    ],
    "formats: a vocal song: /lm (the request dump holds the user's caption), then /synth of 30 s": [],
    "formats: a 120 s instrumental batch of two: one entry skipped, tiled decode, MP3": [],
    "formats: a song cancelled mid-diffusion": [],
}


def test_every_section_has_its_expectation():
    assert set(ALL) == set(EXPECTED_ERRORS)
    assert sum(len(lines) for lines in ALL.values()) > 200


@pytest.mark.parametrize("name", sorted(EXPECTED_ERRORS))
def test_error_lines_are_the_engines_failures_only(name):
    lines = ALL[name]
    classifier = LineClassifier()
    kinds = [classifier.classify(line) for line in lines]
    errors = [line for line, kind in zip(lines, kinds) if kind == "error"]
    assert errors == EXPECTED_ERRORS[name]
    parser = ProgressParser()
    for line in lines:  # every line goes through the parser without a complaint
        parser.feed(line, now=1.0)


def test_warnings_and_skipped_entries_are_not_failures():
    lines = [ln for lines in ALL.values() for ln in lines if "WARNING" in ln or "skipping" in ln]
    assert len(lines) >= 3  # the registry's, the DiT's, the resolver's
    classifier = LineClassifier()
    assert {classifier.classify(ln) for ln in lines} == {"warning"}
    assert not any(is_error_line(ln) for ln in lines)


def test_the_request_the_lm_prints_back_is_never_an_engine_error():
    lines = FORMATS[
        "a vocal song: /lm (the request dump holds the user's caption), then /synth of 30 s"
    ]
    start = lines.index("[LM-Phase2] N=1, CoT[0]:")
    end = next(i for i, ln in enumerate(lines) if ln.startswith("[LM-Phase2] max_tokens"))
    dump = lines[start + 1 : end]
    assert any("FATAL" in ln for ln in dump) and any("not found" in ln for ln in dump)
    classifier = LineClassifier()
    kinds = [classifier.classify(ln) for ln in lines]
    assert kinds[start + 1 : end] == ["echo"] * len(dump)
    assert kinds[end] == "info"  # max_tokens is the engine again
    parser = ProgressParser()
    events = [parser.feed(ln, now=float(i)) for i, ln in enumerate(lines)]
    assert events[start + 1 : end] == [None] * len(dump)  # "[DiT] Step 7/8" in a caption
    assert events[end].stage == "lm"


def test_a_vocal_song_goes_through_every_stage_and_a_short_one_is_decoded_in_one_piece():
    lines = FORMATS[
        "a vocal song: /lm (the request dump holds the user's caption), then /synth of 30 s"
    ]
    parser = ProgressParser()
    events = [e for i, ln in enumerate(lines) if (e := parser.feed(ln, now=float(i)))]
    stages = [e.stage for e in events]
    assert stages[0] == "lm" and "synth" in stages and "decode" in stages
    decoded = next(e for e in events if e.line.startswith("[VAE] Decoded:"))
    assert decoded.stage == "decode" and decoded.stage_fraction == 1.0
    assert not any(e.line.startswith("[Context] Decoded") for e in events)  # not the VAE
    fractions = [e.fraction for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # the LM's batch comes from the N= line before the dump: 150 of 250 codes
    lm150 = next(e for e in events if "150 total codes" in e.line)
    assert lm150.stage_fraction == pytest.approx(0.15 + 0.85 * 150 / 250)


def test_a_long_song_is_decoded_in_tiles():
    lines = FORMATS["a 120 s instrumental batch of two: one entry skipped, tiled decode, MP3"]
    parser = ProgressParser()
    events = [e for i, ln in enumerate(lines) if (e := parser.feed(ln, now=float(i)))]
    assert [e.stage for e in events if e.line.startswith("[VAE]")] == ["decode", "decode"]
    assert any(e.stage == "encode" for e in events) and events[-1].fraction == 1.0


def test_a_failure_chain_keeps_its_cause_whole_and_its_last_link():
    lines = RECORDED["an instrumental /synth on header-only DiT, text encoder and VAE (exit 1)"]
    reason = join_reasons([ln for ln in lines if is_error_line(ln)])
    assert reason == (
        f"[Load] FATAL: invalid DiT config in {DIT}; …; [Server] FATAL: synth load failed"
    )
