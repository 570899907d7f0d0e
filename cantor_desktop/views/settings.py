"""Settings without Qt: every node.toml key by its label and group, what changed and whether
the registry takes it, which keys only the node's own machine may set, the default-model
choice, and the page's sentences."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import config
from ..models.catalogue import SKETCH_DISPLAY

LABELS = {
    "node.host": "Listen address",
    "node.port": "Port",
    "node.keep_loaded": "Keep model loaded",
    "backends.acestep": "ACE-Step backend",
    "engines.manifest": "Engine manifest URL",
    "engines.acestep.path": "Own ace-server executable",
    "models.default": "Default model",
    "models.lm": "Language model size",
    "songs.dir": "Songs folder",
    "songs.format": "Song format",
    "app.node_url": "Node address (remote)",
    "app.language": "Language",
    "node.allowed_hosts": "Allowed host names",
    "node.max_queue": "Most songs waiting",
    "export.format": "Format",
    "export.rate": "Sample rate",
    "export.loudness": "Loudness (LUFS or off)",
    "export.peak": "True-peak ceiling (dBTP)",
    "export.pattern": "File names",
    "export.drag": "Drag out exported files",
}
GROUPS = {
    "node": "Node",
    "backends": "Backends",
    "engines": "Engines",
    "models": "Models",
    "songs": "Songs",
    "export": "Export (this app)",
    "app": "This app",
}
"""Each table of node.toml by the title of its group on the page."""


def stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells that the file changed (None: there is none)."""
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return None


def label(key: str) -> str:
    return LABELS.get(key, key)


def group(key: str) -> str:
    table = key.split(".")[0]
    return GROUPS.get(table, table)


def tooltip(key: str, hint: str = "") -> str:
    opt = config.OPTIONS[key]
    return (hint + "\n" if hint else "") + f"{opt.help}\nnode.toml key: {key}"


def local_only_hint(key: str, remote: bool) -> str:
    """For a node that is not this home's, a key only its own machine may set says where to
    set it ("" : it can be set from here)."""
    opt = config.OPTIONS[key]
    if remote and opt.local_only and not config.is_app_key(key):
        return f"Set on the node's machine: cantor config set {key} VALUE"
    return ""


def changes(values: Mapping[str, Any], loaded: Mapping[str, Any]) -> dict[str, Any]:
    """The keys whose value differs from the file's (an optional key left empty: None)."""
    out = {}
    for key, value in values.items():
        if value != loaded.get(key):
            opt = config.OPTIONS[key]
            out[key] = None if (opt.optional and value == "") else value
    return out


def problems(changed: Mapping[str, Any]) -> dict[str, str]:
    """Each changed key the registry refuses, with its reason."""
    out = {}
    for key, value in changed.items():
        if value is None:
            continue
        try:
            config.option(key).validate(value)
        except config.ConfigError as exc:
            out[key] = str(exc)
    return out


def shown_values(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], remote: bool
) -> dict[str, Any]:
    """What the page shows: our node.toml, and for a node that is not this home's its own
    settings (only ``app.*`` stay ours)."""
    values = dict(ours)
    if remote:
        values.update({k: v for k, v in theirs.items() if k in values and not config.is_app_key(k)})
    return values


def model_choices(models: Iterable[Any], current: str) -> list[tuple[str, str]]:
    """(label, name) for the default model: the Sketch and the installed models; one set in
    node.toml that is not installed is shown as such, never silently replaced."""
    names = ["sketch"] + [
        m["name"]
        for m in models
        if isinstance(m, dict) and m.get("state") == "ready" and m.get("name") != "sketch"
    ]
    out = [(SKETCH_DISPLAY if name == "sketch" else name, name) for name in names]
    if current and current not in names:
        out.append((f"{current} (not installed)", current))
    return out


def malformed(error: object) -> str:
    return (
        f"node.toml is not valid and was left as it is — fix it in an "
        f"editor or with `cantor config`:\n{error}"
    )


def saved(remote: bool) -> str:
    return "Saved" + (" on the node" if remote else "")
