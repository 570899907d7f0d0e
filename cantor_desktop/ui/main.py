"""`cantor-desktop`: start Qt, the qasync loop, the node link, the window and the tray."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_API", "pyside6")  # qasync must pick PySide6


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from PySide6.QtWidgets import QApplication  # PySide6 before qasync

    from .window import MainWindow

    app = QApplication.instance() or QApplication(argv)
    app.setApplicationName("Cantor")
    app.setQuitOnLastWindowClosed(False)
    # the frame first, painted before anything else is imported or read
    window = MainWindow(skeleton=True)
    window.show()
    import time
    deadline = time.monotonic() + 0.5
    while not window._painted and time.monotonic() < deadline:
        app.processEvents()

    from .. import logs
    from ..paths import paths
    paths().ensure()
    logs.setup(paths().app_log)
    from .tasks import new_loop
    loop = new_loop(app)
    shell = Shell(app, window=window)
    shell.start_node_soon()  # never waits: the window is up first
    quit_on_signals(shell.quit)
    with loop:
        loop.run_until_complete(shell.until_quit())
    return 0


def quit_on_signals(quit) -> None:
    """SIGTERM and SIGINT (Ctrl-C) take the tray's Quit path: the node we started stops.

    Python runs a signal handler only between bytecodes, and Qt's loop runs in C++; a
    QTimer ticking every 200 ms lets the handler run. The handler only schedules ``quit``.
    """
    import signal

    from PySide6.QtCore import QCoreApplication, QTimer

    def handler(signum, _frame):
        QTimer.singleShot(0, quit)

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, handler)
    app = QCoreApplication.instance()
    wake = QTimer(app)
    wake.setObjectName("cantor-signal-wake")
    wake.timeout.connect(lambda: None)
    wake.start(200)


class Shell:
    """The app's parts wired together (also what tests and the bench build)."""

    def __init__(self, app, link=None, *, start_child: bool = True, window=None):
        from .icons import app_icon
        from .node_link import NodeLink
        from .tray import Tray
        from .window import MainWindow

        app.setWindowIcon(app_icon())
        self.app = app
        self.link = link or NodeLink(start_child=start_child)
        if window is None:
            window = MainWindow(self.link)
        else:
            window.link = self.link
            window.populate()
        self.window = window
        self.tray = Tray(self.link)
        self.window.tray = self.tray
        self.window.keep_in_tray = self.tray.available
        self.tray.open_requested.connect(self.window.bring_up)
        self.tray.song_clicked.connect(self.window.open_song)
        self.tray.quit_requested.connect(self.quit)
        import asyncio
        self._quit = asyncio.get_event_loop().create_future()
        if not self.tray.available:
            # without a tray, closing the window is the only way out: it quits
            self.window.destroyed.connect(self.quit)
            app.lastWindowClosed.connect(self.quit)

    def start_node_soon(self) -> None:
        """Connect to (or start) the node once the window has painted, or after 0.5 s."""
        from PySide6.QtCore import QTimer
        started = []

        def go():
            if not started:
                started.append(True)
                self.link.start()
        if self.window._painted:
            QTimer.singleShot(0, go)
        else:
            self.window.first_painted.connect(go)
            QTimer.singleShot(500, go)

    def quit(self, *_):
        if not self._quit.done():
            self._quit.set_result(True)

    async def until_quit(self) -> None:
        await self._quit
        self.window.hide()
        await self.link.shutdown()
        self.window.shutdown()
        self.app.quit()


def build(app, link=None) -> Shell:
    return Shell(app, link)


if __name__ == "__main__":
    sys.exit(main())
