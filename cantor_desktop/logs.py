"""Logging set-up: rotating files under the logs folder, plus stderr for the CLI."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 5
QUIET = ("httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access", "hpack",
         "urllib3", "keyring", "asyncio", "qasync")
"""Libraries whose INFO lines are one per request or per poll (the app's health check every
few seconds was 5 of every 6 lines of app.log): warnings and worse only."""


def rotating_handler(path: Path) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES,
                                                   backupCount=BACKUPS, encoding="utf-8")
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
