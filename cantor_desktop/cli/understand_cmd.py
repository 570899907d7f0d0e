"""`cantor understand FILE|SONG [--json]`: what the engine hears in audio — caption,
lyrics, BPM, key, time signature, duration, language. Exit 0, 1 when the engine could not
read it, 2 on bad input (a file the node refuses, an unknown song)."""

from __future__ import annotations

import json

from .edit_common import (
    EXIT_OK,
    CliError,
    Session,
    bad_input,
    parse_song_arg,
    report,
    resolve_source,
    run_async,
)
from .node_session import add_node_option

PROG = "cantor understand"
FIELDS = (
    ("caption", "caption"),
    ("bpm", "BPM"),
    ("key", "key"),
    ("time_signature", "time signature"),
    ("duration", "duration"),
    ("language", "language"),
    ("lyrics", "lyrics"),
)


def register(sub) -> None:
    p = sub.add_parser(
        "understand",
        help="caption, lyrics, tempo and key of any audio",
        description="Ask the engine what it hears in an audio file (or a "
        "song): caption, lyrics, BPM, key, time signature, "
        "duration and language.",
    )
    p.add_argument(
        "song", metavar="FILE", help="an audio file (WAV, FLAC, MP3, AIFF, OGG), or a song id"
    )
    p.add_argument("--json", action="store_true", help="the node's answer as JSON")
    p.add_argument("--model", metavar="M", help="model name (default: models.default)")
    add_node_option(p)
    p.set_defaults(func=run)


def describe(heard: dict) -> list[str]:
    """The answer as aligned lines; lyrics last, as they were written."""
    width = max(len(label) for _, label in FIELDS)
    lines = []
    for name, label in FIELDS:
        value = heard.get(name)
        if name == "lyrics":
            if value:
                lines.append(f"{label}:")
                lines.extend("  " + line for line in str(value).splitlines())
            else:
                lines.append(f"{label + ':':<{width + 1}} (none heard)")
            continue
        if value in (None, ""):
            text = "?"
        elif name == "bpm":
            text = f"{float(value):g}"
        elif name == "duration":
            text = f"{float(value):.1f} s"
        elif name == "time_signature":
            text = f"{value} beats per bar"
        else:
            text = str(value)
        lines.append(f"{label + ':':<{width + 1}} {text}")
    return lines


def run(args) -> int:
    from ..song.request import RequestError

    try:
        arg = parse_song_arg(args.song, "FILE")
    except RequestError as exc:
        return report(PROG, bad_input(exc))
    except CliError as exc:
        return report(PROG, exc)
    return run_async(PROG, understand(arg, args))


async def understand(arg, args) -> int:
    from .follow import ProgressBar

    async with Session(PROG, args.node) as session:
        node = session.client
        source = await resolve_source(node, arg, ProgressBar())
        heard = await node.understand(source.ref, model=args.model)
    if args.json:
        print(json.dumps(heard, indent=1, ensure_ascii=False))
    else:
        print("\n".join(describe(heard)))
    return EXIT_OK
