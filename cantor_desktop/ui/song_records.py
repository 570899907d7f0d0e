"""How a song reads in the app, without Qt: its time, its status in words, its facts, and
the rows it makes in the Songs list (one per take). The record itself is the one everybody
shares, :class:`cantor_desktop.song.Song`."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from ..song import Song, SongState, Stage, Take
from ..song_request import is_instrumental
from .transfer import human_duration

STAGE_WORDS = {Stage.LM: "Writing the arrangement", Stage.SYNTH: "Rendering audio",
               Stage.SAVING: "Saving"}


def when(song: Song) -> str:
    if not song.created:
        return ""
    return _dt.datetime.fromtimestamp(song.created).strftime("%Y-%m-%d %H:%M")


def status_text(song: Song) -> str:
    if song.state == SongState.QUEUED:
        return "Queued" if song.position in (None, 0) else f"Queued (#{song.position + 1})"
    if song.state == SongState.RUNNING:
        return f"{STAGE_WORDS.get(song.stage, 'Working')} — {int(song.progress * 100)}%"
    if song.state == SongState.FAILED:
        return f"Failed: {song.error or 'no reason given'}"
    return str(song.state).capitalize()


def instrumental(song: Song) -> bool:
    lyrics = song.request.get("lyrics")
    return lyrics is None or is_instrumental(str(lyrics))


def duration(song: Song, take: Take | None = None) -> float | None:
    take = take or (song.takes[0] if song.takes else None)
    if take is not None and take.duration:
        return take.duration
    asked = song.request.get("duration")
    return float(asked) if isinstance(asked, (int, float)) else None


def tempo_and_key(song: Song, take: Take | None = None) -> tuple[float | None, str | None]:
    """The take's own facts (asked, filled by the LM or measured), else what was asked."""
    take = take or (song.takes[0] if song.takes else None)
    bpm = take.bpm if take is not None and take.bpm else song.request.get("bpm")
    key = take.key if take is not None and take.key else song.request.get("key")
    return (float(bpm) if isinstance(bpm, (int, float)) else None,
            key if isinstance(key, str) and key else None)


def facts(song: Song, take: Take | None = None) -> list[str]:
    """The short facts a row shows: tempo, key, length, instrumental, model, seed."""
    bpm, key = tempo_and_key(song, take)
    seconds = duration(song, take)
    seed = take.seed if take is not None else None
    return [b for b in (
        f"{bpm:.0f} BPM" if bpm else "", key or "",
        human_duration(seconds) if seconds else "",
        "instrumental" if instrumental(song) else "vocals",
        song.model, f"seed {seed}" if seed is not None else "") if b]


def search_text(song: Song) -> str:
    """What a search matches: title, caption, lyrics, model, key (lower case)."""
    bpm, key = tempo_and_key(song)
    return " ".join(str(x) for x in (song.title, song.caption, song.request.get("lyrics") or "",
                                     song.model, key or "", f"{bpm:.0f}bpm" if bpm else "")
                    ).lower()


@dataclass
class Row:
    """One row of the Songs list: a take of a song (or the song while it has none yet)."""

    song: Song
    take: Take | None = None
    first: bool = True            # the first row of its song (shows the song's name)

    @property
    def key(self) -> tuple[str, int]:
        return self.song.id, self.take.n if self.take is not None else 0

    @property
    def path(self) -> str | None:
        return self.take.audio if self.take is not None else None

    @property
    def label(self) -> str:
        name = self.song.name or "(no caption)"
        if self.take is not None and len(self.song.takes) > 1:
            return name if self.first else f"Take {self.take.n}"
        return name


def rows_of(song: Song) -> list[Row]:
    """A song's rows: one per take, or one for the song until it has takes."""
    if not song.takes:
        return [Row(song)]
    return [Row(song, take, i == 0) for i, take in enumerate(song.takes)]
