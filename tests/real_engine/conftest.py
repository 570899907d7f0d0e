"""The real-engine checks: tests that run the real ace-server (named by
``CANTOR_REAL_ACE_SERVER``; see real_build.py), skipped without it. CI unpacks the build in
``../shared/engines/`` and runs them after the main suite (``.ci/real-engine.sh``):

    CANTOR_REAL_ACE_SERVER=build/real-engine/ace-server ./run-tests tests/real_engine -s

Whole songs run on the fabricated model set (fabricated.py, the ``fabricated`` fixture: one
set per session, cached on disk across sessions); the older checks use header-only models.
The long ones (hundreds of songs, trials) are marked ``slow``. Each test prints one
``[real-engine] …`` line with its figures (docs/reliability.md).
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
