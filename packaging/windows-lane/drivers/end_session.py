"""Send a process's top-level windows what Windows sends at logout or shutdown:
WM_QUERYENDSESSION, then WM_ENDSESSION (wParam TRUE), with ENDSESSION_LOGOFF.

    python.exe end_session.py PID

Prints one JSON line: the windows found and what each answered to WM_QUERYENDSESSION.
Exits 1 when the process has no top-level window.
"""

from __future__ import annotations

import ctypes
import json
import sys
from ctypes import wintypes

WM_QUERYENDSESSION = 0x0011
WM_ENDSESSION = 0x0016
ENDSESSION_LOGOFF = 0x80000000
SMTO_ABORTIFHUNG = 0x0002


def main(pid: int) -> int:
    user32 = ctypes.WinDLL("user32", use_last_error=True)
    enum_proc = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.HWND, wintypes.LPARAM)
    user32.EnumWindows.argtypes = [enum_proc, wintypes.LPARAM]
    user32.GetWindowThreadProcessId.argtypes = [wintypes.HWND, ctypes.POINTER(wintypes.DWORD)]
    user32.SendMessageTimeoutW.argtypes = [
        wintypes.HWND,
        wintypes.UINT,
        wintypes.WPARAM,
        wintypes.LPARAM,
        wintypes.UINT,
        wintypes.UINT,
        ctypes.POINTER(ctypes.c_size_t),
    ]
    windows = []

    def each(hwnd, _):
        owner = wintypes.DWORD()
        user32.GetWindowThreadProcessId(hwnd, ctypes.byref(owner))
        if owner.value == pid:
            windows.append(hwnd)
        return True

    user32.EnumWindows(enum_proc(each), 0)
    answers = []
    for hwnd in windows:
        result = ctypes.c_size_t()
        sent = user32.SendMessageTimeoutW(
            hwnd,
            WM_QUERYENDSESSION,
            0,
            ENDSESSION_LOGOFF,
            SMTO_ABORTIFHUNG,
            10000,
            ctypes.byref(result),
        )
        answers.append({"sent": bool(sent), "may_end": bool(result.value)})
    for hwnd in windows:
        result = ctypes.c_size_t()
        user32.SendMessageTimeoutW(
            hwnd, WM_ENDSESSION, 1, ENDSESSION_LOGOFF, SMTO_ABORTIFHUNG, 30000, ctypes.byref(result)
        )
    print(json.dumps({"windows": len(windows), "answers": answers}), flush=True)
    return 0 if windows else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
