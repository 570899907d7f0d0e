"""The app settles Python's garbage collector once the node's song list is read: what
start-up and the songs made is out of the collector's sight, so no later collection (during
a keystroke, a scroll, a pull) walks all of it. Run in a child process: a settle freezes
everything alive in the process, and a test worker holds other tests' objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import gc, json, sys
from PySide6.QtWidgets import QApplication
from cantor_desktop.ui.node_link import NodeLink

app = QApplication(sys.argv)
songs = [
    {
        "id": f"{i:016x}", "state": "done", "created": 1.7e9 + i,
        "request": {"caption": f"song {i}", "model": "sketch", "bpm": 90},
        "takes": [{"audio": f"/nonexistent/{i}.wav", "seed": i, "duration": 30.0}],
    }
    for i in range(3000)
]
link = NodeLink(start_child=False)
link.songs.settle_gc = sys.argv[1] == "app"
loaded = []
link.songs.loaded.connect(loaded.append)
link.songs.take(songs)
for _ in range(3):
    app.processEvents()  # the settle comes once the pages have the list
print(json.dumps({
    "listed": len(loaded[0]),
    "walked": len(gc.get_objects()),  # what a full collection walks now
    "frozen": gc.get_freeze_count(),
}))
"""


def run(kind: str, home) -> dict:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "CANTOR_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_after_the_song_list_is_read_a_collection_no_longer_walks_the_songs(tmp_path):
    app = run("app", tmp_path)  # the app's link (main() sets settle_gc)
    other = run("embedded", tmp_path)  # a link made by a test or an embedder: untouched
    assert app["listed"] == other["listed"] == 3000
    assert other["frozen"] == 0 and other["walked"] > 3000  # every song is walked
    assert app["frozen"] > 3000 and app["walked"] < 3000  # start-up's and the songs' gone
