"""Cantor's text output never dies on a character: stdout and stderr in UTF-8 when they are
a file or a pipe.

Where stdout is not a console, Python writes in the locale's encoding: on Windows the ANSI
code page (cp1252 and the like), which has no "→", "−" or "♪". ``cantor-desktop
--self-test > selftest.log`` (as ``packaging/build.sh windows`` runs it), ``cantor songs >
list.txt`` or a song's caption in a node's log then ends the program with
UnicodeEncodeError; ``PYTHONIOENCODING`` cannot help a frozen executable's users. A console
is left alone (Python writes it as UTF-16 on Windows), and so is an encoding the user chose
with ``PYTHONIOENCODING``.
"""

from __future__ import annotations

import codecs
import os
import sys


def utf8_output() -> None:
    """Write sys.stdout and sys.stderr in UTF-8 unless they are a console, already UTF-8,
    or set by PYTHONIOENCODING."""
    if os.environ.get("PYTHONIOENCODING"):
        return
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        reconfigure = getattr(stream, "reconfigure", None)
        if stream is None or reconfigure is None:
            continue
        try:
            if codecs.lookup(stream.encoding or "ascii").name == "utf-8" or stream.isatty():
                continue
            stream.flush()
            reconfigure(encoding="utf-8", errors="backslashreplace")
        except (OSError, ValueError, LookupError):
            continue  # closed, detached or odd: leave it as it is
