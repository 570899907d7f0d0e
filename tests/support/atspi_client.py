"""An assistive technology's view of the app, as a screen reader gets it: a client of the
AT-SPI bus (pyatspi, Debian's python3-pyatspi, run by the system's Python 3), driven line by
line on stdin with JSON commands, each answered by one JSON line on stdout. It sees only
what the bus carries: roles, names, label relations, states; and it types only as a user
does, through the bus's keyboard (XTest on the X server). No tests here: tests/
test_ui_atspi.py drives it.

    {"do": "wait_app", "name": "Cantor"}        → {"ok": true}
    {"do": "tree"}                               → {"nodes": [{role, name, labels, states, path}]}
    {"do": "focused"}                            → {"node": {...} | null}
    {"do": "type", "text": "..."}                → {"ok": true}
    {"do": "key", "sym": "Return", "mods": ["ctrl"]} → {"ok": true}
    {"do": "announcements"}                      → {"said": [...]}  (since last asked)
"""

import json
import sys
import time

import ctypes
import queue
import threading

import pyatspi

_X11 = ctypes.CDLL("libX11.so.6")
_X11.XOpenDisplay.restype = ctypes.c_void_p
_X11.XOpenDisplay.argtypes = [ctypes.c_char_p]
_X11.XKeysymToKeycode.restype = ctypes.c_ubyte
_X11.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
_DISPLAY = _X11.XOpenDisplay(None)


def keycode(keysym: int) -> int:
    """The X server's key for a keysym (its keyboard map, as a keyboard's keys are)."""
    code = _X11.XKeysymToKeycode(_DISPLAY, keysym)
    if not code:
        raise ValueError(f"no key for keysym {keysym:#x} on this X server")
    return code


MODS = {"shift": 0xFFE1, "ctrl": 0xFFE3, "alt": 0xFFE9}  # the left keys' keysyms
KEYSYMS = {
    "Return": 0xFF0D,
    "Tab": 0xFF09,
    "space": 0x20,
    "Right": 0xFF53,
    "Left": 0xFF51,
    "Down": 0xFF54,
    "Up": 0xFF52,
    "Escape": 0xFF1B,
    "2": 0x32,
    "1": 0x31,
    "i": 0x69,
    "o": 0x6F,
    "Home": 0xFF50,
    "End": 0xFF57,
}
ITEM_ROLES = ("list item", "table cell", "tree item")
ANNOUNCED: list[str] = []
APP = None


def find_app(name, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        desktop = pyatspi.Registry.getDesktop(0)
        for i in range(desktop.childCount):
            app = desktop.getChildAtIndex(i)
            if app is not None and app.name == name and app.childCount:
                return app
        time.sleep(0.2)
    return None


def describe(node, path):
    states = node.getState()
    labels = []
    for rel in node.getRelationSet():
        if rel.getRelationType() == pyatspi.RELATION_LABELLED_BY:
            labels += [rel.getTarget(i).name for i in range(rel.getNTargets())]
    return {
        "role": node.getRoleName(),
        "name": node.name or "",
        "labels": labels,
        "states": [
            s
            for s, v in (
                ("focusable", pyatspi.STATE_FOCUSABLE),
                ("focused", pyatspi.STATE_FOCUSED),
                ("showing", pyatspi.STATE_SHOWING),
                ("enabled", pyatspi.STATE_ENABLED),
                ("checked", pyatspi.STATE_CHECKED),
            )
            if states.contains(v)
        ],
        "path": path,
    }


def walk(node, path, out, showing_only=True):
    try:
        info = describe(node, path)
    except Exception:  # an object gone while walking
        return
    if showing_only and "showing" not in info["states"] and path:
        return
    out.append(info)
    for i in range(node.childCount):
        child = node.getChildAtIndex(i)
        if child is not None:
            walk(child, path + [i], out, showing_only)


def find(role, name):
    """The first showing object with this role and name (a walk of the tree)."""
    out = []
    walk(APP, [], out)
    for info in out:
        if info["role"] == role and info["name"] == name:
            node = APP
            for i in info["path"]:
                node = node.getChildAtIndex(i)
            return node
    return None


def frames():
    return [APP.getChildAtIndex(i) for i in range(APP.childCount)]


def handle(cmd):
    global APP
    do = cmd["do"]
    if do == "wait_app":
        APP = find_app(cmd["name"], cmd.get("timeout", 60))
        return {"ok": APP is not None}
    if do == "tree":
        out = []
        walk(APP, [], out)
        return {"nodes": out}
    if do == "focused":
        # an item of a list or table says "focused" while it is the current one: it has the
        # keyboard only while its view has it too; a text field's viewport (a filler) says
        # it with its field
        out = []
        walk(APP, [], out)
        at = {tuple(n["path"]): n for n in out}

        def parent_focused(n):
            return "focused" in at.get(tuple(n["path"][:-1]), {}).get("states", [])

        focused = [
            n
            for n in out
            if "focused" in n["states"]
            and n["path"]
            and (n["role"] not in ITEM_ROLES or parent_focused(n))
            and not (n["role"] == "filler" and parent_focused(n))
        ]
        return {"node": focused[-1] if focused else None}
    if do == "pointer_to_window":
        # no window manager gives the keyboard focus: X sends keys to the window under
        # the pointer (PointerRoot), so the pointer goes over the window, as a user's would
        frame = frames()[0]
        x, y, w, h = frame.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        pyatspi.Registry.generateMouseEvent(x + w // 2, y + 10, "abs")
        return {"ok": True, "extents": [x, y, w, h]}
    if do == "grab_focus":  # what a screen reader's "focus this" does
        node = find(cmd["role"], cmd["name"])
        return {"ok": node is not None and node.queryComponent().grabFocus()}
    if do == "text":  # what a text field holds, as the screen reader reads it
        node = find(cmd["role"], cmd["name"])
        return {"text": None if node is None else node.queryText().getText(0, -1)}
    if do == "type":
        pyatspi.Registry.generateKeyboardEvent(0, cmd["text"], pyatspi.KEY_STRING)
        return {"ok": True}
    if do == "key":
        # as fingers do: each modifier held down, the key pressed and let go, the modifiers
        # let go (the bus's own modifier latch does not reach Qt as a held Ctrl)
        mods = [keycode(MODS[m]) for m in cmd.get("mods", [])]
        for code in mods:
            pyatspi.Registry.generateKeyboardEvent(code, None, pyatspi.KEY_PRESS)
        pyatspi.Registry.generateKeyboardEvent(
            keycode(KEYSYMS[cmd["sym"]]), None, pyatspi.KEY_PRESSRELEASE
        )
        for code in reversed(mods):
            pyatspi.Registry.generateKeyboardEvent(code, None, pyatspi.KEY_RELEASE)
        return {"ok": True}
    if do == "announcements":
        said, ANNOUNCED[:] = list(ANNOUNCED), []
        return {"said": said}
    return {"error": f"no command {do!r}"}


def heard(event) -> None:
    """What the app announced (a screen reader speaks it): kept until asked for."""
    ANNOUNCED.append(str(event.any_data))


def main() -> None:
    """Commands from stdin (read by a thread), answered here, between turns of the GLib
    loop that brings the bus's events (pyatspi is used from this thread only)."""
    from gi.repository import GLib

    pyatspi.Registry.registerEventListener(heard, "object:announcement")
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    context = GLib.MainContext.default()
    while True:
        while context.iteration(False):
            pass
        try:
            line = lines.get(timeout=0.02)
        except queue.Empty:
            continue
        if line is None:
            return
        try:
            answer = handle(json.loads(line))
        except Exception as exc:  # the test reads what went wrong
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


main()
