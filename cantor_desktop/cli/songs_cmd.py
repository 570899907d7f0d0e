"""`cantor songs [--json]`: the node's songs, newest first, with the ids the editing
commands take (`cantor repaint ID …`), their state, takes, tempo and key, model, and the
song each version was made from."""

from __future__ import annotations

import json

from ..song import musical_keys, take_check
from .edit_common import EXIT_OK, Session, run_async
from .node_session import add_node_option

PROG = "cantor songs"


def register(sub) -> None:
    p = sub.add_parser(
        "songs",
        help="list the songs and their ids",
        description="The node's songs, newest first: id (for repaint, "
        "extend, stems…), state, takes, tempo and key, model, the "
        "song a version was made from, and the title.",
    )
    p.add_argument("--json", action="store_true", help="one JSON array")
    add_node_option(p)
    p.set_defaults(func=run)


def parent(song) -> str | None:
    """``ID`` or ``ID:TAKE`` of the song this one was made from."""
    source = song.request.get("source")
    if isinstance(source, dict) and source.get("song"):
        take = source.get("take") or 1
        return source["song"] + (f":{take}" if take != 1 else "")
    if isinstance(source, dict) and source.get("upload"):
        return "upload"
    return None


def what(song) -> str:
    """The edit a version is, in a word or two ("" for a song from text)."""
    req = song.request
    task = req.get("task") or "text2music"
    if task == "text2music":
        return ""
    if task == "repaint" and isinstance(req.get("region"), dict):
        return f"repaint {req['region']['start']:g}-{req['region']['end']:g}s"
    if task == "extend" and isinstance(req.get("extend"), dict):
        ext = req["extend"]
        return "extend " + " ".join(f"{k} {ext[k]:g}s" for k in ("before", "after") if ext.get(k))
    if task in ("extract", "lego", "complete"):
        return {"extract": "stem", "lego": "layer", "complete": "complete"}[
            task
        ] + f" {req.get('track')}"
    return task


def tempo_key(song) -> tuple[str, str]:
    take = song.takes[0] if song.takes else None
    bpm = (take.bpm if take and take.bpm else None) or song.request.get("bpm")
    key = (take.key if take and take.key else None) or song.request.get("key")
    # the usual spelling, also for an old song's "D# minor"; ASCII: a console may not print ♭
    key = (musical_keys.spell(key) or key) if key else None
    return (f"{float(bpm):.0f}" if isinstance(bpm, (int, float)) else "-", key or "-")


def as_json(song) -> dict:
    return {
        "id": song.id,
        "name": song.name,
        "title": song.title,
        "caption": song.caption,
        "state": str(song.state),
        "error": song.error,
        "task": song.request.get("task") or "text2music",
        "track": song.request.get("track"),
        "parent": song.request.get("source"),
        "model": song.model,
        "created": song.created,
        "favourite": song.favourite,
        "takes": [
            {
                k: getattr(t, k)
                for k in (
                    "n",
                    "audio",
                    "duration",
                    "bpm",
                    "key",
                    "time_signature",
                    "seed",
                    "check",
                )
            }
            for t in song.takes
        ],
    }


def table(songs) -> list[str]:
    rows = [("ID", "STATE", "TAKES", "BPM", "KEY", "MODEL", "FROM", "EDIT", "TITLE")]
    for song in songs:
        bpm, key = tempo_key(song)
        missed = {f for t in song.takes for f in take_check.missed(t.check)}
        bpm += "!" if "bpm" in missed else ""  # a take missed the tempo asked
        key += "!" if "key" in missed else ""
        rows.append(
            (
                song.id,
                str(song.state),
                str(len(song.takes)) if song.takes else "-",
                bpm,
                key,
                song.model or "-",
                parent(song) or "-",
                what(song) or "-",
                song.name.replace("\n", " ")[:60] or "(no caption)",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    if any(r[3].endswith("!") or r[4].endswith("!") for r in rows[1:]):
        lines.append("!: a take missed the tempo or key asked (cantor songs --json: its check)")
    return lines


def run(args) -> int:
    return run_async(PROG, songs(args))


async def songs(args) -> int:
    from ..song.record import Song

    async with Session(PROG, args.node) as session:
        records = []
        for data in await session.client.songs():
            try:
                records.append(Song.from_json(data))
            except ValueError:
                continue  # not one of the node's songs
    records.sort(key=lambda s: s.created, reverse=True)
    if args.json:
        print(json.dumps([as_json(s) for s in records], indent=1, ensure_ascii=False))
    elif not records:
        print('No songs yet: `cantor sing "a caption"` makes one.')
    else:
        print("\n".join(table(records)))
    return EXIT_OK
