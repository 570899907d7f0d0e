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


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
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


# -- one way: no module imports, however indirectly, a module that imports it back ---------


def edges(path: Path, ours: set[str], root: Path = PACKAGE) -> set[str]:
    """The modules of ``ours`` that importing ``path``'s module runs: each one it names, at
    module level, inside functions and under ``TYPE_CHECKING`` alike (a function-level
    import only moves the circle to run time), and the packages on the way to it (their
    ``__init__`` runs first), except the importer's own packages, which are running already.
    ``from package import name`` is an import of ``package.name`` when that is a module."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                targets.add(sub if sub in ours else module)
    found: set[str] = set()
    for target in targets & ours:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            step = ".".join(parts[:i])
            own_package = step != target and (name == step or name.startswith(step + "."))
            if step != name and not own_package:
                found.add(step)
    return found & ours


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph``, one path per tangle (Tarjan's strongly connected
    components, then a shortest way round from the first member): ``[a, b, c, a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    tangles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set()
            while True:
                w = stack.pop()
                members.add(w)
                if w == v:
                    break
            if len(members) > 1:
                tangles.append(members)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for members in tangles:
        start = min(members)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first: the shortest way back to start
            v = queue.pop(0)
            for w in sorted(graph[v] & members):
                if w == start:
                    found.append([*paths[v], start])
                    queue = []
                    break
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
    return sorted(found)


OURS = set(MODULES)
GRAPH = {module_name(p): edges(p, OURS) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_circle_finder_sees_what_the_import_system_runs(tmp_path):
    pkg = tmp_path / "cantor_desktop"
    (pkg / "low").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "config.py": "def later():\n    from .export import FORMATS\n",  # function level
        "export.py": "from .low import naming\n",
        "low/__init__.py": "from . import naming, slugs, words\n",  # a package, its modules
        "low/naming.py": "from . import slugs\nfrom .. import config\n",
        "low/slugs.py": "from . import words\n",  # its own package runs already
        "low/words.py": "",
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text)

    def graph() -> dict[str, set[str]]:
        ours = {module_name(p, pkg) for p in pkg.rglob("*.py")}
        return {module_name(p, pkg): edges(p, ours, pkg) for p in pkg.rglob("*.py")}

    found = graph()
    assert found["cantor_desktop.low.slugs"] == {"cantor_desktop.low.words"}
    assert found["cantor_desktop.export"] == {"cantor_desktop.low", "cantor_desktop.low.naming"}
    assert found["cantor_desktop.config"] == {"cantor_desktop.export"}
    assert circles(found) == [
        [
            "cantor_desktop.config",
            "cantor_desktop.export",
            "cantor_desktop.low.naming",
            "cantor_desktop.config",
        ]
    ]
    (pkg / "low" / "naming.py").write_text("from . import slugs\n")
    assert circles(graph()) == []
    (pkg / "low" / "words.py").write_text("from cantor_desktop.low import naming\n")
    assert circles(graph()) == [
        [
            "cantor_desktop.low.naming",
            "cantor_desktop.low.slugs",
            "cantor_desktop.low.words",
            "cantor_desktop.low.naming",
        ]
    ]


def test_our_modules_depend_one_way():
    """No circle through our modules' imports, function-level ones included; the three the
    issue named (config → export → export.tags → node.songs → config; cli.cover →
    cli.edit_common → cli.sing_cmd → cli.cover; engine.client ↔ engine.supervisor) are
    untied: each layer imports only the ones below it."""
    assert circles(GRAPH) == []
