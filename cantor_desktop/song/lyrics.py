"""What a song's lyrics say before any engine reads them: ``[Instrumental]``, or none.

Below the request rules (:mod:`.song_request`) and the export's tags alike, so both read
lyrics one way without importing each other."""

from __future__ import annotations

INSTRUMENTAL = "[Instrumental]"


def is_instrumental(lyrics: str | None) -> bool:
    """Absent, empty, or ``[Instrumental]`` in any case with any surrounding white space."""
    if lyrics is None:
        return True
    text = lyrics.strip()
    return text == "" or text.lower() == INSTRUMENTAL.lower()


def continued(lyrics: str | None, new: str) -> str:
    """A song's lyrics once an extend has sung ``new`` after them: the song's lines, a blank
    line, the new ones (only the new ones after an instrumental)."""
    new = new.strip()
    if is_instrumental(lyrics):
        return new
    assert lyrics is not None
    return f"{lyrics.rstrip()}\n\n{new}"
