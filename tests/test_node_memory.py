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


CYCLE_CHILD = r"""
import gc, json
from cantor_desktop.system import gc_settle
from cantor_desktop.node import memory

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

gc.disable()                     # as an idle node: no allocations, so no collection comes
frozen = gc_settle.settle()      # as the node does once it is up; then a song:
class Answer:                    # as httpx's Response and its stream: each holds the other
    pass
answer = Answer()
answer.stream = Answer()
answer.stream.response = answer
answer.body = bytearray(48 * 2**20)  # a song's audio, every page touched
answer.body[::4096] = b"x" * len(answer.body[::4096])
start = rss()
del answer                       # unreachable, but only the cyclic collector can free it
dropped = rss()
memory.give_back()
print(json.dumps({"start": start, "dropped": dropped, "after": rss(), "frozen": frozen}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_songs_buffer_held_by_a_reference_cycle_goes_back_after_the_song():
    out = subprocess.run(
        [sys.executable, "-c", CYCLE_CHILD], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    r = json.loads(out)
    assert r["frozen"] > 1000, r  # what start made is out of the collector's way
    assert r["start"] - r["dropped"] < 8, r  # dropped, but a cycle keeps it
    assert r["dropped"] - r["after"] > 40, r  # the collection after the song frees it
