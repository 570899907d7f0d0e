"""`cantor layer SONG --track guitar "CAPTION" [--from A --to B]`: add one instrument to a
song (the engine's ``lego`` task, on a base model), optionally only in a part of it. Exit
codes as `cantor sing`."""

from __future__ import annotations

from .edit_common import add_edit_options, add_song_argument, read_lyrics, run_edit


def register(sub) -> None:
    from ..song.request import TRACKS

    p = sub.add_parser(
        "layer",
        help="add an instrument to a song",
        description="Add one track (an instrument) to a song, in its tempo "
        "and key, optionally only from A to B. Needs a base model "
        "(`cantor pull acestep-v15-base`); a Sketch song is "
        "layered by the Sketch.",
    )
    add_song_argument(p)
    p.add_argument("caption", metavar="CAPTION", help="how the new part should sound")
    p.add_argument(
        "--track", required=True, metavar="T", help=f"the instrument: {', '.join(TRACKS)}"
    )
    p.add_argument(
        "--from",
        dest="start",
        metavar="A",
        help="only from A (seconds or minutes:seconds; give --to too)",
    )
    p.add_argument("--to", dest="end", metavar="B", help="… to B")
    p.add_argument("--lyrics", metavar="TEXT|@FILE", help="words, for a vocal layer")
    add_edit_options(p, "a base model that is installed")
    p.set_defaults(func=run)


def make_request(args):
    from ..song.edits import edit_request, model_for, parse_seconds
    from ..song.request import RequestError

    lyrics = read_lyrics(args.lyrics)

    def make(source, models):
        region = None
        if (args.start is None) != (args.end is None):
            raise RequestError("region", "give both --from and --to, or neither (the whole song)")
        if args.start is not None:
            region = {
                "start": parse_seconds(args.start, "region.start"),
                "end": parse_seconds(args.end, "region.end"),
            }
        return edit_request(
            "lego",
            source.ref,
            source.request,
            caption=args.caption,
            lyrics=lyrics,
            track=args.track,
            region=region,
            seed=args.seed,
            model=model_for("lego", source.model, models, args.model),
        )

    return make


def run(args) -> int:
    return run_edit("cantor layer", args, make_request, needs_models=True)
