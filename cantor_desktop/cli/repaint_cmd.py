"""`cantor repaint SONG --from A --to B ["CAPTION"]`: make a part of a song again, the rest
kept. SONG is a song id (``ID:TAKE`` for another take) or an audio file. Exit codes as
`cantor sing`."""

from __future__ import annotations

from .edit_common import add_edit_options, add_song_argument, read_lyrics, run_edit


def register(sub) -> None:
    p = sub.add_parser(
        "repaint",
        intermixed=True,
        help="make a part of a song again (the rest is kept)",
        description="Make FROM..TO of a song again, with a caption (and "
        "lyrics) for that part; the rest of the song is kept. "
        "The result is a new version of the song.",
    )
    add_song_argument(p)
    p.add_argument(
        "caption",
        nargs="?",
        metavar="CAPTION",
        help="the style of the new part (default: the song's caption; a file's "
        "is heard by the engine)",
    )
    p.add_argument(
        "--from",
        dest="start",
        metavar="A",
        required=True,
        help="start of the part, in seconds or minutes:seconds",
    )
    p.add_argument(
        "--to",
        dest="end",
        metavar="B",
        required=True,
        help="end of the part (at least 1 s after --from)",
    )
    p.add_argument("--lyrics", metavar="TEXT|@FILE", help="the words of that part")
    add_edit_options(p, "the song's own")
    p.set_defaults(func=run)


def make_request(args):
    from ..song.edits import edit_request, parse_seconds

    lyrics = read_lyrics(args.lyrics)

    def make(source, _models):
        region = {
            "start": parse_seconds(args.start, "region.start"),
            "end": parse_seconds(args.end, "region.end"),
        }
        return edit_request(
            "repaint",
            source.ref,
            source.request,
            caption=args.caption or source.caption,
            lyrics=lyrics,
            region=region,
            model=args.model,
            seed=args.seed,
        )

    return make


def run(args) -> int:
    return run_edit("cantor repaint", args, make_request, hear_file=not args.caption)
