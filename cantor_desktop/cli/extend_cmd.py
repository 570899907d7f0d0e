"""`cantor extend SONG --after S [--before S] [--lyrics TEXT|@FILE [--context S]] ["CAPTION"]`:
more music before and/or after a song, in its tempo and key; the song itself is kept; with
lyrics, what is added after sings them. Exit codes as `cantor sing`."""

from __future__ import annotations

from .edit_common import add_edit_options, add_song_argument, read_lyrics, run_edit


def register(sub) -> None:
    p = sub.add_parser(
        "extend",
        intermixed=True,
        help="add music before or after a song",
        description="Add seconds of music after (and/or before) a song, "
        "continuing its tempo and key; the song is kept. The "
        "result is a new version of the song.",
    )
    add_song_argument(p)
    p.add_argument(
        "caption",
        nargs="?",
        metavar="CAPTION",
        help="the style of what is added (default: the song's caption; a file's "
        "is heard by the engine)",
    )
    p.add_argument("--after", metavar="S", help="seconds to add at the end")
    p.add_argument("--before", metavar="S", help="seconds to add at the start")
    p.add_argument(
        "--lyrics",
        metavar="TEXT|@FILE",
        help="lines the added part sings (with --after); @FILE reads them from a file",
    )
    p.add_argument(
        "--context",
        metavar="S",
        help="seconds of the song's end the sung part hears (default 30)",
    )
    add_edit_options(p, "the song's own")
    p.set_defaults(func=run)


def make_request(args):
    from ..song.edits import edit_request, parse_seconds
    from ..song.lyrics import continued
    from ..song.request import RequestError

    new_lyrics = read_lyrics(args.lyrics)

    def make(source, _models):
        extend = {}
        if args.before is not None:
            extend["before"] = parse_seconds(args.before, "extend.before")
        if args.after is not None:
            extend["after"] = parse_seconds(args.after, "extend.after")
        if not extend:
            raise RequestError("extend", "give --after S and/or --before S (seconds to add)")
        lyrics = None
        if new_lyrics is not None:
            extend["lyrics"] = new_lyrics
            lyrics = continued((source.request or {}).get("lyrics"), new_lyrics)
        if args.context is not None:
            extend["context"] = parse_seconds(args.context, "extend.context")
        return edit_request(
            "extend",
            source.ref,
            source.request,
            caption=args.caption or source.caption,
            extend=extend,
            lyrics=lyrics,
            model=args.model,
            seed=args.seed,
        )

    return make


def run(args) -> int:
    return run_edit("cantor extend", args, make_request, hear_file=not args.caption)
