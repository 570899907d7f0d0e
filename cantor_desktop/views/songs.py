"""The Songs page without Qt: its count, A/B between the two takes heard last, the requests
its edits send (repaint, extend, render again, a cover's or a reference's source), what Move
to trash takes and asks, and the page's sentences.

:class:`SongsViewModel` holds what the page remembers between clicks (the take playing, the
takes heard, a take to play once its copy is fetched); the rows themselves are
:class:`~.song_records.Row` s of the page's list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..song.lyrics import continued
from ..song.record import Song, SongState
from .song_records import Row

TakeKey = tuple[str, int]  # (song id, take number)
AB_HOW = "A/B: play two takes (or versions) first, then press B to switch between them"
EDIT_KEEPS = ("caption", "lyrics", "model", "format", "language", "key", "bpm", "time_signature")
"""What an edit takes from the song it edits (its source)."""


@dataclass(frozen=True)
class Edit:
    """An edit to send: its request, what the page says while it goes (``doing``) and what
    it says could not be done (``what``)."""

    request: dict[str, Any]
    doing: str
    what: str


def count_text(shown: int, total: int) -> str:
    """The page's count: "12 songs", or "3 of 12 songs" while a search or a filter hides some."""
    if shown == total:
        return f"{total} song{'s' if total != 1 else ''}"
    return f"{shown} of {total} songs"


def playable(row: Row | None) -> bool:
    """The row is a take of a finished song (it can be played, edited, dragged)."""
    return row is not None and row.take is not None and row.song.state == SongState.DONE


def take_name(row: Row) -> str:
    """The song's name, and its take when it has several."""
    if row.take is None or len(row.song.takes) < 2:
        return row.song.name
    return f"{row.song.name} (take {row.take.n})"


class SongsViewModel:
    def __init__(self) -> None:
        self.playing: Row | None = None  # the take playing (or paused)
        self.heard: list[tuple[TakeKey, int]] = []  # A/B: the last two takes heard, and where
        self.play_when_fetched: TakeKey | None = None  # a remote take, played once it is here

    # -- playing --------------------------------------------------------------------------
    def remember(self, key: TakeKey, ms: int) -> None:
        self.heard = [item for item in self.heard if item[0] != key][-1:] + [(key, ms)]

    def other_heard(self) -> TakeKey | None:
        """B: the other of the two takes heard last (None: there are not two yet)."""
        if self.playing is None or len(self.heard) < 2:
            return None
        return next((key for key, _ms in self.heard if key != self.playing.key), None)

    def stopped(self, song_id: str) -> bool:
        """The song went (removed, trashed): True when it was the one playing."""
        if self.playing is not None and self.playing.song.id == song_id:
            self.playing = None
            return True
        return False

    # -- edits ----------------------------------------------------------------------------
    @staticmethod
    def edit_base(row: Row) -> dict[str, Any]:
        """The edit's request: the song's own caption, lyrics, model and format, its take
        as the source."""
        assert row.take is not None
        base = {k: row.song.request[k] for k in EDIT_KEEPS if row.song.request.get(k) is not None}
        base["source"] = {"song": row.song.id, "take": row.take.n}
        return base

    def edit_request(self, row: Row | None, task: str, **fields: Any) -> dict[str, Any] | None:
        if row is None or row.take is None:
            return None
        return {**self.edit_base(row), "task": task, **fields}

    def repaint(
        self, row: Row, region: tuple[float, float], caption: str, lyrics: str | None = None
    ) -> Edit:
        """Repaint a region with a caption (the song's own when none is given)."""
        start, end = region
        request = self.edit_request(
            row, "repaint", region={"start": start, "end": end}, caption=caption or row.song.caption
        )
        assert request is not None
        if lyrics is not None:
            request["lyrics"] = lyrics
        span = f"{start:.1f}–{end:.1f} s"
        return Edit(request, f"Repainting {span}", f"repaint {span}")

    def extend(
        self,
        row: Row,
        before: float,
        after: float,
        described: str,
        lyrics: str = "",
        context: float | None = None,
    ) -> Edit:
        """More music before and/or after the take; with ``lyrics``, what is added after
        sings them (hearing the song's last ``context`` seconds), and the new song's lyrics
        are the take's followed by them."""
        ext: dict[str, Any] = {k: v for k, v in (("before", before), ("after", after)) if v}
        fields: dict[str, Any] = {}
        if lyrics.strip() and after and not before:  # lyrics go with music added after
            ext["lyrics"] = lyrics.strip()
            if context is not None:
                ext["context"] = context
            fields["lyrics"] = continued(row.song.request.get("lyrics"), lyrics)
        request = self.edit_request(row, "extend", extend=ext, **fields)
        assert request is not None
        return Edit(request, described, "extend the song")

    def render_again(self, row: Row) -> Edit:
        """The take again from its own audio codes (the language model's part kept): another
        performance of the same song, with a new seed."""
        assert row.take is not None
        base = self.edit_base(row)
        base.pop("source")
        base.update(codes_from={"song": row.song.id, "take": row.take.n}, seed=-1)
        return Edit(base, "Rendering the same song again", "render the song again")

    @staticmethod
    def another_take(row: Row) -> Edit:
        """The song's own request again, with a new seed: another take of the same
        settings (what a take that missed the tempo or key asked wants)."""
        request = {k: v for k, v in row.song.request.items() if k != "seed"}
        request["seed"] = -1
        return Edit(request, "Making another take", "make another take")

    @staticmethod
    def source_of(row: Row | None) -> tuple[dict[str, Any], str] | None:
        """The take as a cover's or a reference's source, and its name for people."""
        if row is None or row.take is None:
            return None
        return {"song": row.song.id, "take": row.take.n}, take_name(row)

    # -- the trash ------------------------------------------------------------------------
    @staticmethod
    def to_trash(rows: Iterable[Row]) -> dict[str, Song]:
        """The finished songs among the selected rows (each once)."""
        return {row.song.id: row.song for row in rows if row.song.is_finished}

    @staticmethod
    def trash_question(songs: Sequence[Song], names: Sequence[str]) -> str:
        """What Move to trash asks before it moves ``names`` (the songs' files)."""
        if not names:
            return f"Forget {len(songs)} song(s) that made no file?"
        shown = "\n".join(names[:8]) + (f"\n… and {len(names) - 8} more" if len(names) > 8 else "")
        return (
            f"Move {len(songs)} song(s) — {len(names)} audio file(s) and their sidecars — "
            f"to the trash?\n\n{shown}"
        )

    # -- the page's sentences -------------------------------------------------------------
    @staticmethod
    def editing(doing: str) -> str:
        return f"{doing}… the new version will appear under the song"

    @staticmethod
    def stems_selected(count: int) -> str:
        return f"{count} stems selected: drag them into your DAW together"

    @staticmethod
    def no_file_manager(path: str) -> str:
        return f"No file manager answered. The file is {path} (Copy path puts it on the clipboard)."

    EXPORT_WAITING = (
        "The exported file is still being made: this drag handed out "
        "the song as made; drag again in a moment for the export"
    )
