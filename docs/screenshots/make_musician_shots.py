"""Screenshot what musicians asked other ACE-Step tools for, in light and dark:
Compose with a style applied (``compose-style``), the Library's "Models on this machine"
dialog (``library-found``) and Songs comparing two takes, a region looped, levels matched
(``songs-ab``).

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_musician_shots.py

A throw-away CANTOR_HOME, a real child node with the sketch engine, a Hugging Face cache in
a throw-away HF_HOME laid out as huggingface_hub lays it out (blobs named by their sha256,
snapshot entries linking to them) holding header-only GGUF files under the catalogue's
names, two real Sketch songs and a style saved from one of them with a reference sound.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported (and the paths to
# the repository and the tests)
from make_screenshots import close_app, home, open_app, spin, wait  # noqa: E402

CACHE_FILES = {
    "acestep-v15-turbo-Q8_0.gguf": "acestep-dit",
    "vae-BF16.gguf": "acestep-vae",
    "Qwen3-Embedding-0.6B-Q8_0.gguf": "acestep-text-enc",
}


def hugging_face_cache(root: Path) -> None:
    """The catalogue's repository in a Hugging Face cache under ``root`` (HF_HOME)."""
    from cantor_desktop.models import catalogue, gguf

    repo = root / "hub" / ("models--" + catalogue.REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / ("2" * 40)
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name, arch in CACHE_FILES.items():
        scratch = root / name
        data = gguf.write_header_only(scratch, arch).read_bytes()
        scratch.unlink()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)


def main() -> int:
    from support.ui import make_wav

    hf_home = Path(tempfile.mkdtemp(prefix="cantor-shots-hf-"))
    hugging_face_cache(hf_home)
    os.environ["HF_HOME"] = str(hf_home)
    QApplication(sys.argv)
    from both_schemes import save_both

    shell, loop = open_app()
    w, link = shell.window, shell.link

    # two takes of a song, and a style saved from it with a reference sound
    client = link.connection.client
    sent = asyncio.ensure_future(client.upload(make_wav(Path(home) / "voice.wav", 6.0)))
    wait(sent.done, 30)
    sound = sent.result()
    made = []
    link.songs.queue(
        "shots",
        {
            "caption": "dreamy synthwave, warm pads, gated drums",
            "lyrics": "[Instrumental]",
            "bpm": 96,
            "key": "A minor",
            "duration": 30,
            "batch": 2,
            "model": "sketch",
            "reference": {"upload": sound["id"]},
        },
        on_done=made.append,
    )
    wait(lambda: made and link.songs.get(made[0].id).state == "done", 90)
    song = link.songs.get(made[0].id)
    link.styles.save("Night drive", {"from": {"song": song.id, "take": 1}, "replace": True})
    wait(lambda: link.styles.get("Night drive") is not None, 30)

    # Compose: the style chosen, the musician's own lyrics kept
    w.show_page("Compose")
    compose = w.compose
    compose.caption.setPlainText("")
    compose.lyrics.setPlainText("[Verse]\nneon on the wet road\nwe drive until the morning")
    picker = compose.style_picker
    picker.choice.setCurrentIndex(picker.choice.findData("Night drive"))
    picker.choice.activated.emit(picker.choice.currentIndex())
    spin(400)
    save_both(w, "compose-style", settle=lambda: spin(150))

    # Library: the models another tool downloaded
    w.show_page("Library")
    dialog = w.library.find_elsewhere()
    wait(lambda: dialog.table.rowCount() == len(CACHE_FILES), 30)
    spin(300)
    save_both(dialog, "library-found", settle=lambda: spin(150))
    dialog.close()

    # Songs: take 2 selected after take 1 was heard, a region looped, levels matched
    w.show_page("Songs")
    songs = w.songs
    songs.select(song.id, 2)
    spin(300)
    songs.editor.select(8.0, 16.0)
    songs.loop.setChecked(True)
    spin(600)
    save_both(w, "songs-ab", settle=lambda: spin(150))

    close_app(shell, loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
