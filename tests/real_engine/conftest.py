"""The real-engine checks: tests that run the real ace-server a developer built (named by
``CANTOR_REAL_ACE_SERVER``; see real_build.py). Skipped without it; the long ones are also
marked ``slow``:

    CANTOR_REAL_ACE_SERVER=/tmp/ace/build/ace-server ./run-tests -m slow tests/real_engine -s

Each long test prints one ``[real-engine] …`` line with its figures (docs/reliability.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def figure(what: str, count: int, of: int, extra: str = "") -> str:
    """The one line a long real-engine test prints (read into docs/reliability.md)."""
    line = f"[real-engine] {what}: {count}/{of}" + (f" — {extra}" if extra else "")
    print(line, flush=True)
    return line


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def fabricated():
    """The fabricated model set (fabricated.py), written once per content version into a
    cache kept across sessions; shared by every test of the session (read-only: the engine
    and the library only read it)."""
    from real_engine import fabricated as fab
    from real_engine.real_build import binary

    exe = binary()
    if exe is None or not exe.is_file():
        pytest.skip("CANTOR_REAL_ACE_SERVER does not name a real ace-server build")
    return fab.model_set()


@pytest.fixture
def real_engine() -> Path:
    """The real ace-server binary (its libraries beside it; RUNPATH $ORIGIN)."""
    from real_engine.real_build import binary

    exe = binary()
    if exe is None or not exe.is_file():
        pytest.skip("CANTOR_REAL_ACE_SERVER does not name a real ace-server build")
    return exe
