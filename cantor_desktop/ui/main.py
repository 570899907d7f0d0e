"""`cantor-desktop`: start Qt, the qasync loop, the node link, the window and the tray.

One app per user and home (:mod:`.instance`): a second launch shows the first one's window
and exits 0 before it paints anything.

Every way to quit takes one path, :meth:`Shell.quit`: the tray's and the menu's Quit;
logout and the installer's Restart Manager (``commitDataRequest``); the installer's
``cantor-desktop --quit`` (through the single-instance socket); closing the window when
there is no tray; Ctrl-C and SIGTERM. It hides the window, asks the node we started to stop
(the node stops its engines), and only then lets the loop end. Should the loop end first
anyway, :meth:`Shell.finish_now` stops the node before the process exits.

macOS asks differently: Cmd+Q, the Dock's Quit, logout and shutdown all reach AppKit's
``applicationShouldTerminate:``, which Qt answers by sending the application a
``QEvent.Quit`` and waiting for it (see :data:`APP_EVENTS`). A refused Quit would cancel a
logout ("Cantor cancelled logout"), so the Quit is accepted, after the same steps run
synchronously within :data:`QUIT_BUDGET` seconds (:meth:`Shell.end_now`): the window hides,
the pages stop, the node we started is stopped (asked, then signalled, then killed). Qt then
returns to its loop and the app leaves through ``main()``, as Qt's Cocoa plugin expects.
"""

from __future__ import annotations

import functools
import logging
import os
import sys

os.environ.setdefault("QT_API", "pyside6")  # qasync must pick PySide6

log = logging.getLogger(__name__)

FINISH_TIMEOUT = 20.0
QUIT_BUDGET = 10.0
"""Seconds the synchronous quit (:meth:`Shell.end_now`) may take: the node is asked for
:data:`NODE_ASK_S`, then signalled for :data:`NODE_SIGNAL_S`, then killed. A user's Cmd+Q
sees the window go at once; at logout macOS's loginwindow waits 45 s before it gives up."""
NODE_ASK_S, NODE_SIGNAL_S = 4.0, 2.0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from PySide6.QtWidgets import QApplication  # PySide6 before qasync

    running = QApplication.instance()
    app = running if isinstance(running, QApplication) else application_class()(argv)
    app.setApplicationName("Cantor")
    app.setQuitOnLastWindowClosed(False)
    from .theme import install

    install(app)  # the look and the system's light or dark, before the first paint
    from .. import config
    from .translation import chosen, install as install_language

    settings, _problem = config.load_or_defaults()  # (a problem is shown once the page is up)
    install_language(app, chosen(str(settings.get("app.language") or "")))
    from .instance import SingleInstance, another_app_answers

    instance = SingleInstance()
    # another Cantor of this user and home shows itself: asked before any window, with the
    # standard library where it can be (POSIX), else by claiming the name with Qt now
    early = another_app_answers(instance.name)
    if early or (early is None and not instance.claim()):
        return 0

    from .window import MainWindow

    # the frame first, painted before anything else is imported or read
    window = MainWindow(skeleton=True)
    window.show()
    window.activateWindow()  # the app just launched has the keyboard (no window manager: too)
    import time

    deadline = time.monotonic() + 0.5
    while not window.painted and time.monotonic() < deadline:
        app.processEvents()

    if early is False and not instance.claim():  # a launch at the same moment came first
        window.close()
        return 0
    from ..system import logs
    from ..system.paths import paths

    paths().ensure()
    logs.setup(paths().app_log)
    from .tasks import new_loop

    loop = new_loop(app)
    shell = Shell(app, window=window)
    shell.link.songs.settle_gc = True  # the app's one link: see SongsService.take
    instance.activated.connect(shell.reopen)
    instance.quit_requested.connect(shell.quit)
    shell.start_node_soon()  # never waits: the window is up first
    quit_on_signals(shell.quit)
    try:
        with loop:
            loop.run_until_complete(shell.until_quit())
    except RuntimeError as exc:
        if not shell.ended_early:
            raise
        # Qt's loop ended first (Qt's own quit), and qasync ran the loop's last callbacks
        # after it: the quit path, cut short, says "Event loop stopped before Future
        # completed" or "no running event loop". The node was stopped (finish_now).
        log.warning("the event loop ended before Cantor had quit (%s); the node was stopped", exc)
    finally:
        shell.finish_now()
        instance.release()
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

    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGBREAK"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, handler)
    app = QCoreApplication.instance()
    wake = QTimer(app)
    wake.setObjectName("cantor-signal-wake")
    wake.timeout.connect(lambda: None)
    wake.start(200)


APP_EVENTS = sys.platform == "darwin"
"""Whether the application's own events come to Python (:meth:`Shell.app_event`). Only
macOS sends the ones Cantor takes over: Cmd+Q and the Dock's Quit (``QEvent.Quit``) and a
click on the Dock icon (``ApplicationActivate``). Elsewhere they stay in C++: an ``event()``
in Python makes PySide build a wrapper type for every kind of QEvent (~50) when the first
one arrives, ~0.7 MiB. A ``QEvent.Quit`` that reaches Qt there (Windows sends one at the end
of a session, after ``commitDataRequest`` has started the quit path) ends the loop, and
:meth:`Shell.finish_now` stops the node before the process exits."""


def application_class():
    """The app's QApplication class: on macOS (:data:`APP_EVENTS`) its own events go to the
    shell first. Overriding ``event()`` sees only the events sent to the application
    object; an application-wide event filter would run Python for every event of every
    widget."""
    return _application_class(APP_EVENTS)


@functools.lru_cache(maxsize=None)
def _application_class(app_events: bool):
    from PySide6.QtWidgets import QApplication

    class CantorApplication(QApplication):
        on_event = None  # Shell.app_event, called where event() is overridden

    if not app_events:
        return CantorApplication

    class CantorEventsApplication(CantorApplication):
        def event(self, event):  # noqa: A003 - Qt's name
            handler = self.on_event
            if handler is not None and handler(event):
                return True
            return super().event(event)

    return CantorEventsApplication


def _app_events(shell):
    """The same as an event filter, for an application this module did not make (the
    self-test and the benchmarks make their own QApplication first)."""
    import weakref

    from PySide6.QtCore import QObject

    ref = weakref.ref(shell)  # the filter lives with the application, not the shell

    class AppEvents(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 - Qt's name
            shell = ref()
            if shell is None or obj is not shell.app:
                return False
            return shell.app_event(event)

    return AppEvents(shell.app)


class Shell:
    """The app's parts wired together (also what tests and the bench build)."""

    def __init__(self, app, link=None, *, start_child: bool = True, window=None):
        from .icons import app_icon
        from .node_link import NodeLink
        from .theme import follow_system, install
        from .tray import Tray
        from .window import MainWindow

        install(app)  # a no-op after main() did it (benches and tests make their own app)
        follow_system(app)  # after the first paint: the system's scheme, live
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
        self.window.quit_requested.connect(self.quit)  # the menu's Quit (off macOS)
        import asyncio

        self._quit = asyncio.get_event_loop().create_future()
        self.done = False
        """True once the shutdown path has run (a QEvent.Quit then passes)."""
        self.ended_early = False
        """True when the loop ended while the shutdown path was still under way (or not
        begun): Qt's own quit (:meth:`finish_now`)."""
        self._quit_path_over = False
        self.reopen_on_activate = sys.platform == "darwin"
        self._events = None
        if hasattr(app, "on_event"):  # our own application class
            app.on_event = self.app_event
        else:
            self._events = _app_events(self)
            app.installEventFilter(self._events)
        app.commitDataRequest.connect(self._session_ending)
        app.aboutToQuit.connect(self.finish_now)
        if not self.tray.available:
            # without a tray, closing the window is the only way out: it quits
            self.window.destroyed.connect(self.quit)
            app.lastWindowClosed.connect(self.quit)

    def start_node_soon(self) -> None:
        """Connect to (or start) the node once the window has painted, or after 0.5 s."""
        from PySide6.QtCore import QTimer

        started: list[bool] = []

        def go():
            if not started:
                started.append(True)
                self.link.connection.start()

        if self.window.painted:
            QTimer.singleShot(0, go)
        else:
            self.window.first_painted.connect(go)
            QTimer.singleShot(500, go)

    def app_event(self, event) -> bool:
        """An event sent to the application: True when it is taken here. A Quit (macOS's
        termination: Cmd+Q, the Dock, logout) is answered yes once :meth:`end_now` has run
        the quit path; the loop then ends through :meth:`until_quit`. An activation
        reopens a hidden window where that is the custom."""
        from PySide6.QtCore import QEvent

        kind = event.type()
        if kind == QEvent.Type.Quit and not self.done:
            self.end_now()
            event.accept()  # AppKit hears yes: the logout goes on
            return True
        if kind == QEvent.Type.ApplicationActivate and self.reopen_on_activate:
            self.reopen_if_hidden()
        return False

    def reopen(self) -> None:
        """Another launch, or a click on the Dock: show the window."""
        self.window.bring_up()

    def reopen_if_hidden(self) -> None:
        if not self.window.isVisible() and not self._quit.done():
            self.window.bring_up()

    def quit(self, *_):
        self.window.quitting = True  # a close from now on is the end, not the tray
        if not self._quit.done():
            self._quit.set_result(True)

    def _session_ending(self, manager) -> None:
        """Logout or shutdown (the installer's Restart Manager too): quit now. Qt's default
        would only close the windows, which keeps us in the tray."""
        log.info("the session is ending; quitting")
        self.quit()

    def end_now(self, budget: float = QUIT_BUDGET) -> None:
        """The quit path, synchronously, within ``budget`` seconds: AppKit waits for the
        answer to a termination. The window and the tray icon go, the pages stop, the node
        we started is stopped; :meth:`until_quit` then only lets go of the link."""
        if self.done:
            return
        log.info("asked to terminate; quitting now")
        self.quit()
        self.window.hide()
        if self.tray.icon is not None:
            self.tray.icon.hide()
        self.window.shutdown()
        self._stop_node(budget, timeout=NODE_ASK_S, grace=NODE_SIGNAL_S)
        self.done = True

    async def until_quit(self) -> None:
        try:
            await self._quit
            if not self.done:
                self.window.hide()
                await self.link.shutdown()
                self.window.shutdown()
                if self.tray.icon is not None:
                    self.tray.icon.hide()
                self.done = True
            else:  # ended synchronously (end_now): the link's tasks and client go
                await self.link.shutdown()
        finally:
            self._quit_path_over = True  # ended, or failed: then main() raises its error
        # returning ends the loop (run_until_complete): no app.quit(), whose QEvent.Quit would
        # first ask every window to close, and the window refuses while it keeps to the tray

    def finish_now(self) -> None:
        """Last resort when the loop ended before :meth:`until_quit` had (a quit that got
        past us, a session ending): stop the node we started, synchronously."""
        if self.done:
            return
        self.done = True
        self.ended_early = not self._quit_path_over
        self._stop_node(FINISH_TIMEOUT)

    def _stop_node(self, budget: float, **stop_args) -> None:
        """Stop the node we started, synchronously, waiting ``budget`` s at most."""
        process = self.link.connection.process
        if process is None or not process.running:
            return
        import asyncio
        import threading

        log.warning("stopping the node before exiting")
        # the Qt loop may still count as this thread's running loop: stop it on another
        worker = threading.Thread(
            target=lambda: asyncio.run(process.stop(**stop_args)), name="stop-node", daemon=True
        )
        worker.start()
        worker.join(budget)


def build(app, link=None) -> Shell:
    return Shell(app, link)


if __name__ == "__main__":
    sys.exit(main())
