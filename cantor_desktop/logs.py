"""Logging set-up: rotating files under the logs folder, plus stderr for the CLI.

Rotation renames ``x.log`` to ``x.log.1``. On Windows that rename fails while any other
process holds the file open (WinError 32) — a viewer, a virus scanner, a leftover process.
Python's handler then loses every later record and the file grows without bound; ours copies
the file to ``x.log.1`` and empties it in place instead (what logrotate calls copytruncate),
and if even that fails it goes on writing and tries again later. A record is never dropped.
"""

from __future__ import annotations

import logging
import logging.handlers
import shutil
import sys
import time
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 5
QUIET = ("httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access", "hpack",
         "urllib3", "keyring", "asyncio", "qasync")
"""Libraries whose INFO lines are one per request or per poll (the app's health check every
few seconds was 5 of every 6 lines of app.log): warnings and worse only."""
RETRY_AFTER_S = 60.0


class RotatingFile(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose rollover survives a file held open elsewhere."""

    _next_try = 0.0

    def shouldRollover(self, record) -> bool:  # noqa: N802 - logging's name
        if time.monotonic() < self._next_try:
            return False
        return bool(super().shouldRollover(record))

    def doRollover(self) -> None:  # noqa: N802
        try:
            super().doRollover()
            return
        except OSError:
            pass
        # the rename of the live file failed; the older backups have moved up already
        try:
            if self.stream is not None:
                self.stream.close()
                self.stream = None
            shutil.copyfile(self.baseFilename, self.rotation_filename(f"{self.baseFilename}.1"))
            with open(self.baseFilename, "r+b") as fh:
                fh.truncate(0)
        except OSError:
            self._next_try = time.monotonic() + RETRY_AFTER_S
        finally:
            if self.stream is None:
                self.stream = self._open()


def rotating_handler(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
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
        err.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        err._cantor = True  # type: ignore[attr-defined]
        root.addHandler(err)

