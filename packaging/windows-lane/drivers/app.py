"""Run Cantor Desktop for real (its own ``ui.main.main``) under Wine and let a test drive it.

Run by the lane with the prefix's Windows Python: ``python.exe app.py``. The app starts as a
double-click starts it (its node child, its window, its tray icon); this file only watches
it and acts on it through Qt's public API, the way a user would:

- it prints one JSON object per line on stdout: ``painted`` (seconds to the main window's
  first paint), ``node`` (the node child's pid once it answers), ``song_done``, replies to
  commands, and ``exit`` (the app's exit code) last;
- it reads one JSON command per line on stdin: ``status``, ``compose`` (caption, duration:
  typed into Compose, then Generate clicked), ``page`` (shown), ``screenshot`` (the whole
  Windows desktop, taskbar and tray included, to a PNG), ``hide`` (the window to the tray),
  ``balloons`` (the texts of the notification balloons Windows shows now), ``tray_quit``
  (the tray menu's Quit, triggered).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

T0 = time.perf_counter()
os.environ.setdefault("QT_API", "pyside6")


def emit(event: str, **data) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def balloon_texts() -> list[str]:
    """The texts of the visible notification balloons (tooltip windows with TTS_BALLOON,
    Wine's explorer shows them for Shell_NotifyIcon's NIF_INFO), read with WM_GETTEXT."""
    import ctypes
    from ctypes import wintypes

    user32 = ctypes.WinDLL("user32", use_last_error=True)
    enum_proc = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.HWND, wintypes.LPARAM)
    user32.EnumWindows.argtypes = [enum_proc, wintypes.LPARAM]
    user32.GetClassNameW.argtypes = [wintypes.HWND, wintypes.LPWSTR, ctypes.c_int]
    user32.IsWindowVisible.argtypes = [wintypes.HWND]
    user32.GetWindowLongW.argtypes = [wintypes.HWND, ctypes.c_int]
    user32.SendMessageTimeoutW.argtypes = [
        wintypes.HWND,
        wintypes.UINT,
        wintypes.WPARAM,
        wintypes.LPARAM,
        wintypes.UINT,
        wintypes.UINT,
        ctypes.POINTER(ctypes.c_size_t),
    ]
    found = []

    def each(hwnd, _):
        name = ctypes.create_unicode_buffer(64)
        user32.GetClassNameW(hwnd, name, 64)
        style = user32.GetWindowLongW(hwnd, -16)  # GWL_STYLE
        if name.value == "tooltips_class32" and user32.IsWindowVisible(hwnd) and style & 0x40:
            text = ctypes.create_unicode_buffer(512)
            result = ctypes.c_size_t()
            user32.SendMessageTimeoutW(
                hwnd, 0x000D, 512, ctypes.addressof(text), 0x0002, 2000, ctypes.byref(result)
            )  # WM_GETTEXT, SMTO_ABORTIFHUNG
            found.append(text.value)
        return True

    user32.EnumWindows(enum_proc(each), 0)
    return found


def main() -> int:
    from PySide6.QtCore import QEvent, QObject, QTimer, Signal
    from PySide6.QtWidgets import QMainWindow

    from cantor_desktop.ui.main import application_class
    from cantor_desktop.ui.main import main as app_main

    app = application_class()([sys.argv[0]])
    state = {"painted": False, "node": None, "window": None}

    def window():
        if state["window"] is None:
            for w in app.topLevelWidgets():
                if isinstance(w, QMainWindow) and getattr(w, "link", None) is not None:
                    state["window"] = w
                    watch(w)
        return state["window"]

    def watch(w) -> None:
        link = w.link
        link.songs.finished.connect(
            lambda rec: emit("song_done", id=rec.id, caption=rec.caption, path=rec.path)
        )

        def on_state(s):
            process = link.connection.process
            if s == "idle" and process is not None and state["node"] != process.pid:
                state["node"] = process.pid
                emit("node", pid=process.pid, url=process.url)

        link.connection.state_changed.connect(on_state)
        on_state(link.connection.state)

    class FirstPaint(QObject):
        def eventFilter(self, obj, event):
            if (
                not state["painted"]
                and event.type() == QEvent.Paint
                and isinstance(obj, QMainWindow)
            ):
                state["painted"] = True
                emit("painted", seconds=round(time.perf_counter() - T0, 2), pid=os.getpid())
            return False

    class Commands(QObject):
        received = Signal(dict)

    painted = FirstPaint()
    app.installEventFilter(painted)
    commands = Commands()

    def run(cmd: dict) -> None:
        w = window()
        what = cmd.get("cmd")
        try:
            if what == "status":
                link = w.link if w else None
                process = link.connection.process if link else None
                emit(
                    "status",
                    visible=bool(w and w.isVisible()),
                    link=str(link.connection.state) if link else None,
                    detail=link.connection.detail if link else "",
                    node=process.pid if process is not None else None,
                    tray=bool(w and w.tray and w.tray.available),
                )
            elif what == "compose":
                w.show_page("Compose")
                c = w.compose
                c.caption.setPlainText(cmd["caption"])
                c.instrumental.setChecked(True)
                c.duration.setText(str(cmd.get("duration", 10)))
                c.generate.click()
                emit("composed", problem=c.problem.text())
            elif what == "page":
                w.show_page(cmd["page"])
                emit("page", page=cmd["page"])
            elif what == "screenshot":
                w.show_page(cmd["page"])
                w.bring_up()
                song = cmd.get("waveform")  # a song whose waveform must be drawn first
                deadline = time.monotonic() + 60

                def grab():
                    if song and not w.songs.store.known(song) and time.monotonic() < deadline:
                        QTimer.singleShot(200, grab)
                        return
                    shot = app.primaryScreen().grabWindow(0)
                    emit(
                        "screenshot",
                        path=cmd["path"],
                        saved=shot.save(cmd["path"], "PNG"),
                        size=[shot.width(), shot.height()],
                        waveform=bool(song and w.songs.store.known(song)),
                    )

                QTimer.singleShot(int(cmd.get("settle", 1.5) * 1000), grab)
            elif what == "waveform":  # whether the Songs page has the song's peaks
                emit("waveform", known=w.songs.store.known(cmd["path"]))
            elif what == "hide":
                w.hide()
                emit("hidden", visible=w.isVisible())
            elif what == "balloons":
                emit("balloons", texts=balloon_texts())
            elif what == "tray_quit":
                emit("quitting")
                w.tray.menu.quit.trigger()
            else:
                emit("error", message=f"unknown command {what!r}")
        except Exception as exc:  # noqa: BLE001 - the test reads the reason
            emit("error", message=f"{what}: {type(exc).__name__}: {exc}")

    commands.received.connect(run)

    def read_stdin() -> None:
        for line in sys.stdin:
            line = line.strip()
            if line:
                commands.received.emit(json.loads(line))

    threading.Thread(target=read_stdin, name="commands", daemon=True).start()
    QTimer.singleShot(0, window)
    poll = QTimer()
    poll.timeout.connect(window)
    poll.start(200)
    code = app_main([sys.argv[0]])
    emit("exit", code=code)
    return code


if __name__ == "__main__":
    sys.exit(main())
