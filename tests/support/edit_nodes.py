"""Nodes for the editing tests (no tests here): one whose ACE-Step engine is the built-in
Sketch behind ace-server's command line (a user-supplied build in node.toml), so "turbo"
and "base" songs render here after a pull from a hub on 127.0.0.1, without a download."""

from __future__ import annotations

import shlex
from pathlib import Path

from cantor_desktop.system.selfexec import self_argv


def sketch_as_acestep(home: Path, folder: Path, port: int | None = None) -> None:
    """node.toml for such a node (``default`` model: turbo; port when given)."""
    engine = folder / "ace-server"
    engine.write_text(f'#!/bin/sh\nexec {shlex.join(self_argv("sketch-server"))} "$@"\n')
    engine.chmod(0o755)
    text = (
        f'[backends]\nacestep = "cpu"\n\n[engines.acestep]\npath = "{engine}"\n\n'
        f'[models]\ndefault = "acestep-v15-turbo"\nlm = "0.6B"\n\n'
        f'[songs]\ndir = "{home / "songs"}"\nformat = "wav16"\n'
    )
    if port is not None:
        text += f"\n[node]\nport = {port}\n"
    (home / "node.toml").write_text(text)


def hub_with_turbo_and_base(hub) -> None:
    """The turbo set and the base DiT on a :class:`support.hub.ModelHub`."""
    hub.add_set("acestep-v15-turbo-Q8_0.gguf", "acestep-5Hz-lm-0.6B-Q8_0.gguf")
    hub.add("acestep-v15-base-Q8_0.gguf", size=3 * 1024 * 1024)
