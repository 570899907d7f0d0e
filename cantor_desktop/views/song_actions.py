"""What can be done with the Songs page's selection, and why not, without Qt: the Songs
page's buttons and the Song menu share these actions (:mod:`cantor_desktop.ui.song_actions`
holds them as QActions), so both are enabled (or not) together, and a disabled one says in
its tooltip what is missing ("Select a take in the list first", "Drag across the waveform to
choose the part to repaint" …)."""

from __future__ import annotations

from dataclasses import dataclass

from ..song.record import SongState
from .song_records import Row


@dataclass(frozen=True)
class Selection:
    """What the page knows about the selection, for :func:`availability`."""

    row: Row | None = None
    rows: int = 0  # selected rows
    has_file: bool = False  # the take's audio is on this machine now
    remote: bool = False  # the take is on the node's machine (fetched when played)
    region: bool = False  # a part of the waveform is selected, long enough to repaint
    short_region: bool = False  # a part is selected, but shorter than a repaint needs
    extension: bool = False  # room past an end of the waveform is selected
    finished_selected: bool = False  # a finished song among the selected rows
    page_built: bool = True


def _no_take(row: Row | None) -> str | None:
    """Why a row has no take to work on (None: it has one, finished)."""
    if row is None:
        return "Select a take in the list first"
    state = row.song.state
    if state in (SongState.QUEUED, SongState.RUNNING):
        return "This song is still being made: wait until it is done"
    if state == SongState.FAILED:
        return "This song failed: it has no audio to work on"
    if state == SongState.CANCELLED:
        return "This song was cancelled: it has no audio to work on"
    if row.take is None:
        return "This song has no take to work on"
    return None


def availability(sel: Selection) -> dict[str, str | None]:
    """Each song action → None when it can be used now, else the reason it cannot."""
    if not sel.page_built:
        why = "Open the Songs page and select a take first"
        return dict.fromkeys(ACTIONS, why)
    no_take = _no_take(sel.row)
    out: dict[str, str | None] = {}
    for name in (
        "cover",
        "reference",
        "layer",
        "stems",
        "complete",
        "render_again",
        "another_take",
        "export",
    ):
        out[name] = no_take
    out["play"] = no_take or (
        None if sel.has_file or sel.remote else "The take's file was moved or deleted"
    )
    local = no_take or (
        None
        if sel.has_file
        else "The file is on the node's machine; play it once to fetch a copy here"
        if sel.remote
        else "The take's file was moved or deleted"
    )
    out["reveal"] = out["copy_path"] = local
    if no_take:
        out["repaint"] = out["extend"] = no_take
    else:
        out["repaint"] = (
            None
            if sel.region
            else "Select at least 1 s: drag across the waveform below"
            if sel.short_region
            else "Drag across the waveform below to choose the part to repaint"
        )
        out["extend"] = (
            None
            if sel.extension
            else "Drag past either end of the waveform below to choose how much to add"
        )
    any_song = None if sel.row is not None else "Select a song in the list first"
    out["reuse"] = out["rename"] = out["favourite"] = any_song
    out["trash"] = (
        None
        if sel.finished_selected
        else any_song or "A song still being made cannot go to the trash: cancel it first"
    )
    return out


ACTIONS = {
    # name: (text, what it does, shortcut name or None)
    "play": ("Play / Pause", "Play or pause the selected take", "play"),
    "ab": ("Switch A/B", "Jump to the other of the two takes heard last, at the same point", "ab"),
    "repaint": ("Repaint…", "Make the selected part again (the rest is kept)", None),
    "extend": (
        "Extend",
        "Add music before or after, in the song's tempo and key (drag past an end of the waveform)",
        None,
    ),
    "cover": ("Cover…", "A new song in another style that follows this one", None),
    "reference": ("Use as reference", "Borrow this take's sound for a new song", None),
    "layer": (
        "Add a layer…",
        "Add an instrument, over the selected part or the whole song",
        None,
    ),
    "complete": ("Complete…", "Make a whole song around one part of this take", None),
    "stems": ("Stems…", "Pull out drums, bass, vocals… as stems (one song each)", None),
    "render_again": (
        "Same song, new render",
        "Render the take again from its own codes, with a new seed",
        None,
    ),
    "another_take": (
        "Another take",
        "Make the song again with the same settings and a new seed (for a take that missed "
        "the tempo or key asked)",
        None,
    ),
    "export": (
        "Export…",
        (
            "Save the selected takes as WAV, FLAC, AIFF or MP3 at 48 or 44.1 kHz, at a "
            "loudness of your choice, tagged with tempo and key"
        ),
        "export",
    ),
    "reveal": ("Show in folder", "Show the take's file in the file manager", None),
    "copy_path": ("Copy path", "Put the take's file path on the clipboard", None),
    "reuse": ("Use these settings", "Fill Compose with this song's settings", None),
    "rename": ("Rename…", "Give the song a title of your own", None),
    "favourite": ("Mark favourite", "Mark or unmark the song with a star", None),
    "trash": (
        "Move to trash",
        "Move the selected songs' files to the trash",
        "trash",
    ),
}
