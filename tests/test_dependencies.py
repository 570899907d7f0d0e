"""Dependencies are partners: cantor_desktop never imports h11 or httpcore (httpx
is the one HTTP client; uvicorn brings its own), never reaches into a dependency's private
modules or names (``_x``; the standard library is a dependency too), and never patches one
(assigning to an attribute of an imported module or class, to ``sys.modules``, to a
``__class__``).

Read from every module's syntax tree, where it is known which names are modules: ruff's
SLF001 (pyproject.toml) covers ``obj._x`` on objects, and TID251 the banned imports, for the
editor; this test is the check that knows ``h11._receivebuffer`` is a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cantor_desktop"
BANNED = {
    "h11": "httpx is the one HTTP client (uvicorn keeps its own h11 to itself)",
    "httpcore": "httpx is the one HTTP client; its transport is httpx's business",
}
PUBLIC_DESPITE_THE_UNDERSCORE = {"os._exit"}  # documented in the os module's reference
REPLACEABLE = {"sys.stdout", "sys.stderr", "sys.stdin"}  # documented as replaceable

# Modules whose owners are rewriting them now; each is expected to fail until its owner's
# branch lands, and then fails as an unexpected pass until its line here is removed.
KNOWN: dict[str, str] = {}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def reaches(source: str, filename: str = "<module>") -> list[str]:
    """Every import of a banned package, use of a dependency's private module or name, and
    patch of a dependency in ``source`` (a module of cantor_desktop), as "line: what"."""
    tree = ast.parse(source, filename)
    found: set[str] = set()
    outside: dict[str, str] = {}  # local name → the dependency's module or name it is bound to

    def say(node: ast.AST, what: str) -> None:
        found.add(f"{getattr(node, 'lineno', 0)}: {what}")

    def dependency(module: str, node: ast.AST) -> None:
        top = module.split(".")[0]
        if top in BANNED:
            say(node, f"imports {module}: {BANNED[top]}")
        if any(private(part) for part in module.split(".")):
            say(node, f"imports {module}, a private module")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cantor_desktop":
                    continue
                dependency(alias.name, node)
                outside[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "cantor_desktop":
                continue
            dependency(node.module, node)
            for alias in node.names:
                if private(alias.name):
                    say(node, f"imports {alias.name} from {node.module}: private")
                outside[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def dotted(node: ast.Attribute) -> tuple[str, list[str]] | None:
        """(local name, attributes) for ``name.a.b``, when ``name`` is a dependency's."""
        attrs = []
        value: ast.expr = node
        while isinstance(value, ast.Attribute):
            attrs.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in outside:
            return value.id, attrs[::-1]
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (chain := dotted(node)):
            name, attrs = chain
            for i, attr in enumerate(attrs):
                text = ".".join([outside[name], *attrs[: i + 1]])
                if private(attr) and f"{name}.{attr}" not in PUBLIC_DESPITE_THE_UNDERSCORE:
                    say(node, f"uses {text}: private")
                    break
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            root = _root(node.args[0])
            if isinstance(root, ast.Name) and root.id in outside:
                say(node, f"{node.func.id}() on {ast.unparse(node.args[0])}: patches a dependency")
        for target in targets:
            for one in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                text = ast.unparse(one)
                root = _root(one)
                if isinstance(one, ast.Attribute) and one.attr == "__class__":
                    say(node, f"assigns {text}: a swapped class")
                elif isinstance(one, ast.Subscript) and ast.unparse(one.value) == "sys.modules":
                    say(node, f"assigns {text}: a module table trick")
                elif (
                    isinstance(one, ast.Attribute)
                    and isinstance(root, ast.Name)
                    and root.id in outside
                    and text not in REPLACEABLE
                ):
                    say(node, f"assigns {text}: patches a dependency")
    return sorted(found, key=lambda line: (int(line.split(":")[0]), line))


def _modules() -> list:
    params = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        marks = (
            [pytest.mark.xfail(strict=True, reason=f"until its owner lands: {KNOWN[rel]}")]
            if rel in KNOWN
            else []
        )
        params.append(pytest.param(path, marks=marks, id=rel))
    return params


@pytest.mark.parametrize("path", _modules())
def test_no_module_imports_h11_or_reaches_into_a_dependency(path: Path):
    assert reaches(path.read_text("utf-8"), str(path)) == []


def test_the_reader_sees_every_kind_of_reach():
    source = "\n".join(
        [
            "import h11",  # 1
            "from httpcore._async.http11 import AsyncHTTP11Connection",  # 2
            "from h11._receivebuffer import ReceiveBuffer",  # 3
            "import asyncio, os, sys",  # 4
            "from hashlib import _sha2",  # 5
            "loop = asyncio.events._get_running_loop()",  # 6
            "ReceiveBuffer.maybe_extract_at_most = len",  # 7
            "AsyncHTTP11Connection.READ_NUM_BYTES = 1 << 20",  # 8
            "sys.modules['ssl'] = None",  # 9
            "parser.__class__ = dict",  # 10
            "setattr(asyncio.sslproto, 'ssl', None)",  # 11
            "import multiprocessing as mp; mp.freeze_support = print",  # 12
        ]
    )
    assert reaches(source) == [
        "1: imports h11: " + BANNED["h11"],
        "2: imports httpcore._async.http11, a private module",
        "2: imports httpcore._async.http11: " + BANNED["httpcore"],
        "3: imports h11._receivebuffer, a private module",
        "3: imports h11._receivebuffer: " + BANNED["h11"],
        "5: imports _sha2 from hashlib: private",
        "6: uses asyncio.events._get_running_loop: private",
        "7: assigns ReceiveBuffer.maybe_extract_at_most: patches a dependency",
        "8: assigns AsyncHTTP11Connection.READ_NUM_BYTES: patches a dependency",
        "9: assigns sys.modules['ssl']: a module table trick",
        "10: assigns parser.__class__: a swapped class",
        "11: setattr() on asyncio.sslproto: patches a dependency",
        "12: assigns mp.freeze_support: patches a dependency",
    ]


def test_what_is_public_or_ours_is_left_alone():
    source = "\n".join(
        [
            "import os, sys, logging.handlers",
            "from cantor_desktop.system.procs import _private_helper",  # ours: our own business
            "from . import _sibling",
            "os._exit(0)",  # public, documented, despite the underscore
            "sys.stdout = open(os.devnull, 'w')",  # documented as replaceable
            "os.environ['QT_API'] = 'pyside6'",
            "class H(logging.handlers.RotatingFileHandler):",
            "    def rotate(self, source, dest):",
            "        self._next_try = 0",  # a subclass's own state
            "        super().rotate(source, dest)",
        ]
    )
    assert reaches(source) == []


def test_httpcores_lazy_sniffio_import_finds_sniffio():
    """httpcore 1.0.9 runs ``import sniffio`` each time it sets up a lock or an event and
    falls back to asyncio when that fails; a failed import is not cached, so without sniffio
    every ranged request searched sys.path again (https://github.com/encode/httpcore/pull/1103).
    sniffio is a declared dependency until that ships: the import must succeed, and once
    succeeded it is a dictionary look-up."""
    import asyncio
    import importlib.util
    import socket
    import sys

    import httpx

    sys.modules.pop("sniffio", None)
    assert importlib.util.find_spec("sniffio") is not None, "sniffio is missing: see pyproject"
    with socket.socket() as s:  # a port nobody listens on: the request fails after the locks
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def request() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")

    asyncio.run(request())
    assert "sniffio" in sys.modules  # httpcore imported it (once) to tell asyncio from trio
