"""`cantor extend SONG --after S [--before S] ["CAPTION"]`: more music before and/or after a
song, in its tempo and key; the song itself is kept. Exit codes as `cantor sing`."""

from __future__ import annotations

from .edit_common import add_edit_options, add_song_argument, run_edit


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
    add_edit_options(p, "the song's own")
    p.set_defaults(func=run)


def make_request(args):
    from ..song.edits import edit_request, parse_seconds

    def make(source, _models):
        extend = {}
        if args.before is not None:
            extend["before"] = parse_seconds(args.before, "extend.before")
        if args.after is not None:
            extend["after"] = parse_seconds(args.after, "extend.after")
        if not extend:
            from ..song.request import RequestError

            raise RequestError("extend", "give --after S and/or --before S (seconds to add)")
        return edit_request(
            "extend",
            source.ref,
            source.request,
            caption=args.caption or source.caption,
            extend=extend,
            model=args.model,
            seed=args.seed,
        )

    return make


def run(args) -> int:
    return run_edit("cantor extend", args, make_request, hear_file=not args.caption)
