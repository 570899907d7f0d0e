"""The entry of the frozen (PyInstaller) executable: one program, several modes.

    cantor-desktop                         the Qt app
    cantor-desktop --mode node ARGS        `cantor node ARGS` (the app's node child)
    cantor-desktop --mode sketch-server ARGS   the built-in sketch engine
    cantor-desktop --mode cli ARGS         the `cantor` command line
    cantor-desktop --self-test             render two songs end to end, check them, exit 0/1
    cantor-desktop --measure-startup       print "first-paint <seconds>" once the main
                                           window has painted, then quit (packaging figures)

``cantor_desktop.selfexec`` builds the ``--mode`` command lines, so children of a frozen
Cantor are the frozen executable itself. An executable named ``cantor`` (the Windows console
twin of ``cantor-desktop.exe``, or a symlink named ``cantor`` on macOS) runs the CLI when no
mode is given. Unfrozen, the same
switches work with ``python -m cantor_desktop.frozen_main``.
"""

from __future__ import annotations

import os
import sys
import time

_T0 = time.perf_counter()

CLI_NAMES = ("cantor", "cantor.exe")


def _cli(argv: list[str]) -> int:
    from cantor_desktop.cli.main import main as cli_main

    return cli_main(argv)


DESKTOP_FILE = "cantor"  # installer/linux/cantor.desktop


def _app(argv: list[str]) -> int:
    # Wayland shells match a window to its .desktop entry (name, icon) by this id; on X11
    # the entry's StartupWMClass=Cantor matches the window class (the application name).
    os.environ.setdefault("QT_API", "pyside6")
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.setDesktopFileName(DESKTOP_FILE)
    from cantor_desktop.ui.main import main as app_main

    return app_main([sys.argv[0], *argv])


def _measure_startup(argv: list[str]) -> int:
    """Start the app for real, print "first-paint <s>" after its first paint, and quit.

    The seconds count from this module's import; the build script also times the whole
    process from the outside (``packaging/measure_startup.py``).
    """
    from cantor_desktop.selftest import SelfTestError, open_main_window_once

    try:
        seconds = open_main_window_once(argv, timeout=60, t0=_T0)
    except SelfTestError as exc:
        print(f"first-paint failed: {exc}", flush=True)
        return 1
    print(f"first-paint {seconds:.3f}", flush=True)
    return 0


def dispatch(argv: list[str]) -> int:
    """Run the mode ``argv`` asks for; returns the process exit code."""
    if argv[:1] == ["--mode"] or (argv and argv[0].startswith("--mode=")):
        if argv[0] == "--mode":
            if len(argv) < 2:
                print("cantor: --mode needs one of node, sketch-server, cli", file=sys.stderr)
                return 2
            mode, rest = argv[1], argv[2:]
        else:
            mode, rest = argv[0].split("=", 1)[1], argv[1:]
        if mode == "cli":
            return _cli(rest)
        if mode in ("node", "sketch-server"):
            return _cli([mode, *rest])
        print(f"cantor: unknown mode {mode!r}; one of node, sketch-server, cli", file=sys.stderr)
        return 2
    if argv[:1] == ["--self-test"]:
        from cantor_desktop.selftest import main as selftest_main

        return selftest_main(argv[1:])
    if argv[:1] == ["--measure-startup"]:
        return _measure_startup(argv[1:])
    names = {os.path.basename(sys.argv[0]).lower()}
    if getattr(sys, "frozen", False):
        names.add(os.path.basename(sys.executable).lower())
    if names & set(CLI_NAMES):  # cantor.exe, or a link named `cantor` to the executable
        return _cli(argv)
    return _app(argv)


MP_WORKER = "--multiprocessing-fork"
MP_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
"""The helpers multiprocessing starts as ``-c "[import sys; ]from multiprocessing.<helper>
import main; main(<literals>)"`` (CPython 3.11 to 3.14)."""


def _python_flags_only(args: list[str]) -> bool:
    """Python's own flags, as multiprocessing passes them (``-X opt`` and ``-W arg`` take a
    value)."""
    value_next = False
    for arg in args:
        if value_next:
            value_next = False
            continue
        if not arg.startswith("-"):
            return False
        value_next = arg in ("-X", "-W")
    return True


def _helper_call(code: str) -> tuple[str, list, dict] | None:
    """(module, args, keywords) when ``code`` is exactly one of multiprocessing's helper
    command lines, with literal arguments only; None for any other code."""
    import ast

    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return None
    if body and isinstance(body[0], ast.Import) and [a.name for a in body[0].names] == ["sys"]:
        body = body[1:]
    if len(body) != 2:
        return None
    imp, call = body[0], getattr(body[1], "value", None)
    if not (
        isinstance(imp, ast.ImportFrom)
        and imp.level == 0
        and imp.module in MP_HELPERS
        and [(a.name, a.asname) for a in imp.names] == [("main", None)]
        and isinstance(body[1], ast.Expr)
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "main"
    ):
        return None
    try:
        args = [ast.literal_eval(a) for a in call.args]
        keywords: dict = {}
        for kw in call.keywords:
            value = ast.literal_eval(kw.value)
            if kw.arg is not None:
                keywords[kw.arg] = value
            elif isinstance(value, dict):
                keywords.update(value)
            else:
                return None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return imp.module, args, keywords


def multiprocessing_child(argv: list[str]) -> int | None:
    """Run this process as the multiprocessing child it was started as, if it was one.

    multiprocessing starts its workers (``--multiprocessing-fork``) and, on POSIX, its
    resource tracker and fork server (``-c`` and a line of code) as ``sys.executable``: in a
    frozen Cantor that is Cantor, which would open a window. PyInstaller's runtime hook for
    this imports multiprocessing into every start (~1.2 MiB of the app's idle memory); the
    spec leaves it out and this does its job when asked. Only those helpers' own command
    lines run: any other ``-c`` after Python's flags is refused, never executed.
    Returns the exit code, or None for an ordinary start."""
    if argv[:1] == [MP_WORKER]:
        import multiprocessing.spawn

        multiprocessing.spawn.freeze_support()  # runs the worker and exits
        return 1  # (it did not: not a worker after all)
    at = argv.index("-c") if "-c" in argv else -1
    if at < 0 or not _python_flags_only(argv[:at]):
        return None
    helper = _helper_call(argv[at + 1] if at + 1 < len(argv) else "")
    if helper is None:
        print("cantor: -c runs only multiprocessing's own helpers", file=sys.stderr)
        return 2
    module, args, keywords = helper
    sys.argv = [sys.argv[0], *argv[at + 2 :]]
    import importlib

    importlib.import_module(module).main(*args, **keywords)
    return 0


def main() -> int:
    if getattr(sys, "frozen", False):
        code = multiprocessing_child(sys.argv[1:])
        if code is not None:
            return code
    # a windowed executable (Windows, macOS) started without a console has no stdio: give
    # print() and logging somewhere harmless to write instead of failing
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    return dispatch(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
