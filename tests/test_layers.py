"""The package's layers, read from every module's imports (function-level ones too):
Qt only in ``ui/`` (never in the pages' view-models, ``views/``); the rooms of the package (its folders and root modules) in layers, each
importing only rooms of the layers below it; the app's window never reaching into the
node's code, the installer or an engine (it talks to the node), and the node never into the
client side (it runs headless, on another machine, without them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cantor_desktop"
QT = ("PySide6", "qasync", "shiboken6")
CLIENT_SIDE = (
    "cantor_desktop.ui",
    "cantor_desktop.cli",
    "cantor_desktop.client.nodeclient",
    "cantor_desktop.client.node_process",
)
# The bundle's self-test checks that Qt's plugins load in the frozen app, and the frozen
# app's entry point names its .desktop file before the first window: Qt's by design.
QT_OUTSIDE_UI = {"cantor_desktop.bundle.selftest", "cantor_desktop.bundle.frozen_main"}


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
    connection = MODULES["cantor_desktop.ui.services.connection"]
    assert "cantor_desktop.client.nodeclient.NodeClient" in connection
    assert "cantor_desktop.client.node_process" in connection
    assert any(n.startswith("PySide6") for n in MODULES["cantor_desktop.ui.window"])


def test_qt_is_imported_only_under_ui():
    bad = {
        m: hits
        for m, hits in offenders("cantor_desktop", QT).items()
        if not m.startswith("cantor_desktop.ui") and m not in QT_OUTSIDE_UI
    }
    assert bad == {}


def test_the_view_models_never_import_qt():
    """``views/`` is what the pages show and allow, read and tested without a window."""
    assert offenders("cantor_desktop.views", QT) == {}


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
    """No circle through our modules' imports, function-level ones included: each layer
    imports only the ones below it."""
    assert circles(GRAPH) == []


# -- the rooms: each imports only the rooms of the layers below its own -----------------------

LAYERS: list[set[str]] = [
    {"errors", "units", "files"},  # plain helpers
    {"system", "song"},  # the operating system; a song, its request and its rules
    {"auth", "export", "pool"},  # tokens and proofs; exports for a DAW; a pool's Redis
    {"config"},  # node.toml: the one settings registry
    {"fetch"},  # the one downloader
    {"models"},  # model files: catalogue, library, pulls, adapters
    {"sketch", "engine"},  # the built-in engine; ace-server's client and supervisor
    {"install"},  # engine builds: manifest, backends, trial loads
    {"client", "node"},  # talking to a node; the node itself
    {"views"},  # what the app's pages show and allow, without Qt
    {"cli", "ui"},  # the command line; the app
    {"bundle", "__main__"},  # the entry points
]
PACKAGE_ITSELF = "(package)"  # ``from cantor_desktop import __version__``
NEVER = {
    "ui": {"node", "install", "engine", "fetch", "sketch"},  # the app asks the node
    "views": {"node", "install", "engine", "fetch", "sketch"},  # the app's, the same way
}
"""Rooms a room may not import though their layer is lower: the app drives a node (its own
or another machine's) through the node's API, never by running the node's parts itself; its
pages' view-models neither."""


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE_ITSELF


def layer_of(name: str) -> int:
    for i, rooms in enumerate(LAYERS):
        if name in rooms:
            return i
    raise AssertionError(f"room {name!r} is in no layer of tests/test_layers.py")


def room_edges() -> dict[tuple[str, str], list[str]]:
    """(importing room, imported room) → the module imports that make the edge."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, names in MODULES.items():
        for name in names:
            target = name
            while target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            if target not in MODULES or room(target) == room(module):
                continue
            found.setdefault((room(module), room(target)), []).append(f"{module} → {name}")
    return found


def test_every_room_is_in_a_layer():
    rooms = {room(m) for m in MODULES} - {PACKAGE_ITSELF}
    for name in sorted(rooms):
        layer_of(name)
    assert rooms == set().union(*LAYERS), "a layer names a room that is not there"


def test_each_room_imports_only_rooms_of_lower_layers():
    wrong = {
        f"{a} → {b}": imports[:3]
        for (a, b), imports in sorted(room_edges().items())
        if b != PACKAGE_ITSELF and (layer_of(b) >= layer_of(a) or b in NEVER.get(a, set()))
    }
    assert wrong == {}


def test_the_room_rule_sees_a_wrong_way_import():
    """The rule itself: a module of a low room importing a high one is found."""
    MODULES["cantor_desktop.song.fake"] = {"cantor_desktop.node.runner"}
    MODULES["cantor_desktop.ui.fake"] = {"cantor_desktop.install.backends.ensure_engine"}
    try:
        edges = room_edges()
        assert edges[("song", "node")] == ["cantor_desktop.song.fake → cantor_desktop.node.runner"]
        assert ("ui", "install") in edges
        with pytest.raises(AssertionError):
            test_each_room_imports_only_rooms_of_lower_layers()
    finally:
        del MODULES["cantor_desktop.song.fake"], MODULES["cantor_desktop.ui.fake"]


def test_the_view_models_sit_below_the_app():
    """A view-model that reached up into the widgets (or a page's Qt) is a wrong-way import."""
    assert layer_of("client") < layer_of("views") < layer_of("ui")
    MODULES["cantor_desktop.views.fake"] = {"cantor_desktop.ui.node_link.NodeLink"}
    try:
        assert ("views", "ui") in room_edges()
        with pytest.raises(AssertionError):
            test_each_room_imports_only_rooms_of_lower_layers()
    finally:
        del MODULES["cantor_desktop.views.fake"]
