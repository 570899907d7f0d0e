"""Screenshot Hardware & Backends after a real song on each backend this machine can run, in
light and dark (``hardware-measured``): the CPU build and the Vulkan build on Mesa's
lavapipe, the software device named as one, each backend's speed as measured in its song.

Run under Xvfb from the repository root, with the engines .ci/real-engine.sh unpacks:
    CANTOR_REAL_ACE_SERVER=build/real-engine/ace-server \\
    CANTOR_REAL_VULKAN_ACE_SERVER=build/real-engine-vulkan/ace-server \\
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_hardware_measured.py

A throw-away CANTOR_HOME set up as the real-engine tests set it up (tests/real_engine/
real_node.py: the engine named in node.toml, the fabricated model set imported), one
10-second song through a real node on each backend (the Vulkan one pinned, as `cantor
backends --use vulkan` pins it: a software device is never chosen by itself), then the app
on that home. The Vulkan song takes minutes: lavapipe computes on the CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported (and the paths to
# the repository and the tests)
from make_screenshots import close_app, home, open_app, spin, wait  # noqa: E402


def sing_on_each_backend() -> None:
    """One song on the CPU build, one on the Vulkan build; the node records each one's speed."""
    from real_engine import fabricated
    from real_engine.real_build import binary, vulkan_binary
    from real_engine.real_node import configure, import_models, sing

    from cantor_desktop import config

    models = fabricated.model_set()
    for backend, engine in (("cpu", binary()), ("vulkan", vulkan_binary())):
        if engine is None or not engine.is_file():
            raise SystemExit(f"no {backend} engine: see this script's docstring")
        port = configure(Path(home), engine)
        import_models(models)
        if backend == "vulkan":
            config.update({"backends.acestep": "vulkan"})

        song = sing(Path(home), port, {"caption": "a quiet piano", "duration": 10, "seed": 7})
        if song["state"] != "done":
            raise SystemExit(f"the {backend} song failed: {song.get('error')}")
        print(backend, "song:", song["engine"])


def main() -> int:
    sing_on_each_backend()
    from both_schemes import save_both

    QApplication(sys.argv)
    shell, loop = open_app(node_port=False)  # on the port node.toml names
    w = shell.window
    w.show_page("Hardware & Backends")
    table = w.hardware.table

    def measured_rows() -> int:
        texts = [
            table.item(r, 2).text() if table.item(r, 2) else "" for r in range(table.rowCount())
        ]
        return sum("measured here" in t for t in texts)

    wait(lambda: measured_rows() >= 2, 60)
    spin(400)
    save_both(w, "hardware-measured", settle=lambda: spin(150))

    close_app(shell, loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
