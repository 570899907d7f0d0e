"""Fault suite helpers: the one "tried / survived / lost" line every fault test prints.

`tests/faults/run.py` reads those lines and writes the table in docs/reliability.md.
The line format (also used by tests that print it themselves) is::

    [faults] WHAT: tried N / survived S / lost L — details

pytest imports this file under the module name ``conftest`` (like tests/conftest.py), so
``from conftest import free_port`` in a test module may resolve here: keep ``free_port``.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report_line(what: str, tried: int, survived: int, lost: int, extra: str = "") -> str:
    return (f"[faults] {what}: tried {tried} / survived {survived} / lost {lost}"
            f"{' — ' + extra if extra else ''}")


@dataclass
class Tally:
    """Counts one fault's trials; ``lost`` holds a short reason per trial that failed."""

    what: str
    tried: int = 0
    survived: int = 0
    lost: list[str] = field(default_factory=list)

    def ok(self) -> None:
        self.tried += 1
        self.survived += 1

    def fail(self, reason: str) -> None:
        self.tried += 1
        self.lost.append(reason)

    def line(self, extra: str = "") -> str:
        return report_line(self.what, self.tried, self.survived, len(self.lost), extra)


@pytest.fixture
def tally(capsys):
    """``t = tally("what")`` … ``t.ok()`` / ``t.fail(reason)``; the line is printed at the end
    of the test (even when it fails), outside pytest's capture."""
    made: list[Tally] = []

    def make(what: str) -> Tally:
        t = Tally(what)
        made.append(t)
        return t

    yield make
    with capsys.disabled():
        for t in made:
            print("\n" + t.line("; ".join(t.lost[:3])), flush=True)
