"""PySide6's import scan answers as before but keeps no module's source in memory."""

from __future__ import annotations

import importlib
import inspect
import linecache
import sys

import cantor_desktop.ui  # noqa: F401 - installs the scan
from cantor_desktop.ui import pyside_scan


def _feature():
    return sys.modules["__feature__"]


def test_the_app_uses_the_light_scan():
    assert getattr(_feature(), pyside_scan.SCAN_NAME) is pyside_scan.mentions_pyside


def test_it_answers_as_pyside6s_own_scan_for_every_loaded_module():
    """PySide6's scan is `"PySide6" in inspect.getsource(module)`; compare on every module."""
    compared = 0
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        try:
            theirs = "PySide6" in inspect.getsource(module)
        except (OSError, TypeError, SyntaxError):
            continue
        assert pyside_scan.mentions_pyside(module) is theirs, module.__name__
        compared += 1
    assert compared > 100


def test_an_import_after_pyside6_leaves_no_source_in_linecache(tmp_path, monkeypatch):
    (tmp_path / "cantor_scan_qt.py").write_text("import PySide6.QtCore\nVALUE = 1\n", "utf-8")
    (tmp_path / "cantor_scan_plain.py").write_text("VALUE = 2\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    qt = __import__("cantor_scan_qt")  # through the import statement PySide6 hooks
    plain = __import__("cantor_scan_plain")
    try:
        assert qt.__file__ not in linecache.cache and plain.__file__ not in linecache.cache
        seen = _feature().pyside_feature_dict
        assert seen["cantor_scan_qt"] == 0  # uses PySide: features switchable
        assert seen["cantor_scan_plain"] == -1  # ignored, as PySide6 decides
    finally:
        sys.modules.pop("cantor_scan_qt", None)
        sys.modules.pop("cantor_scan_plain", None)


def test_a_module_without_a_source_file_does_not_use_pyside():
    assert pyside_scan.mentions_pyside(sys) is False
    assert pyside_scan.mentions_pyside(importlib.import_module("_socket")) is False


def test_it_never_raises_inside_an_import():
    """It runs inside every later import: an error here would fail that import instead."""
    import types

    odd = types.ModuleType("odd")
    odd.__file__ = "bad\0name.py"  # open() raises ValueError for this
    assert pyside_scan.mentions_pyside(odd) is False
    assert pyside_scan.mentions_pyside(odd, "a later PySide6's argument", more=1) is False
