"""No silent skips: with ``CANTOR_SKIPS=STAGE`` (CI sets it for each of its stages) a test
that skips fails the run unless ``tests/skips_allowed.txt`` allows that skip in that stage,
with its reason. A skip that hides a missing tool or a broken route would otherwise read
as a pass.

The file: one skip per line, ``STAGE  PATTERN  -- why``, where PATTERN is an fnmatch
pattern of test ids (``tests/real_engine/*``) and STAGE one of CI's stages (``main``,
``real-engine``, ``faults``) or ``*``. Blank lines and lines starting with ``#`` are notes.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

ALLOWED_FILE = Path(__file__).resolve().parents[1] / "skips_allowed.txt"
STAGE_ENV = "CANTOR_SKIPS"


@dataclass(frozen=True)
class Allowed:
    stage: str
    pattern: str
    why: str

    def covers(self, stage: str, test_id: str) -> bool:
        return self.stage in ("*", stage) and fnmatch.fnmatchcase(test_id, self.pattern)


def read_allowed(path: Path = ALLOWED_FILE) -> list[Allowed]:
    """The allow-list; ValueError naming the line that is not ``STAGE PATTERN -- why``."""
    out = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        head, sep, why = text.partition(" -- ")
        fields = head.split()
        if not sep or len(fields) != 2 or not why.strip():
            raise ValueError(f"{path.name}:{number}: write 'STAGE PATTERN -- why': {line!r}")
        out.append(Allowed(fields[0], fields[1], why.strip()))
    return out


def unexpected(skipped: list[tuple[str, str]], stage: str, allowed: list[Allowed]) -> list[str]:
    """The skips of ``skipped`` ((test id, reason)) that no entry allows in ``stage``."""
    return [
        f"{test_id}: {reason}"
        for test_id, reason in skipped
        if not any(a.covers(stage, test_id) for a in allowed)
    ]


class SkipWatch:
    """The pytest plugin: records every skip, and fails the session on one not allowed."""

    def __init__(self, stage: str):
        self.stage = stage
        self.allowed = read_allowed()
        self.skipped: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report)
            self.skipped.append((report.nodeid, str(reason)))

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: the controller sees every report and decides
        wrong = unexpected(self.skipped, self.stage, self.allowed)
        if wrong:
            session.config._cantor_skip_problems = wrong  # noqa: SLF001 - our own config
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        wrong = getattr(terminalreporter.config, "_cantor_skip_problems", None)
        if wrong:
            terminalreporter.section(f"skips not allowed in stage {self.stage!r}", red=True)
            for line in wrong:
                terminalreporter.line(line)
            terminalreporter.line(
                f"({len(wrong)} skipped; tests/skips_allowed.txt allows a skip with its reason)"
            )
        elif self.skipped:
            terminalreporter.line(
                f"{len(self.skipped)} skips, each allowed in stage {self.stage!r} "
                "by tests/skips_allowed.txt"
            )


def register(config) -> None:
    stage = os.environ.get(STAGE_ENV, "").strip()
    if stage:
        config.pluginmanager.register(SkipWatch(stage), "cantor-skip-watch")
