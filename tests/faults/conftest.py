"""Fault suite fixtures: ``tally`` (the "tried / survived / lost" line, printed at the end of
the test even when it fails) and ``node_under_test`` (a real node for a whole module). Their
parts are in tests/support/faults.py."""

from __future__ import annotations

import pytest

from support.faults import NodeUnderTest, Tally


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
            print("\n" + t.line(), flush=True)


@pytest.fixture(scope="module")
def node_under_test(tmp_path_factory):
    """A node process for a whole test module (started once: the machine has 2 cores)."""
    node = NodeUnderTest(tmp_path_factory.mktemp("node-home")).start()
    try:
        yield node
    finally:
        node.stop()
