"""`cantor sing "CAPTION" --cover SONG|FILE [--strength S]`: a cover — a new song in the
caption's style that follows SONG (its tempo, sections and melody). Kept apart from
sing_cmd.py, which only hands over when --cover or --strength is given."""

from __future__ import annotations

import sys

from .edit_common import CliError, bad_input, edit_one, parse_song_arg, precheck, report, run_async

PROG = "cantor sing"


def run_cover(args, build_request, bad_input_type) -> int:
    from ..song.request import RequestError

    if args.cover is None:
        return report(PROG, CliError("strength (--strength): goes with --cover SONG"))
    try:
        base = build_request(args)
        arg = parse_song_arg(args.cover, "--cover")
    except bad_input_type as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except RequestError as exc:
        return report(PROG, bad_input(exc))
    lyrics_given = args.lyrics is not None or args.instrumental

    def make(source, _models):
        request = {**base, "task": "cover", "source": source.ref}
        if args.strength is not None:
            request["strength"] = args.strength
        if not lyrics_given and source.request.get("lyrics"):
            request["lyrics"] = source.request["lyrics"]  # a cover sings the song's words
        return request

    try:
        precheck(make)
    except CliError as exc:
        return report(PROG, exc)
    return run_async(PROG, edit_one(PROG, args.node, arg, make, args.output))
