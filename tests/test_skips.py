"""The allow-list of skips (tests/skips_allowed.txt, tests/support/skips.py): a skip in a CI
stage fails the run unless a line allows it there, with its reason."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.skips import ALLOWED_FILE, Allowed, read_allowed, unexpected


def test_the_allow_list_reads_and_every_entry_gives_its_reason():
    allowed = read_allowed()
    assert allowed, "the list is empty: then remove the mechanism's file, not its lines"
    assert all(a.why and a.stage in ("main", "real-engine", "faults", "*") for a in allowed)


def test_a_line_without_a_reason_is_refused_naming_it(tmp_path):
    path = tmp_path / "skips.txt"
    path.write_text("# a note\n\nmain tests/x.py::t\n")
    with pytest.raises(ValueError, match="skips.txt:3"):
        read_allowed(path)


def test_a_skip_is_allowed_only_in_its_stage_and_by_its_pattern():
    allowed = [Allowed("main", "tests/real_engine/*", "own stage")]
    skipped = [
        ("tests/real_engine/test_x.py::test_a", "no engine"),
        ("tests/test_pool.py::test_b", "redis-server is not installed"),
    ]
    assert unexpected(skipped, "main", allowed) == [
        "tests/test_pool.py::test_b: redis-server is not installed"
    ]
    assert len(unexpected(skipped, "real-engine", allowed)) == 2


def test_a_stage_fails_on_a_skip_it_does_not_allow(tmp_path):
    """Through pytest itself, on xdist workers as CI runs it."""
    test = tmp_path / "test_skipping.py"
    test.write_text("import pytest\n\ndef test_gone():\n    pytest.skip('a tool is missing')\n")
    conftest = tmp_path / "conftest.py"
    conftest.write_text(
        f"import sys\nsys.path.insert(0, {str(ALLOWED_FILE.parent)!r})\n"
        "from support.skips import register\n\n"
        "def pytest_configure(config):\n    register(config)\n"
    )
    env_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    for stage, code in (("main", 1), ("", 0)):
        done = subprocess.run(
            [*env_run, str(test)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "CANTOR_SKIPS": stage},
            timeout=120,
        )
        assert done.returncode == code, done.stdout[-600:]
        if code:
            assert "skips not allowed in stage 'main'" in done.stdout
            assert "a tool is missing" in done.stdout
