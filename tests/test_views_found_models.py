"""The "Models on this machine" dialog's words and choices, without Qt
(cantor_desktop/views/found_models.py)."""

from __future__ import annotations

from cantor_desktop.views import found_models as vm
from cantor_desktop.views.messages import DANGER, NEWS

FOUND = [
    {
        "path": "/c/blobs/ab",
        "shown": "/c/snap/vae-BF16.gguf",
        "name": "vae-BF16.gguf",
        "where": "Hugging Face cache",
        "size": 2 * 1024**2,
        "state": "in library",
        "note": "x",
    },
    {
        "path": "/m/acestep-v15-turbo-Q8_0.gguf",
        "shown": "/m/acestep-v15-turbo-Q8_0.gguf",
        "name": "acestep-v15-turbo-Q8_0.gguf",
        "where": "a folder you named",
        "size": 3 * 1024**3,
        "state": "new",
        "note": "",
    },
    {
        "path": "/m/Qwen3-Embedding-0.6B-Q8_0.gguf",
        "shown": "/m/Qwen3-Embedding-0.6B-Q8_0.gguf",
        "name": "Qwen3-Embedding-0.6B-Q8_0.gguf",
        "where": "a folder you named",
        "size": 5,
        "state": "wrong size",
        "note": "5 bytes; the catalogue's has 600",
    },
]


def test_rows_put_what_can_be_adopted_first_and_say_why_not_for_the_rest():
    rows = vm.rows(FOUND)
    assert [r.pickable for r in rows] == [True, False, False]
    assert rows[0].name == "acestep-v15-turbo-Q8_0.gguf" and rows[0].size == "3.0 GiB"
    assert rows[0].path == "/m/acestep-v15-turbo-Q8_0.gguf"
    states = {r.name: r.state for r in rows}
    assert states["vae-BF16.gguf"] == "Already in the library"
    assert states["Qwen3-Embedding-0.6B-Q8_0.gguf"] == "Not the catalogue's file"
    paths = {r.name: r.path for r in rows}  # what adopt is sent: the path the tool shows
    assert paths["vae-BF16.gguf"] == "/c/snap/vae-BF16.gguf"


def test_the_summary_says_what_picking_spares():
    assert "No ACE-Step model files were found" in vm.summary([], [])
    assert vm.summary(FOUND, []) == "3 file(s) found; none picked."
    line = vm.summary(FOUND, ["/m/acestep-v15-turbo-Q8_0.gguf"])
    assert line.startswith("1 file(s) picked: 3.0 GiB you need not download")


def test_the_outcome_names_each_refusal_and_the_space_saved():
    good = {"name": "a.gguf", "how": "linked", "saved": 1024**3, "source": "/a"}
    bad = {
        "name": "b.gguf",
        "how": "refused",
        "saved": 0,
        "source": "/b",
        "note": "/b has other bytes than b.gguf",
    }
    far = {
        "name": "c.gguf",
        "how": "refused",
        "saved": 0,
        "source": "/d/c.gguf",
        "note": "cannot be linked into the library (another drive); copying it takes 1 GiB",
    }
    ok = vm.adopted([good])
    assert ok == vm.Message("Adopted 1 of 1 file(s), 1.0 GiB of disk space saved.", NEWS)
    said = vm.adopted([good, bad, far])
    assert said.tone == DANGER and "b.gguf: /b has other bytes than b.gguf" in said.text
    assert vm.may_copy([good, bad, far]) == ["/d/c.gguf"]
