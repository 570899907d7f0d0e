"""Musical keys as musicians spell them: read in any spelling, written in one.

Every place a key becomes text goes through here: the song request, the sidecar, the
Sketch and its LM, the audio analysis, export file names and tags, the app and the CLI.

**Reading** (:func:`parse`) takes what people type: "D# minor", "Eb minor", "E♭m",
"e flat minor", "Ebmin", "F#", "F sharp major", "f♯ MOLL", and the file-name form below.

**Writing**: each of the 24 keys has one spelling, the one musicians use: the key
signature with fewer accidentals (D♭ major, 5 flats, not C♯ major, 7 sharps; G♯ minor, 5
sharps, not A♭ minor, 7 flats; B♭ minor, not A♯ minor). The two ties (6 either way) go
as DJ key software and the Camelot wheel write them: **F♯ major** and **E♭ minor** — the
sharps for F♯ major and F♯, C♯, G♯ minor, the flats for D♭, E♭, A♭, B♭ major and E♭, B♭
minor. The forms:

- :attr:`Key.name` ``"Eb minor"``, ``"F# major"``: the song request, sidecars, the engine's
  ``keyscale``, the CLI. ASCII ``b`` and ``#``, as ACE-Step and ``cantor sing --key``
  write them (a sidecar stays plain text a script can grep; an old sidecar's "D# minor"
  is read and shown as E♭ minor).
- :attr:`Key.display` ``"E♭ minor"``: what the app shows (real ♭ and ♯).
- :attr:`Key.short` ``"Ebm"``, ``"F#m"``, ``"Bb"``: ID3 ``TKEY`` and Vorbis ``KEY`` (the
  ID3 spec's own notation: at most three characters, ``b`` and ``#``, ``m`` for minor).
- :attr:`Key.file_text` ``"Ebm"``, ``"Fsharpm"``, ``"Fsharp"``: file names. No ``#`` (it
  ends a URL's path and starts a comment in shells and many tools) and ASCII only (so a
  hardware sampler or an old FAT card reads the name): a sharp is spelt ``sharp``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LETTERS = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
# the usual spelling of each tonic (pitch class → note), see the module doc
MAJOR_NOTES = ("C", "Db", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
MINOR_NOTES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "G#", "A", "Bb", "B")

_KEY = re.compile(
    r"""^\s*
    (?P<letter>[A-Ga-g])
    \s*(?P<acc>[#♯b♭]|[-\s]?(?:sharp|flat))?
    \s*[-\s]?
    (?P<mode>major|minor|maj|min|dur|moll|m)?
    \s*$""",
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True)
class Key:
    tonic: int  # pitch class 0..11 (C = 0)
    minor: bool

    @property
    def note(self) -> str:
        """The tonic as musicians spell it in this key: "Eb", "F#", "C#"."""
        return (MINOR_NOTES if self.minor else MAJOR_NOTES)[self.tonic % 12]

    @property
    def mode(self) -> str:
        return "minor" if self.minor else "major"

    @property
    def name(self) -> str:
        return f"{self.note} {self.mode}"

    @property
    def display(self) -> str:
        return f"{self.note.replace('#', '♯').replace('b', '♭')} {self.mode}"

    @property
    def short(self) -> str:
        return self.note + ("m" if self.minor else "")

    @property
    def file_text(self) -> str:
        return self.note.replace("#", "sharp") + ("m" if self.minor else "")


ALL = tuple(Key(tonic, minor) for minor in (False, True) for tonic in range(12))
"""The 24 keys, majors then minors, each from C."""


def parse(text: object, *, need_mode: bool = False) -> Key | None:
    """The key a text names, in any spelling (see the module doc), or None. A note alone
    is its major key ("Bb"), unless ``need_mode``."""
    if not isinstance(text, str):
        return None
    found = _KEY.match(text)
    if not found or (need_mode and not found.group("mode")):
        return None
    letter, acc = found.group("letter"), (found.group("acc") or "").strip(" -").lower()
    mode = (found.group("mode") or "").lower()
    step = {"#": 1, "♯": 1, "sharp": 1, "b": -1, "♭": -1, "flat": -1}.get(acc, 0)
    return Key((LETTERS[letter.upper()] + step) % 12, mode in ("minor", "min", "moll", "m"))


def spell(text: object) -> str | None:
    """The usual spelling (:attr:`Key.name`) of a key in any spelling; None when it names
    no key."""
    key = parse(text)
    return key.name if key else None


def display(text: object) -> str:
    """How the app shows a key ("E♭ minor"); text that names no key is shown as it is."""
    key = parse(text)
    return key.display if key else ("" if text is None else str(text))


def short(text: object) -> str | None:
    """The tag form ("Ebm", "F#m", "Bb"), or None."""
    key = parse(text)
    return key.short if key else None


def file_text(text: object) -> str | None:
    """The file-name form ("Ebm", "Fsharpm"), or None."""
    key = parse(text)
    return key.file_text if key else None
