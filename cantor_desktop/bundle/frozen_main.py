"""The entry of the frozen (PyInstaller) executable: one program, several modes.

    cantor-desktop                         the Qt app
    cantor-desktop --mode node ARGS        `cantor node ARGS` (the app's node child)
    cantor-desktop --mode sketch-server ARGS   the built-in sketch engine
    cantor-desktop --mode cli ARGS         the `cantor` command line
    cantor-desktop --self-test             render two songs end to end, check them, exit 0/1
    cantor-desktop --measure-startup       print "first-paint <seconds>" once the main
                                           window has painted, then quit (packaging figures)
    cantor-desktop --quit                  close the running app, its node and whatever runs
                                           from this installation (the installer's first step)

``cantor_desktop.system.selfexec`` builds the ``--mode`` command lines, so children of a frozen
Cantor are the frozen executable itself. An executable named ``cantor`` (the Windows console
twin of ``cantor-desktop.exe``, or a symlink named ``cantor`` on macOS) runs the CLI when no
mode is given. Unfrozen, the same
switches work with ``python -m cantor_desktop.bundle.frozen_main``.
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
    from cantor_desktop.bundle.selftest import SelfTestError, open_main_window_once

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
        from cantor_desktop.bundle.selftest import main as selftest_main

        return selftest_main(argv[1:])
    if argv[:1] == ["--measure-startup"]:
        return _measure_startup(argv[1:])
    if argv[:1] == ["--quit"]:
        from cantor_desktop.ui.quit_running import main as quit_main

        return quit_main()
    names = {os.path.basename(sys.argv[0]).lower()}
    if getattr(sys, "frozen", False):
        names.add(os.path.basename(sys.executable).lower())
    if names & set(CLI_NAMES):  # cantor.exe, or a link named `cantor` to the executable
        return _cli(argv)
    return _app(argv)


def main() -> int:
    if getattr(sys, "frozen", False):
        # multiprocessing starts its children (a worker, its resource tracker, a fork server)
        # as sys.executable: in a frozen Cantor, Cantor. PyInstaller's runtime hook makes
        # freeze_support() run such a child and exit here, before any of Cantor starts.
        import multiprocessing

        multiprocessing.freeze_support()
    # a windowed executable (Windows, macOS) started without a console has no stdio: give
    # print() and logging somewhere harmless to write instead of failing
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    from cantor_desktop.system.stdio import utf8_output  # run as a script when frozen: no package

    utf8_output()  # `--self-test > selftest.log` on Windows would be cp1252 (no "→")
    return dispatch(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
