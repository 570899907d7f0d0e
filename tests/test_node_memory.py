"""The node gives freed heap back to the system after a song (glibc), measured in a child."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cantor_desktop.node import memory

CHILD = r"""
import json, threading
from cantor_desktop.node import memory

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

arenas = memory.limit_arenas()
start = rss()
kept = []
def work():                      # as a song's writer thread: big buffers, then freed, with
    big = []                     # the list that keeps the small ones growing between them
    for _ in range(800):
        big.append(bytearray(64 * 1024))
        kept.append(bytearray(64))
    del big
thread = threading.Thread(target=work); thread.start(); thread.join()
freed = rss()
gave = memory.give_back()
print(json.dumps({"arenas": arenas, "start": start, "freed": freed, "gave": gave,
                  "after": rss()}))
"""


@pytest.mark.skipif(memory._glibc() is None, reason="glibc's allocator only (Linux)")
def test_a_trim_returns_what_a_worker_thread_freed():
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    r = json.loads(out)
    assert r["arenas"] is True
    assert r["freed"] - r["start"] > 30, r  # freed, but still held by the allocator
    assert r["gave"] is True
    assert r["freed"] - r["after"] > 30, r  # and given back by the trim


def test_elsewhere_it_does_nothing(monkeypatch):
    memory._glibc.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert memory._glibc() is None
        assert memory.give_back() is False and memory.limit_arenas() is False
    finally:
        memory._glibc.cache_clear()
