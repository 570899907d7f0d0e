"""`cantor complete SONG --track vocals "CAPTION"`: write the rest of a song around the part
given (the engine's ``complete`` task, on a base model). Exit codes as `cantor sing`."""

from __future__ import annotations

from .edit_common import add_edit_options, add_song_argument, read_lyrics, run_edit


def register(sub) -> None:
    from ..song.request import TRACKS

    p = sub.add_parser(
        "complete",
        help="write a song around a part you have",
        description="SONG is a part (a vocal, a drum loop…): write the rest "
        "of the song around it, as CAPTION says. Needs a base "
        "model (`cantor pull acestep-v15-base`).",
    )
    add_song_argument(
        p, "the part: an audio file, or a song id from `cantor songs` (ID:TAKE for another take)"
    )
    p.add_argument("caption", metavar="CAPTION", help="the song to make around it")
    p.add_argument(
        "--track",
        required=True,
        metavar="T[,T]",
        help=f"what the part is: {', '.join(TRACKS)} (several: vocals,drums)",
    )
    p.add_argument("--lyrics", metavar="TEXT|@FILE", help="the words (for a vocal part)")
    add_edit_options(p, "a base model that is installed")
    p.set_defaults(func=run)


def make_request(args):
    from ..song.edits import edit_request, model_for

    lyrics = read_lyrics(args.lyrics)
    track = " | ".join(t.strip() for t in args.track.replace("|", ",").split(",") if t.strip())

    def make(source, models):
        return edit_request(
            "complete",
            source.ref,
            source.request,
            caption=args.caption,
            lyrics=lyrics,
            track=track or args.track,
            seed=args.seed,
            model=model_for("complete", source.model, models, args.model),
        )

    return make


def run(args) -> int:
    return run_edit("cantor complete", args, make_request, needs_models=True)
