"""Logging set-up: rotating files under the logs folder, plus stderr for the CLI.

Rotation renames ``x.log`` to ``x.log.1``. On Windows that rename fails while any other
process holds the file open (WinError 32) — a viewer, a virus scanner, a leftover process.
Python's handler then loses every later record and the file grows without bound; ours copies
the file to ``x.log.1`` and empties it in place instead (what logrotate calls copytruncate),
and if even that fails it goes on writing and tries again later. No record is dropped for a
rollover that fails; a record that cannot be written at all goes to logging's handleError.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 5
QUIET = (
    "httpx",
    "httpcore",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "hpack",
    "urllib3",
    "keyring",
    "asyncio",
    "qasync",
)
"""Libraries whose INFO lines are one per request or per poll (the app's health check every
few seconds was 5 of every 6 lines of app.log): warnings and worse only."""
RETRY_AFTER_S = 60.0

_CONTROLS = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F)]
    + [*range(0x2066, 0x206A)]
}
_CONTROLS[ord("\t")] = "\\t"
_CONTROLS[ord("\n")] = "\\n"
_CONTROLS[ord("\r")] = "\\r"


def one_line(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``, ``\\u2028`` and
    the bidi overrides): what a request or a file controls can never start a line of its
    own in a log, nor colour or reorder one."""
    return text.translate(_CONTROLS)


class OneLineFormatter(logging.Formatter):
    """One record, one line: the message is escaped with :func:`one_line`; a traceback
    keeps its lines, each indented so that none can pass for a record of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        head, sep, rest = text.partition("\n")
        if not sep:
            return text
        return head + "\n" + "\n".join("    " + one_line(line) for line in rest.split("\n"))


class RotatingFile(logging.FileHandler):
    """A file that rolls over at ``maxBytes`` (``x.log`` → ``x.log.1`` … ``x.log.N``), and
    whose rollover survives a file held open elsewhere.

    Not logging.handlers' RotatingFileHandler: that module brings pickle and the socket
    handlers along (~0.6 MiB of the app's idle memory) for nothing Cantor uses. The names
    ``maxBytes``, ``backupCount`` and ``rotator`` are that handler's."""

    def __init__(
        self,
        filename: Path,
        maxBytes: int,
        backupCount: int,  # noqa: N803
        encoding: str = "utf-8",
    ):
        super().__init__(filename, mode="a", encoding=encoding)
        self.maxBytes = maxBytes
        self.backupCount = backupCount
        self.rotator: Callable[[str, str], None] = os.rename
        self._next_try = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.shouldRollover(record):
                self.doRollover()
            logging.FileHandler.emit(self, record)
        except Exception:  # noqa: BLE001 - logging never raises into its caller
            self.handleError(record)

    def shouldRollover(self, record: logging.LogRecord) -> bool:  # noqa: N802 - logging's name
        if self.maxBytes <= 0 or time.monotonic() < self._next_try:
            return False
        if self.stream is None:
            self.stream = self._open()
        self.stream.seek(0, os.SEEK_END)  # another process may have emptied the file
        line = self.format(record) + self.terminator
        return self.stream.tell() + len(line.encode(self.encoding or "utf-8")) > self.maxBytes

    def doRollover(self) -> None:  # noqa: N802
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        base = self.baseFilename
        try:
            try:
                self._move_backups_up(base)
            except OSError:  # an older backup is held open: the live file grows a while
                self._next_try = time.monotonic() + RETRY_AFTER_S
                return
            try:
                if self.backupCount > 0:
                    self.rotator(base, f"{base}.1")
                else:
                    open(base, "wb").close()
            except OSError:
                # the live file is held open elsewhere (Windows: WinError 32); x.log.1 is
                # free (moved up): copy the file there and empty it in place
                try:
                    shutil.copyfile(base, f"{base}.1")
                    with open(base, "r+b") as fh:
                        fh.truncate(0)
                except OSError:
                    self._next_try = time.monotonic() + RETRY_AFTER_S
        finally:
            try:
                self.stream = self._open()
            except OSError:
                self.stream = None  # emit opens it again, or reports why not

    def _move_backups_up(self, base: str) -> None:
        """x.log.N-1 → x.log.N … x.log.1 → x.log.2 (the oldest is replaced)."""
        for n in range(self.backupCount - 1, 0, -1):
            older, newer = f"{base}.{n}", f"{base}.{n + 1}"
            if os.path.exists(older):
                if os.path.exists(newer):
                    os.remove(newer)
                self.rotator(older, newer)
        if os.path.exists(f"{base}.1"):  # a single backup: the old one goes
            os.remove(f"{base}.1")


def rotating_handler(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(OneLineFormatter(FORMAT))
    return handler


def setup(log_file: Path, *, stderr_level: int | None = None, level: int = logging.INFO) -> None:
    """Send the root logger to ``log_file`` (rotated) and, when asked, to stderr."""
    root = logging.getLogger()
    root.setLevel(level)
    for handler in list(root.handlers):
        if getattr(handler, "_cantor", False):
            root.removeHandler(handler)
            handler.close()
    file_handler = rotating_handler(log_file)
    file_handler._cantor = True  # type: ignore[attr-defined]
    root.addHandler(file_handler)
    for chatty in QUIET:
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if stderr_level is not None:
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(stderr_level)
        err.setFormatter(OneLineFormatter("%(levelname)s: %(message)s"))
        err._cantor = True  # type: ignore[attr-defined]
        root.addHandler(err)
