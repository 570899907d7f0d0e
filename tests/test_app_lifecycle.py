"""The app as a musician runs it: quit by Cmd+Q (QEvent.Quit) leaves no process, a second
launch shows the first window and exits 0, a killed app takes its node and engine with it,
a Dock click reopens a hidden window, and the macOS tray icon is a template image."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.app_run import AppUnderTest, still_running
from support.node import write_config
from support.procs import free_port


@pytest.fixture
def app_home(cantor_home):
    write_config(cantor_home)
    port = free_port()
    with open(cantor_home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    return cantor_home, port


def quit_by_event_after_a_song(home, port, *, app_events: bool, how: str = ""):
    """Start the app, make a song (its engine then runs), send the application a
    ``QEvent.Quit`` (``how``: see :meth:`AppUnderTest.quit_by_event`); the app's exit
    code, output and the processes it had."""
    app = AppUnderTest(home, port, app_events=app_events).start()
    try:
        assert app.node_up(), app.finish(5)
        assert app.song()["state"] == "done"
        engine = app.engine_pid()
        tree = app.tree()
        assert engine in tree and app.node_pid() in tree
        assert app.engines_record()["sketch"]["pid"] == engine
        app.quit_by_event(how)
        code, out, err = app.finish()
    finally:
        if app.proc.poll() is None:
            app.proc.kill()
    return app, code, out, err, tree


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("", id="cmd-q"),
        pytest.param("dock", id="dock-quit-with-the-window-closed"),
        pytest.param("logout", id="logout"),
    ],
)
def test_macos_termination_is_accepted_with_the_node_already_stopped(app_home, how):
    """Cmd+Q, the Dock's Quit and logout all reach AppKit's applicationShouldTerminate:,
    which Qt answers with the application's answer to a QEvent.Quit. The answer is yes
    (a no cancels a logout), and by the time it is given the node and its engine have
    stopped; the app then leaves through main(), cleanly."""
    app, code, out, err, tree = quit_by_event_after_a_song(*app_home, app_events=True, how=how)
    assert code == 0, err
    assert "quit-event accepted: True" in out, out  # AppKit hears yes
    assert "children running at the answer: 0" in out, out  # the node stopped first
    if how == "dock":  # the window was closed, Cantor ran on until the Dock's Quit
        assert "window visible before quit: False" in out
        assert "quitting before the event: False" in out
    assert "main returned 0" in out
    assert "Traceback" not in err and "Event loop stopped" not in err, err
    assert still_running(tree, 5) == []
    assert app.engines_record() == {}  # the node cleaned up after its engine
    log = (app.home / "logs" / "app.log").read_text()
    assert "asked to terminate; quitting now" in log
    assert ("the session is ending" in log) == (how == "logout")


def test_elsewhere_a_quit_event_ends_the_loop_and_the_node_still_stops(app_home):
    """Off macOS the application's events stay in Qt: a QEvent.Quit (Windows sends one as a
    session ends) ends Qt's loop, and the app stops its node before it exits, cleanly."""
    app, code, out, err, tree = quit_by_event_after_a_song(*app_home, app_events=False)
    assert code == 0, err
    assert "quit-event accepted: True" in out  # Qt's own: its loop ends
    assert "main returned 0" in out and "Traceback" not in err, err
    assert still_running(tree, 5) == []
    assert app.engines_record() == {}


def test_a_second_launch_shows_the_first_window_and_exits_0(app_home):
    home, port = app_home
    first = AppUnderTest(home, port).start()
    second = None
    try:
        assert first.node_up(), first.finish(5)
        node = first.node_pid()
        second = AppUnderTest(home, port).start()
        code, out, err = second.finish(30)
        assert code == 0, err
        assert "main windows shown: 0" in out  # it never made a window
        assert first.node_pid() == node and first.proc.poll() is None
        log = (home / "logs" / "app.log").read_text()
        assert "another launch asked for the window" in log
        tree = first.tree()
        first.proc.terminate()  # SIGTERM: the same quit path
        code, out, err = first.finish()
        assert code == 0 and "main windows shown: 1" in out, err
        assert still_running(tree, 5) == []
    finally:
        for app in (first, second):
            if app is not None and app.proc.poll() is None:
                app.proc.kill()


def test_a_killed_app_takes_its_node_and_engine_and_the_next_launch_is_the_app(app_home):
    home, port = app_home
    app = AppUnderTest(home, port).start()
    try:
        assert app.node_up(), app.finish(5)
        app.song()
        tree = app.tree()
        assert len(tree) >= 2
        app.kill9()
        assert still_running(tree, 10) == []  # node and engine ended with it
        again = AppUnderTest(home, port).start()  # its socket was left behind
        try:
            assert again.node_up(), again.finish(5)
            again.proc.terminate()
            code, out, err = again.finish()
            assert code == 0 and "main windows shown: 1" in out, err
        finally:
            if again.proc.poll() is None:
                again.proc.kill()
    finally:
        if app.proc.poll() is None:
            app.proc.kill()


def test_the_installers_quit_closes_the_app_its_node_and_engine_in_order(app_home):
    """``cantor-desktop --quit`` (what the Windows installer runs before an upgrade or an
    uninstall) tells the running app to quit through its single-instance socket: the app
    takes its own quit path (exit 0, its node and engine stopped, nothing left) and the
    command returns once it is gone."""
    import subprocess

    home, port = app_home
    app = AppUnderTest(home, port).start()
    try:
        assert app.node_up(), app.finish(5)
        app.song()
        tree = app.tree()
        assert len(tree) >= 2
        env = {**os.environ, "CANTOR_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
        r = subprocess.run(
            [sys.executable, "-m", "cantor_desktop.bundle.frozen_main", "--quit"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "the app quit" in r.stdout
        assert app.proc.poll() is not None  # gone by the time --quit returned
        code, out, err = app.finish()
        assert code == 0 and "main returned 0" in out, err
        assert still_running(tree, 5) == []
        assert "asked to quit (cantor-desktop --quit" in (home / "logs" / "app.log").read_text()
        r = subprocess.run(
            [sys.executable, "-m", "cantor_desktop.bundle.frozen_main", "--quit"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert r.returncode == 0 and "no Cantor app was running" in r.stdout, r.stderr
    finally:
        if app.proc.poll() is None:
            app.proc.kill()


# -- in this process ---------------------------------------------------------------------


def test_single_instance_hands_over_to_the_first(qtbot, qapp):
    from cantor_desktop.ui.instance import SingleInstance, instance_name

    name = instance_name("someone", "home-1")
    assert name != instance_name("someone", "home-2") != instance_name("other", "home-1")
    first = SingleInstance(name)
    assert first.claim()
    try:
        with qtbot.waitSignal(first.activated, timeout=5000):
            assert SingleInstance(name).claim() is False
    finally:
        first.release()
    assert SingleInstance(name).claim()  # released: the next one is first


@pytest.mark.skipif(os.name == "nt", reason="named pipes: the launch claims with Qt there")
def test_a_launch_asks_the_first_app_before_loading_qts_network_module(qtbot, qapp):
    """The standard library's question reaches the app Qt's QLocalServer made (same socket
    path, same words), and finds nobody once it has gone."""
    from cantor_desktop.ui.instance import SingleInstance, another_app_answers, instance_name

    name = instance_name("someone", "home-early")
    assert another_app_answers(name) is False  # nobody yet
    first = SingleInstance(name)
    assert first.claim()
    try:
        with qtbot.waitSignal(first.activated, timeout=5000):
            assert another_app_answers(name) is True
    finally:
        first.release()
    assert another_app_answers(name) is False


@pytest.mark.skipif(os.name == "nt", reason="a Unix socket: Windows uses a named pipe")
def test_the_first_app_listens_over_a_dead_apps_socket_for_this_user_only(qtbot, qapp):
    """A killed app leaves its socket file: the next claim listens in its place (not "run
    anyway" deaf), on a socket no other user may open, and a peer that is not a launch of
    ours is let go without stopping the next launch from being heard."""
    import socket
    import stat

    from cantor_desktop.ui.instance import (
        SingleInstance,
        another_app_answers,
        instance_name,
        socket_path,
    )

    name = instance_name("someone", "home-killed")
    path = socket_path(name)
    if os.path.exists(path):
        os.unlink(path)  # an earlier run's, stopped midway
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound, then gone without unlinking
    dead.close()
    first = SingleInstance(name)
    assert first.claim()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        stranger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stranger.connect(path)
        stranger.sendall(b"x" * 200)  # no line: not one of ours
        stranger.settimeout(0.02)

        def let_go() -> bool:
            try:
                return stranger.recv(1) == b""  # the app closed its end
            except TimeoutError:
                return False

        qtbot.waitUntil(let_go, timeout=5000)
        stranger.close()
        with qtbot.waitSignal(first.activated, timeout=5000):
            assert another_app_answers(name) is True
    finally:
        first.release()
    assert not os.path.exists(path)  # released: its socket file is gone


@pytest.fixture
def shell(qapp, qloop):
    from cantor_desktop.ui.main import Shell
    from cantor_desktop.ui.node_link import NodeLink

    s = Shell(qapp, NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
    yield s
    if s._events is not None:
        qapp.removeEventFilter(s._events)
    s.window.close()


def test_a_dock_click_reopens_a_hidden_window_on_macos(shell, qapp):
    from PySide6.QtCore import QCoreApplication, QEvent

    shell.reopen_on_activate = True  # what sys.platform == "darwin" sets
    shell.window.hide()
    QCoreApplication.sendEvent(qapp, QEvent(QEvent.ApplicationActivate))
    assert shell.window.isVisible()
    shell.reopen_on_activate = False  # elsewhere an activation is a focus change
    shell.window.hide()
    QCoreApplication.sendEvent(qapp, QEvent(QEvent.ApplicationActivate))
    assert not shell.window.isVisible()


def test_a_quit_event_runs_the_quit_path_at_once_and_is_accepted(shell, qapp, qloop):
    from PySide6.QtCore import QCoreApplication, QEvent

    from support.ui import run

    shell.window.show()
    event = QEvent(QEvent.Quit)
    QCoreApplication.sendEvent(qapp, event)
    assert event.isAccepted() and shell.done and shell._quit.done()
    assert not shell.window.isVisible()
    run(qloop, shell.until_quit())  # the loop's end: only the link is let go of
    assert shell.link.connection.state == "stopped"
    assert shell.app_event(QEvent(QEvent.Quit)) is False  # once quit, a Quit passes to Qt


def test_the_menus_quit_takes_the_one_quit_path(shell):
    """Off macOS the menu's Quit Cantor is the tray's Quit (on macOS its role makes it
    AppKit's, which sends the QEvent.Quit above)."""
    shell.window.menu_bar.actions["quit"].trigger()
    assert shell._quit.done() and shell.window.quitting


def test_our_application_class_hands_its_own_events_to_the_shell(monkeypatch):
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    from cantor_desktop.ui import main

    monkeypatch.setattr(main, "APP_EVENTS", False)  # Windows and Linux: no Python event()
    assert main.application_class().event is QApplication.event
    monkeypatch.setattr(main, "APP_EVENTS", True)  # macOS
    seen = []
    cls = main.application_class()
    assert cls is main.application_class()
    # the override, called as Qt calls it for an event sent to the application
    app_like = type("App", (), {"on_event": lambda self, e: seen.append(e.type()) or True})()
    assert cls.event(app_like, QEvent(QEvent.Quit)) is True
    assert seen == [QEvent.Quit]


def test_logout_takes_the_same_quit_path(shell):
    shell._session_ending(None)
    assert shell._quit.done()


def test_the_macos_tray_icon_is_a_template_image(qapp):
    from cantor_desktop.ui.icons import state_icon, template_icon, template_pixmap, tray_icon

    images = {}
    for state in ("stopped", "starting", "idle", "generating", "error"):
        icon = template_icon(state)
        assert icon.isMask()  # NSImage.template on macOS
        image = template_pixmap(44, state).toImage()
        colours = {
            (
                image.pixelColor(x, y).red(),
                image.pixelColor(x, y).green(),
                image.pixelColor(x, y).blue(),
            )
            for x in range(44)
            for y in range(44)
            if image.pixelColor(x, y).alpha()
        }
        assert colours == {(0, 0, 0)}, state  # black only: the system tints it
        images[state] = bytes(image.constBits())
    assert len(set(images.values())) == 5  # each state its own shape
    assert tray_icon("idle", template=True) is template_icon("idle")
    assert tray_icon("idle", template=False) is state_icon("idle")
    assert not state_icon("idle").isMask()


def test_without_a_system_tray_its_menu_is_built_only_when_asked_for(qapp):
    from PySide6.QtWidgets import QSystemTrayIcon

    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.tray import Tray

    assert not QSystemTrayIcon.isSystemTrayAvailable()  # offscreen, like GNOME's default
    link = NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False)
    tray = Tray(link)
    tray.on_state("idle")
    assert not tray.available and tray._menu is None
    menu = tray.menu  # built in the link's present state
    assert menu is tray.menu and menu.status.text() == link.status_line()
    assert menu.start.isEnabled() == (
        link.connection.state not in ("idle", "generating", "starting")
    )
    tray.on_state("idle")  # and follows it from then on
    assert not menu.start.isEnabled() and menu.stop.isEnabled()


def test_only_a_loop_that_ends_under_the_quit_path_counts_as_an_early_end(shell, qloop):
    """main() lets an early end pass (the node is stopped) but raises a quit path's own
    failure."""
    from support.ui import run

    async def broken_shutdown():
        raise RuntimeError("the link could not shut down")

    shell.link.shutdown = broken_shutdown
    shell.quit()
    with pytest.raises(RuntimeError, match="could not shut down"):
        run(qloop, shell.until_quit())
    shell.finish_now()  # Qt's aboutToQuit, after the failure
    assert shell.done and not shell.ended_early


def test_a_loop_ended_before_the_quit_path_ran_is_an_early_end(shell):
    shell.finish_now()  # aboutToQuit with the quit path not begun
    assert shell.done and shell.ended_early


def test_once_quitting_a_close_is_the_end_not_the_tray(shell):
    """Windows closes the windows at the end of a session, after the quit path began: the
    window does not stay behind in the tray, nor say it does."""
    told: list[str] = []
    shell.tray.tell = lambda title, text: told.append(text)
    shell.window.keep_in_tray = True
    shell.window.show()
    shell.quit()
    event_accepted = shell.window.close()
    assert event_accepted and not shell.window.isVisible() and told == []
    assert "tray" not in shell.window.statusBar().currentMessage()


def test_a_click_on_the_menu_bar_icon_opens_its_menu_only_on_macos():
    """On macOS the click opens the status item's menu (Open Cantor is in it) and never
    raises the window too; elsewhere a click or a double click opens the window."""
    from PySide6.QtWidgets import QSystemTrayIcon

    from cantor_desktop.ui.tray import opens_window

    reason = QSystemTrayIcon.ActivationReason
    for r in (reason.Trigger, reason.DoubleClick, reason.Context, reason.MiddleClick):
        assert not opens_window(r, "darwin")
    for platform in ("win32", "linux"):
        assert opens_window(reason.Trigger, platform)
        assert opens_window(reason.DoubleClick, platform)
        assert not opens_window(reason.Context, platform)


def test_the_tray_menu_says_exit_on_windows_and_has_alt_key_letters(qtbot, monkeypatch):
    import cantor_desktop.ui.tray as tray_module
    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.tray import Tray, TrayMenu

    for platform, word in (("win32", "Exit"), ("linux", "Quit Cantor"), ("darwin", "Quit Cantor")):
        monkeypatch.setattr(tray_module.sys, "platform", platform)
        menu = TrayMenu(Tray(NodeLink(start_child=False)))
        texts = [a.text() for a in menu.widget.actions() if a.text() and a.isEnabled()]
        assert menu.quit.text().replace("&", "") == word
        letters = [t[t.index("&") + 1].lower() for t in texts if "&" in t]
        assert len(letters) == len(texts) - (platform == "darwin") and len(set(letters)) == len(
            letters
        )


def test_the_tray_icon_follows_the_windows_taskbar_not_the_apps_mode():
    """Windows 11's common setting: a dark taskbar beside light apps. The tray icon is
    drawn for the taskbar it sits on (SystemUsesLightTheme)."""
    from cantor_desktop.system.taskbar import taskbar_scheme

    asked = []

    def registry(values):
        def read(name):
            asked.append(name)
            return values.get(name)

        return read

    dark_bar = registry({"SystemUsesLightTheme": 0, "AppsUseLightTheme": 1})
    assert taskbar_scheme(dark_bar, "win32") == "dark" and asked == ["SystemUsesLightTheme"]
    assert taskbar_scheme(registry({"SystemUsesLightTheme": 1}), "win32") == "light"
    assert taskbar_scheme(registry({}), "win32") is None  # not said: the app's scheme
    assert taskbar_scheme(dark_bar, "linux") is None and taskbar_scheme(dark_bar, "darwin") is None


def test_a_second_launch_on_windows_lets_the_first_come_to_the_front(qapp, monkeypatch):
    """Windows gives the foreground only to the process the user just used: the second
    launch hands it on (AllowSetForegroundWindow) before it asks the first for its window,
    and only for that ("quit" brings nothing up)."""
    import cantor_desktop.system.foreground as foreground
    import cantor_desktop.ui.instance as instance

    allowed = []
    monkeypatch.setattr(instance.sys, "platform", "win32")  # the named pipe's way
    monkeypatch.setattr(foreground, "allow_others_to_the_front", lambda: allowed.append(1))
    nobody = f"cantor-test-{free_port()}"
    assert instance.tell_app(nobody, instance.QUIT) is False and allowed == []
    assert instance.tell_app(nobody, instance.SHOW) is False and allowed == [1]
    assert foreground.ASFW_ANY == 0xFFFFFFFF
