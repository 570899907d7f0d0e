"""The package's layers, read from every module's imports (function-level ones too):
Qt only in ``ui/``; the app's window never reaches into the node's code, and the node never
into the client side (it runs headless, on another machine, without them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cantor_desktop"
QT = ("PySide6", "qasync", "shiboken6")
CLIENT_SIDE = (
    "cantor_desktop.ui",
    "cantor_desktop.cli",
    "cantor_desktop.nodeclient",
    "cantor_desktop.node_process",
)
# The bundle's self-test checks that Qt's plugins load in the frozen app, and the frozen
# app's entry point names its .desktop file before the first window: Qt's by design.
QT_OUTSIDE_UI = {"cantor_desktop.selftest", "cantor_desktop.frozen_main"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def offenders(where: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    bad = {}
    for module, names in MODULES.items():
        if module != where and not module.startswith(where + "."):
            continue
        hits = sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden))
        if hits:
            bad[module] = hits
    return bad


def test_the_import_reader_sees_relative_and_nested_imports():
    assert "cantor_desktop.nodeclient.NodeClient" in MODULES["cantor_desktop.ui.node_link"]
    assert "cantor_desktop.node_process" in MODULES["cantor_desktop.ui.node_link"]
    assert any(n.startswith("PySide6") for n in MODULES["cantor_desktop.ui.window"])


def test_qt_is_imported_only_under_ui():
    bad = {
        m: hits
        for m, hits in offenders("cantor_desktop", QT).items()
        if not m.startswith("cantor_desktop.ui") and m not in QT_OUTSIDE_UI
    }
    assert bad == {}


def test_the_app_never_imports_the_nodes_code():
    assert offenders("cantor_desktop.ui", ("cantor_desktop.node",)) == {}


@pytest.mark.parametrize(
    "side",
    [
        "cantor_desktop.node",
        "cantor_desktop.engine",
        "cantor_desktop.models",
        "cantor_desktop.sketch",
    ],
)
def test_the_node_and_what_it_runs_never_import_the_client_side(side):
    assert offenders(side, CLIENT_SIDE) == {}
