"""Screenshot the Library's adapter list into docs/screenshots/adapters.png.

Run under Xvfb from the repository root:
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_adapters_shot.py

A throw-away CANTOR_HOME, a real child node with the sketch engine, the test suite's model
hub on 127.0.0.1 for the catalogue (no internet), and adapters written like the trainers
write them (tests/support/adapter_files.py): a PEFT folder, a ComfyUI file, an XL one, and
an image model's LoRA that the node refuses, saying why.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

# its throw-away CANTOR_HOME and keyring are set when it is imported (and the paths to
# the repository and the tests)
from make_screenshots import home, spin, wait  # noqa: E402


def adapters(folder: Path) -> list[str]:
    import numpy as np
    from support.adapter_files import (
        comfyui_file,
        lora_tensors,
        peft_folder,
        sd_unet_file,
        write_safetensors,
    )

    every = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
    layers = tuple(range(24))
    return [
        str(
            peft_folder(
                folder / "chinese-new-year",
                rank=16,
                alpha=32,
                layers=layers,
                modules=every,
                dtype=np.float16,
            )
        ),
        str(
            comfyui_file(
                folder / "lofi-tape.safetensors",
                rank=8,
                layers=layers,
                modules=every,
                dtype=np.float16,
            )
        ),
        str(
            write_safetensors(
                folder / "xl-choir.safetensors",
                lora_tensors(
                    "diffusion_model.",
                    size="XL",
                    rank=8,
                    layers=tuple(range(32)),
                    modules=every,
                    dtype=np.float16,
                ),
            )
        ),
        str(sd_unet_file(folder / "sdxl-watercolor.safetensors")),
    ]


def main() -> int:
    from cantor_desktop import config
    from cantor_desktop.system.net import free_port
    from support.hub import ModelHub

    from cantor_desktop.ui.tasks import close_loop_executor, new_loop

    app = QApplication(sys.argv)
    loop = new_loop(app, already_running=True)
    config.update({"node.port": free_port()})
    hub = ModelHub()
    from cantor_desktop.models import catalogue

    for entry in catalogue.builtin().files.values():  # the hub lists the whole catalogue
        hub.add(entry.name, 4096)
        hub.advertise(entry.name, size=entry.size)
    hub.__enter__()
    os.environ["HF_ENDPOINT"] = hub.base_url

    from cantor_desktop.ui.main import Shell

    shell = Shell(app)
    w = shell.window
    w.resize(1200, 760)
    w.show()
    shell.link.connection.start()
    wait(lambda: shell.link.connection.state == "idle")
    w.show_page("Library")
    lib = w.library
    wait(lambda: shell.link.adapters.loaded and len(lib.rows) > 1, 30)
    lib.add_adapters(adapters(Path(home) / "brought"))
    wait(lambda: lib.adapter_table.rowCount() == 3 and "Not added" in lib.message.text(), 60)
    spin(800)
    from both_schemes import save_both

    save_both(w, "adapters", settle=lambda: spin(150))
    fut = asyncio.ensure_future(shell.link.shutdown())
    wait(fut.done, 20)
    hub.__exit__(None, None, None)
    w.shutdown()
    close_loop_executor(loop)
    asyncio.events._set_running_loop(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
