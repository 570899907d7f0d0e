"""macOS facts that decide whether an engine can start: quarantine and Rosetta.

- A build downloaded with a browser carries the ``com.apple.quarantine`` attribute;
  Gatekeeper then refuses to run it from a process with no window to ask in, and the engine
  dies without a word. :func:`quarantine_note` says so, with the command that clears it.
- An Intel build of Cantor running under Rosetta sees ``x86_64`` everywhere, but the machine
  is Apple Silicon and a native arm64 engine (Metal) runs fine as its child:
  :func:`under_rosetta` asks the kernel (``sysctl.proc_translated``).

``run`` (an argv → (exit code, stdout) function) and ``getxattr`` are injectable so tests
can play a Mac.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Callable

QUARANTINE = "com.apple.quarantine"

Runner = Callable[[list[str]], "tuple[int | None, str]"]


def run_command(argv: list[str], timeout: float = 5.0) -> tuple[int | None, str]:
    """Run a short macOS tool; (exit code or None when it could not run, stdout)."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    return done.returncode, done.stdout


def quarantined(
    path: str | os.PathLike, *, getxattr: Callable | None = None, run: Runner | None = None
) -> bool | None:
    """Does ``path`` carry the quarantine attribute? None when it cannot be told."""
    get = getxattr if getxattr is not None else getattr(os, "getxattr", None)
    if get is not None:  # Linux has os.getxattr; macOS's Python does not
        try:
            get(os.fspath(path), QUARANTINE)
            return True
        except OSError as exc:
            import errno

            if exc.errno in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
                return False
            if getxattr is not None:
                return None
    code, out = (run or run_command)(["xattr", "-p", QUARANTINE, os.fspath(path)])
    if code is None:
        return None
    return code == 0


def quarantine_note(executable: str | os.PathLike, **kwargs) -> str | None:
    """A sentence for the user when a build is quarantined, naming the command that clears
    it (on the build's folder: its libraries carry the attribute too); else None."""
    exe = Path(executable)
    if quarantined(exe, **kwargs) is not True:
        return None
    folder = exe.parent
    return (
        f"macOS has quarantined this build (it was downloaded from the internet), so it "
        f"cannot start from Cantor. If you trust it, clear the quarantine with: "
        f"xattr -dr {QUARANTINE} {shlex.quote(str(folder))}"
    )


def under_rosetta(*, run: Runner | None = None) -> bool:
    """True when this process is an x86_64 program translated by Rosetta on Apple Silicon
    (``sysctl -n sysctl.proc_translated`` prints 1; 0 natively; an error on Intel Macs)."""
    code, out = (run or run_command)(["sysctl", "-n", "sysctl.proc_translated"])
    return code == 0 and out.strip() == "1"
