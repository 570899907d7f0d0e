"""How a song reads in the app, without Qt: its time, its status in words, its facts, and
the rows it makes in the Songs list (one per take). The record itself is the one everybody
shares, :class:`cantor_desktop.song.record.Song`."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from ..song import musical_keys, take_check
from ..song.record import Song, SongState, Stage, Take
from ..song.lyrics import is_instrumental
from .transfer import human_duration

STAGE_WORDS = {
    Stage.LM: "Writing the arrangement",
    Stage.SYNTH: "Rendering audio",
    Stage.SAVING: "Saving",
}


def when(song: Song) -> str:
    if not song.created:
        return ""
    return _dt.datetime.fromtimestamp(song.created).strftime("%Y-%m-%d %H:%M")


def status_text(song: Song) -> str:
    if song.state == SongState.QUEUED:
        return "Queued" if song.position in (None, 0) else f"Queued (#{song.position + 1})"
    if song.state == SongState.RUNNING:
        stage = STAGE_WORDS.get(song.stage, "Working") if song.stage else "Working"
        return f"{stage} — {int(song.progress * 100)}%"
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
    return (
        float(bpm) if isinstance(bpm, (int, float)) else None,
        key if isinstance(key, str) and key else None,
    )


def made_on(song: Song) -> str:
    """In a pool: the member that made the song (or makes it now); "" outside a pool."""
    node = song.node or {}
    return str(node.get("name") or node.get("id") or "")


def check_words(take: Take | None) -> list[str]:
    """What the take missed of what was asked, in words ("⚠ half time: asked 120 BPM,
    measured 60"); [] for a take that did what was asked (or was not checked)."""
    if take is None:
        return []
    out = []
    for fact in take_check.missed(take.check):
        part = take.check[fact]
        verdict = part["verdict"]
        if fact == "bpm":
            out.append(
                f"⚠ {'off tempo' if verdict == take_check.OFF else verdict}: asked "
                f"{part['asked']:.0f} BPM, measured {part['measured']:.0f}"
            )
        else:
            word = "the other mode" if verdict == take_check.PARALLEL else "another key"
            measured = musical_keys.display(part["measured"]) if part["measured"] else "none"
            out.append(
                f"⚠ {word}: asked {musical_keys.display(part['asked'])}, measured {measured}"
            )
    return out


def facts(song: Song, take: Take | None = None) -> list[str]:
    """The short facts a row shows: in a pool the member that made it (first: a long line
    is cut at its end), what the take missed of what was asked, tempo, key, length,
    instrumental, model, seed."""
    bpm, key = tempo_and_key(song, take)
    seconds = duration(song, take)
    seed = take.seed if take is not None else None
    return [
        b
        for b in (
            f"on {made_on(song)}" if made_on(song) else "",
            *check_words(take),
            f"{bpm:.0f} BPM" if bpm else "",
            musical_keys.display(key) if key else "",
            human_duration(seconds) if seconds else "",
            "instrumental" if instrumental(song) else "vocals",
            song.model,
            f"seed {seed}" if seed is not None else "",
        )
        if b
    ]


def search_text(song: Song) -> str:
    """What a search matches: title, caption, lyrics, model, key, the member of a pool
    that made it (lower case)."""
    bpm, key = tempo_and_key(song)
    return " ".join(
        str(x)
        for x in (
            song.title,
            song.caption,
            song.request.get("lyrics") or "",
            song.model,
            f"{musical_keys.spell(key) or key} {musical_keys.display(key)}"
            if key
            else "",  # "eb" and "e♭"
            f"{bpm:.0f}bpm" if bpm else "",
            made_on(song),
        )
    ).lower()


def parent_of(song: Song) -> str | None:
    """The song this one was made from (an edit, a version, a stem), by its request."""
    source = song.request.get("source")
    if isinstance(source, dict) and isinstance(source.get("song"), str):
        return source["song"]
    return None


def edit_words(song: Song) -> str:
    """What an edit did, in a few words ("" for a song made from text)."""
    req = song.request
    task = req.get("task") or "text2music"
    take = (req.get("source") or {}).get("take")
    of = f" of take {take}" if take and take != 1 else ""
    if task == "repaint":
        region = req.get("region") or {}
        return f"Repainted {region.get('start', 0):g}–{region.get('end', 0):g} s{of}"
    if task == "extend":
        ext = req.get("extend") or {}
        bits = [
            f"+{ext['before']:g} s before" if ext.get("before") else "",
            f"+{ext['after']:g} s after" if ext.get("after") else "",
        ]
        sung = ", singing new lines" if ext.get("lyrics") else ""
        return f"Extended {' and '.join(b for b in bits if b)}{sung}{of}"
    if task == "cover":
        strength = req.get("strength")
        return "Cover" + (f" (strength {strength:g})" if strength is not None else "") + of
    if task == "extract":
        return f"Stem: {req.get('track')}{of}"
    if task == "lego":
        return f"Added {req.get('track')}{of}"
    if task == "complete":
        return f"Completed around {req.get('track')}{of}"
    return ""


def family_order(songs: dict[str, Song]) -> list[tuple[Song, int]]:
    """Songs with their versions together: each family (a song and everything made from it,
    at any depth) in the order of its newest member, newest first; in a family the original
    comes first, then its versions newest first. Returns (song, depth).

    Most songs are families of one: those are sorted as they are (10,000 songs arrive at
    once when the Songs page opens)."""
    children: dict[str, list[Song]] = {}
    roots: list[Song] = []
    for song in songs.values():
        parent = parent_of(song)
        if parent is not None and parent in songs and parent != song.id:
            children.setdefault(parent, []).append(song)
        else:
            roots.append(song)
    if not children:
        return [(song, 0) for song in sorted(roots, key=_created, reverse=True)]

    def members(song: Song, depth: int, seen: set[str]) -> list[tuple[Song, int]]:
        seen.add(song.id)
        out = [(song, depth)]
        for child in sorted(children.get(song.id, ()), key=_created, reverse=True):
            if child.id not in seen:
                out.extend(members(child, depth + 1, seen))
        return out

    families: list[tuple[float, list[tuple[Song, int]]]] = []
    for root in roots:
        if root.id in children:
            family = members(root, 0, set())
            families.append((max(s.created for s, _ in family), family))
        else:
            families.append((root.created, [(root, 0)]))
    families.sort(key=_first, reverse=True)
    return [item for _newest, family in families for item in family]


def _created(song: Song) -> float:
    return song.created


def _first(pair: tuple) -> float:
    return pair[0]


@dataclass
class Row:
    """One row of the Songs list: a take of a song (or the song while it has none yet)."""

    song: Song
    take: Take | None = None
    first: bool = True  # the first row of its song (shows the song's name)
    depth: int = 0  # 0: a song; 1…: a version of the one above it

    @property
    def key(self) -> tuple[str, int]:
        return self.song.id, self.take.n if self.take is not None else 0

    @property
    def path(self) -> str | None:
        return self.take.audio if self.take is not None else None

    @property
    def label(self) -> str:
        name = self.song.name or "(no caption)"
        if self.depth and self.first:
            words = edit_words(self.song)
            track = str(self.song.request.get("track") or "").lower()
            if words and track and name.lower().endswith(track):
                name = words  # "Stem: drums", not "Stem: drums — Song_drums"
            elif words:
                name = f"{words} — {name}"
        if self.take is not None and len(self.song.takes) > 1:
            return name if self.first else f"Take {self.take.n}"
        return name


def rows_of(song: Song, depth: int = 0) -> list[Row]:
    """A song's rows: one per take, or one for the song until it has takes."""
    if not song.takes:
        return [Row(song, depth=depth)]
    return [Row(song, take, i == 0, depth) for i, take in enumerate(song.takes)]
