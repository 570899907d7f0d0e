"""`cantor stems SONG [--tracks drums,bass|all]`: one stem per track (the engine's
``extract`` task, one job per track, on a base model; a Sketch song's stems come from the
Sketch). Each stem is a version of SONG titled ``{title}_{track}``; with ``-o DIR`` the files
are saved there under that name.

Exit 0 when every stem is done, 1 when one failed (the others are still delivered), 2 on
bad input — and when no base model is installed: the node's message with its size, and the
pull command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .edit_common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    Session,
    add_model_option,
    add_song_argument,
    bad_input,
    parse_song_arg,
    precheck,
    report,
    resolve_source,
    run_async,
)
from .node_session import add_node_option
from .follow import ProgressBar

PROG = "cantor stems"


def register(sub) -> None:
    from ..song.request import TRACKS

    p = sub.add_parser(
        "stems",
        help="split a song into stems (one per instrument)",
        description="Extract one stem per track from a song, each a new "
        "version of it titled {title}_{track}. Needs a base model "
        "(`cantor pull acestep-v15-base`); a Sketch song's stems "
        "come from the Sketch.",
    )
    add_song_argument(p)
    p.add_argument(
        "--tracks",
        default="all",
        metavar="T,T|all",
        help=f"which stems (default all): {', '.join(TRACKS)}",
    )
    add_model_option(p, "a base model that is installed")
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="also save the stems in DIR (made if missing) as {title}_{track}",
    )
    add_node_option(p)
    p.set_defaults(func=run)


def requests_for(source, tracks: list[str], models, asked: str | None) -> list[dict]:
    from ..song.edits import edit_request, model_for

    model = model_for("extract", source.model, models, asked)
    return [
        edit_request(
            "extract",
            source.ref,
            source.request,
            caption=source.caption or source.name,
            track=track,
            model=model,
        )
        for track in tracks
    ]


def run(args) -> int:
    from ..song.edits import parse_tracks
    from ..song.request import RequestError

    try:
        arg = parse_song_arg(args.song)
        tracks = parse_tracks(args.tracks)
        precheck(lambda source, models: requests_for(source, tracks[:1], models, args.model)[0])
        if (
            args.output
            and Path(args.output).expanduser().suffix
            and not Path(args.output).expanduser().is_dir()
        ):
            raise CliError(f"-o: {args.output} names a file; stems go into a folder")
    except RequestError as exc:
        return report(PROG, bad_input(exc))
    except CliError as exc:
        return report(PROG, exc)
    return run_async(PROG, stems(arg, tracks, args.model, args.output, args.node))


async def stems(
    arg, tracks: list[str], asked: str | None, output: str | None, node_url: str | None
) -> int:
    from ..song.edits import stem_title
    from ..song.naming import safe_name
    from ..client.nodeclient import NodeError
    from ..song.record import SongState

    bar = ProgressBar()
    async with Session(PROG, node_url) as session:
        node = session.client
        source = await resolve_source(node, arg, bar)
        models = (await node.models()).get("models", [])
        queued = []
        # all queued at once: the node runs them back to back on one encoding of the source
        for request in requests_for(source, tracks, models, asked):
            song_id = await session.queue(request)
            title = stem_title(source.title, source.caption or source.name, request["track"])
            try:
                await node.change_song(song_id, title=title)
            except NodeError as exc:
                print(
                    f"{PROG}: could not title the {request['track']} stem: {exc.message}",
                    file=sys.stderr,
                )
            queued.append((song_id, request, title))
        failed = []
        for i, (song_id, request, title) in enumerate(queued, start=1):
            bar.note(f"{request['track']} ({i}/{len(queued)})")
            song = await session.follow(song_id, request, bar)
            if song.state != SongState.DONE:
                failed.append(request["track"])
                print(
                    f"{PROG}: the {request['track']} stem "
                    f"{'failed: ' + str(song.error) if song.error else 'was cancelled'}",
                    file=sys.stderr,
                )
                continue
            for take in song.takes:
                path = Path(take.audio)
                if output:
                    folder = Path(output).expanduser()
                    folder.mkdir(parents=True, exist_ok=True)
                    name = safe_name(title) + (f"_take{take.n}" if len(song.takes) > 1 else "")
                    path = await node.audio(
                        song_id, folder / (name + Path(take.file_name).suffix), take=take.n
                    )
                print(path)
        if failed:
            print(
                f"{PROG}: {len(failed)} of {len(queued)} stems failed: {', '.join(failed)}",
                file=sys.stderr,
            )
            return EXIT_FAILED
        return EXIT_OK
