"""Song progress read from an engine's stderr (ace-server's log lines; the sketch engine prints
the same ones). Pure: feed it lines, get :class:`ProgressEvent` objects back. No I/O, no clock
unless you let it use ``time.monotonic``.

The overall fraction covers a whole song. A song with lyrics is two engine jobs (``/lm`` then
``/synth``); an instrumental song is one. The parser lays the stages out on 0..1 accordingly:

    with lyrics:   lm 0.00-0.35 | synth 0.35-0.90 | decode 0.90-0.98 | encode 0.98-1.00
    instrumental:                synth 0.00-0.85 | decode 0.85-0.97 | encode 0.97-1.00

A synth job that follows a finished LM job continues the same song; any other new job starts
a new song (the fraction resets). Within a song the fraction never goes down.

Which lines explain a failure is decided here too (:func:`is_error_line` for one line,
:class:`LineClassifier` for a stream): ``FATAL``/``ERROR`` lines and things ``not found``, but
not warnings, not ``ERROR … skipping`` (the engine goes on), and never the YAML dump of the
request the LM prints after ``[LM-Phase2] N=…, CoT[0]:`` — the user's caption can say
"ERROR" or "not found" and is not the engine speaking. The line formats are the real
binary's: ``tests/fixtures/ace_server_recorded.txt`` (recorded from it) and
``ace_server_formats.txt`` (the lines that need weights) are fed through here by the tests.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

STAGES = ("lm", "synth", "decode", "encode")

_BANDS_VOCAL = {
    "lm": (0.0, 0.35),
    "synth": (0.35, 0.90),
    "decode": (0.90, 0.98),
    "encode": (0.98, 1.0),
}
_BANDS_INSTRUMENTAL = {
    "lm": (0.0, 0.0),
    "synth": (0.0, 0.85),
    "decode": (0.85, 0.97),
    "encode": (0.97, 1.0),
}

# Share of the LM stage spent in phase 1 (chain of thought: metadata and caption); phase 2
# writes the audio codes, 5 per second of audio.
_LM_PHASE1_SHARE = 0.15
_LM_PHASE1_TYPICAL_TOKENS = 800
CODES_PER_SECOND = 5

_JOB_CREATED = re.compile(r"^\[Server\] Job (\S+) created \((LM)?")
_JOB_DONE = re.compile(r"^\[Server\] Job (\S+) done \((LM)?")
_LM1_STEP = re.compile(r"^\[LM-Phase1\] Step (\d+)")
_LM2_MAX = re.compile(r"^\[LM-Phase2\] max_tokens:\s*(\d+)(?:.*?\bN=(\d+))?")
_LM2_DUMP = re.compile(r"^\[LM-Phase2\] N=(\d+), CoT\[0\]:")
_LM2_STEP = re.compile(r"^\[LM-Phase2\] Step (\d+), (\d+) active, (\d+) total codes")
_RESOLVE_T = re.compile(r"^\[Resolve-T\] .*?\bsteps=(\d+).*?\bduration=([\d.]+)s")
_DIT_STEP = re.compile(r"^\[DiT\] Step (\d+)/(\d+)")
_VAE_START = re.compile(r"^\[VAE\] Tiled decode: (\d+) tiles")
_VAE_DONE = re.compile(r"^\[VAE\] Tiled decode done")
_VAE_DECODED = re.compile(r"^\[VAE\] Decoded:")  # a song up to ~41 s: one piece, no tiles
_MP3 = re.compile(r"^\[MP3\] Encoding")


_FATAL_OR_ERROR = re.compile(r"\b(FATAL|ERROR)\b")
_WARNING = re.compile(r"\bWARNING\b")
_SKIPPING = re.compile(r"\bERROR\b.*\bskipping\b")
_LOADER_ERRORS = (
    "error while loading shared libraries",
    "ggml_cuda_init: failed",
    "failed to initialize",
    "Unknown option:",
)
_DUMP_MAX_LINES = 400  # a dump never runs longer than this (the caption is capped)


def is_error_line(line: str) -> bool:
    """A line that can explain a failure: it says ERROR or FATAL, or that something was
    ``not found`` (ace-server prints no "job failed" line; the reason is such a line), or it
    is the loader's or a GPU runtime's complaint. Warnings (``[DiT] WARNING: …
    null_condition_emb not found. Disabling CFG.``) and ``ERROR … skipping`` are not: the
    engine carries on after them."""
    if _WARNING.search(line) or _SKIPPING.search(line):
        return False
    return bool(
        _FATAL_OR_ERROR.search(line)
        or "not found" in line
        or any(text in line for text in _LOADER_ERRORS)
    )


def is_fatal_line(line: str) -> bool:
    """An error line after which the engine gives up on the job (or the process)."""
    return is_error_line(line) and "FATAL" in line


class LineClassifier:
    """Sorts one engine's stderr, line by line, into ``error``, ``warning``, ``echo`` (the
    request the LM prints back) and ``info``. One instance per engine process: the echo
    state spans lines."""

    def __init__(self) -> None:
        self._echo_left = 0

    def classify(self, line: str) -> str:
        line = line.rstrip("\r\n")
        if self._echo_left:
            if _LM2_MAX.match(line):
                self._echo_left = 0  # the dump is over; this line is the engine's
            else:
                self._echo_left -= 1
                return "echo"
        if _LM2_DUMP.match(line):
            self._echo_left = _DUMP_MAX_LINES
            return "info"
        if is_error_line(line):
            return "error"
        if _WARNING.search(line) or _SKIPPING.search(line):
            return "warning"
        return "info"

    @property
    def in_echo(self) -> bool:
        return self._echo_left > 0


@dataclass(frozen=True)
class ProgressEvent:
    stage: str  # "lm" | "synth" | "decode" | "encode"
    fraction: float  # 0..1 for the whole song, never decreasing within a song
    stage_fraction: float  # 0..1 within the stage
    eta_seconds: float | None  # time left for the song as far as the log tells, or None
    line: str  # the log line that caused the event
    job_id: str | None = None  # the engine job the line belongs to, when known


class ProgressParser:
    """Turns engine log lines into progress events; one instance per engine process."""

    def __init__(self, *, clock=time.monotonic):
        self._clock = clock
        self._lines = LineClassifier()
        self._bands = _BANDS_INSTRUMENTAL
        self._job_id: str | None = None
        self._job_is_lm = False
        self._last_done_was_lm = False
        self._fraction = 0.0
        self._stage = "synth"
        self._stage_fraction = 0.0
        self._expected_seconds: float | None = None
        self._lm_budget: int | None = None
        self._lm_batch = 1
        self._rate_start: tuple[float, float] | None = None  # (time, units) of the stage
        self._rate_stage: str | None = None

    def expect_duration(self, seconds: float | None) -> None:
        """The song's duration when known in advance: the LM's code count is measured
        against ``seconds × 5``; otherwise against the ``max_tokens`` budget it announces."""
        self._expected_seconds = seconds

    @property
    def fraction(self) -> float:
        return self._fraction

    def feed(self, line: str, now: float | None = None) -> ProgressEvent | None:
        """One stderr line (with or without its newline) → an event, or None for a line that
        says nothing about progress."""
        line = line.rstrip("\r\n")
        now = self._clock() if now is None else now
        if self._lines.classify(line) == "echo":
            return None  # the request the LM prints back: the user's words

        found = _JOB_CREATED.match(line)
        if found:
            is_lm = bool(found.group(2))
            continues_song = not is_lm and self._last_done_was_lm
            self._job_id = found.group(1)
            self._job_is_lm = is_lm
            self._last_done_was_lm = False
            self._lm_budget = None
            self._lm_batch = 1
            self._rate_start = None
            if is_lm:
                self._bands = _BANDS_VOCAL
                return self._emit("lm", 0.0, line, now, reset=True)
            if continues_song:
                return self._emit("synth", 0.0, line, now)
            self._bands = _BANDS_INSTRUMENTAL
            return self._emit("synth", 0.0, line, now, reset=True)

        found = _JOB_DONE.match(line)
        if found:
            if found.group(2):  # LM job done: the LM stage is complete
                self._last_done_was_lm = True
                return self._emit("lm", 1.0, line, now)
            self._last_done_was_lm = False
            stage = self._stage if self._stage in ("decode", "encode") else "synth"
            return self._emit(stage, 1.0, line, now, whole=True)

        found = _LM1_STEP.match(line)
        if found:
            step = int(found.group(1))
            part = min(step / _LM_PHASE1_TYPICAL_TOKENS, 1.0) * _LM_PHASE1_SHARE
            return self._emit("lm", part, line, now, units=None)

        found = _LM2_DUMP.match(line)
        if found:
            # the LM's batch; the request dump follows (no progress in it)
            self._lm_batch = max(int(found.group(1)), 1)
            return None

        found = _LM2_MAX.match(line)
        if found:
            self._lm_budget = int(found.group(1))
            if found.group(2):
                self._lm_batch = max(int(found.group(2)), 1)
            self._rate_start = None
            return self._emit("lm", _LM_PHASE1_SHARE, line, now)

        found = _LM2_STEP.match(line)
        if found:
            codes = int(found.group(3)) / self._lm_batch
            if self._expected_seconds:
                budget = self._expected_seconds * CODES_PER_SECOND
            else:
                budget = float(self._lm_budget or 0)
            if budget <= 0:
                return self._emit("lm", _LM_PHASE1_SHARE, line, now)
            part = min(codes / budget, 1.0)
            return self._emit(
                "lm",
                _LM_PHASE1_SHARE + (1 - _LM_PHASE1_SHARE) * part,
                line,
                now,
                units=(codes, budget),
            )

        found = _RESOLVE_T.match(line)
        if found:
            return self._emit("synth", 0.0, line, now)

        found = _DIT_STEP.match(line)
        if found:
            step, total = int(found.group(1)), int(found.group(2))
            if total <= 0:
                return None
            return self._emit(
                "synth", min(step / total, 1.0), line, now, units=(float(step), float(total))
            )

        found = _VAE_START.match(line)
        if found:
            return self._emit("decode", 0.0, line, now)
        if _VAE_DONE.match(line) or _VAE_DECODED.match(line):
            return self._emit("decode", 1.0, line, now)
        if _MP3.match(line):
            return self._emit("encode", 0.0, line, now)
        return None

    # -- internals -----------------------------------------------------------------------------

    def _emit(
        self,
        stage: str,
        stage_fraction: float,
        line: str,
        now: float,
        *,
        reset: bool = False,
        whole: bool = False,
        units: tuple[float, float] | None = None,
    ) -> ProgressEvent:
        if reset:
            self._fraction = 0.0
        lo, hi = self._bands[stage]
        overall = 1.0 if whole else lo + (hi - lo) * stage_fraction
        self._fraction = min(max(self._fraction, overall), 1.0)
        if stage != self._stage:
            self._rate_start = None
        self._stage = stage
        self._stage_fraction = stage_fraction
        eta = self._eta(stage, units, now) if not whole else 0.0
        return ProgressEvent(
            stage=stage,
            fraction=self._fraction,
            stage_fraction=max(0.0, min(stage_fraction, 1.0)),
            eta_seconds=eta,
            line=line,
            job_id=self._job_id,
        )

    def _eta(self, stage: str, units: tuple[float, float] | None, now: float) -> float | None:
        """Time left in this stage from the rate of its counter (DiT steps, LM codes)."""
        if units is None:
            return None
        done, total = units
        if self._rate_start is None or self._rate_stage != stage or done < self._rate_start[1]:
            self._rate_start = (now, done)
            self._rate_stage = stage
            return None
        t0, d0 = self._rate_start
        if done <= d0 or now <= t0:
            return None
        per_unit = (now - t0) / (done - d0)
        return max(total - done, 0.0) * per_unit
