"""Export file names: the name pattern and names that are safe on every OS.

A pattern is text with fields in braces (``{title}_{bpm}bpm_{key}_take{n}``); the result is
one file name (never a path): characters no file system takes (``/ \\ : * ? " < > |``,
control characters), ``#``, emoji and other symbols are dropped or made a hyphen, no leading dot,
no trailing dot or space (Windows), no device name (CON, NUL, COM1…), at most
:data:`NAME_MAX_BYTES` bytes of UTF-8, in Unicode NFC (macOS would otherwise decompose).
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Mapping

DEFAULT_PATTERN = "{title}_{bpm}bpm_{key}_take{n}"
FIELDS = {
    "title": "the song's title (else the caption's first words)",
    "bpm": "the tempo, e.g. 92",
    "key": "the key, e.g. Am, Ebm, Bb, Fsharpm (no # in a file name)",
    "n": "the take number",
    "take": "the take number (as {n})",
    "seed": "the seed",
    "model": "the model, e.g. sketch",
    "date": "the day the song was made, e.g. 2026-11-30",
    "caption": "the caption's first words",
    "id": "the song's id",
}
CAPTION_WORDS = 6  # of a caption, in a song's file name
SLUG_MAX = 60  # characters: file names stay far below every file system's limit
NAME_MAX_BYTES = 150  # far below every file system's 255, with room for "-2.flac"
PATTERN_MAX = 200
_WINDOWS_DEVICES = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(10)),
    *(f"LPT{i}" for i in range(10)),
}
_KEEP_PUNCT = set(" -_.,()[]&+'!=~@")
# "#" is dropped: it ends a URL's path and starts a comment in shells and many tools (a key
# with a sharp is written "Fsharpm" by keys.file_text, so no key loses its sharp here)
_DROP = set("#")


def slug(caption: str, words: int = CAPTION_WORDS) -> str:
    """A caption's first words as a file name part: ``warm-lofi-piano-rain`` (ASCII letters
    and digits, accents dropped; ``song`` when none are left)."""
    text = unicodedata.normalize("NFKD", caption)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    parts = re.findall(r"[A-Za-z0-9]+", text.lower())
    name = "-".join(parts[:words])[:SLUG_MAX].strip("-")
    return name or "song"


def pattern_problem(pattern: object) -> str | None:
    """Why a name pattern cannot be used, or None when it can."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "a name pattern such as " + DEFAULT_PATTERN
    if len(pattern) > PATTERN_MAX:
        return f"at most {PATTERN_MAX} characters"
    try:
        parts = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        return f"{exc}; write fields as {{title}} and a brace as {{{{ or }}}}"
    for _text, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in FIELDS:
            return f"{{{name}}} is not a field; fields: " + ", ".join("{" + f + "}" for f in FIELDS)
        if spec or conversion:
            return f"{{{name}}} takes no format; write it as {{{name}}}"
    if "/" in pattern or "\\" in pattern:
        return "a file name, not a path (no / or \\)"
    return None


def render(pattern: str, values: Mapping[str, object]) -> str:
    """The pattern with its fields filled in, made a safe file name (without extension)."""
    problem = pattern_problem(pattern)
    if problem:
        raise ValueError(f"pattern: {problem}")
    filled = {name: _field_text(values.get(name)) for name in FIELDS}
    return safe_name(pattern.format(**filled))


def _field_text(value: object) -> str:
    if value is None or value == "":
        return "unknown"
    return str(value)


def safe_name(text: str, fallback: str = "song") -> str:
    """One file name that every OS accepts, from any text (see the module docstring)."""
    text = unicodedata.normalize("NFC", str(text))
    out: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in _DROP:
            continue
        if ch in _KEEP_PUNCT or cat[0] in "LN" or (cat[0] == "M" and out):
            out.append(ch)
        elif ch.isspace():
            out.append(" ")
        elif cat[0] in "PZ" or ch in "/\\:|":
            out.append("-")  # a separator stays a separator
        # everything else (control characters, emoji and other symbols) is dropped
    name = "".join(out)
    name = re.sub(r"\s+", " ", name)
    name = re.sub(r"-{2,}", "-", name)
    name = re.sub(r"\.{2,}", ".", name)  # no ".." anywhere
    name = re.sub(r"([-_ ])[-_ ]*(?=[-_ ])", r"\1", name)
    name = name.strip(" .-_")
    if not name:
        name = fallback
    if name.split(".")[0].upper() in _WINDOWS_DEVICES:
        name = "_" + name
    encoded = name.encode("utf-8")
    if len(encoded) > NAME_MAX_BYTES:
        name = encoded[:NAME_MAX_BYTES].decode("utf-8", "ignore").rstrip(" .-_") or fallback
    return name
