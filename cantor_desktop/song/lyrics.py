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
