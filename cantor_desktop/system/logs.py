"""Logging set-up: rotating files under the logs folder, plus stderr for the CLI.

Rotation renames ``x.log`` to ``x.log.1``. On Windows that rename fails while any other
process holds the file open (WinError 32) — a viewer, a virus scanner, a leftover process.
logging's RotatingFileHandler then loses every later record and the file grows without
bound; ours (the same handler, through its ``rotate`` and ``doRollover``) copies the file to
``x.log.1`` and empties it in place instead (what logrotate calls copytruncate), and if even
that fails it goes on writing and tries again later. No record is dropped for a rollover
that fails; a record that cannot be written at all goes to logging's handleError.
"""

from __future__ import annotations

import logging
import logging.handlers
import shutil
import sys
import time
from pathlib import Path
from typing import Any

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
FILE_HANDLER, STDERR_HANDLER = "cantor-file", "cantor-stderr"  # the root's handlers set here

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


class RotatingFile(logging.handlers.RotatingFileHandler):
    """logging's RotatingFileHandler (``x.log`` → ``x.log.1`` … ``x.log.N`` at ``maxBytes``),
    whose rollover survives a file held open elsewhere.

    - the live file cannot be renamed (Windows, WinError 32): :meth:`rotate` copies it to
      ``x.log.1`` and empties it in place (logrotate's copytruncate);
    - that fails too, or an older backup cannot be moved up: the file is reopened and
      grows a while; the next rollover is tried :data:`RETRY_AFTER_S` later;
    - the file cannot even be reopened: the record goes to handleError (logging's way), and
      the code that logged carries on."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._next_try = 0.0

    def shouldRollover(self, record: logging.LogRecord) -> bool:  # noqa: N802 - logging's name
        if time.monotonic() < self._next_try:
            return False
        return bool(super().shouldRollover(record))

    def doRollover(self) -> None:  # noqa: N802
        try:
            super().doRollover()
        except OSError:
            # the file stays closed: FileHandler.emit opens it again for this record, or
            # hands the record to handleError when it cannot
            self._next_try = time.monotonic() + RETRY_AFTER_S

    def rotate(self, source: str, dest: str) -> None:
        try:
            super().rotate(source, dest)
        except OSError:
            if source != self.baseFilename:
                raise
            # the live file is held open elsewhere; dest is free (moved up): copy, then empty
            shutil.copyfile(source, dest)
            with open(source, "r+b") as live:
                live.truncate(0)


def rotating_handler(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(OneLineFormatter(FORMAT))
    return handler


def release() -> None:
    """Remove and close the root's handlers :func:`setup` added (the file is let go)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() in (FILE_HANDLER, STDERR_HANDLER):
            root.removeHandler(handler)
            handler.close()


def setup(log_file: Path, *, stderr_level: int | None = None, level: int = logging.INFO) -> None:
    """Send the root logger to ``log_file`` (rotated) and, when asked, to stderr."""
    root = logging.getLogger()
    root.setLevel(level)
    release()  # an earlier setup's
    file_handler = rotating_handler(log_file)
    file_handler.set_name(FILE_HANDLER)
    root.addHandler(file_handler)
    for chatty in QUIET:
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if stderr_level is not None:
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(stderr_level)
        err.setFormatter(OneLineFormatter("%(levelname)s: %(message)s"))
        err.set_name(STDERR_HANDLER)
        root.addHandler(err)
