"""`cantor sing CAPTION …`: one song through the node, with a progress bar on stderr.

Uses the running node, or starts a private one for the call and stops it after. Prints the
song's file path(s) on stdout. Exit 0 done, 1 the song failed (the reason is printed),
2 bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

from ..song.record import Song, SongState
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .follow import ProgressBar, follow, output_path
from .node_session import NodeUnavailable, add_node_option, node_client


def register(sub) -> None:
    from ..song.request import SONG_FORMATS
    from ..song.request import (
        ADAPTER_SCALE_RANGE,
        GUIDANCE_RANGE,
        SHIFT_RANGE,
        SOLVERS,
        STEPS_RANGE,
    )

    p = sub.add_parser(
        "sing",
        help="make one song",
        description="Make one song: a caption, and lyrics or --instrumental.",
        intermixed=True,
    )
    p.add_argument(
        "caption", nargs="?", help="the style: genre, instruments, mood (a --style has its own)"
    )
    p.add_argument(
        "--style",
        metavar="NAME",
        help="a saved style (`cantor styles`): its caption, sound, adapter, tempo, key … "
        "fill what this command does not give",
    )
    lyr = p.add_mutually_exclusive_group()
    lyr.add_argument(
        "--lyrics",
        metavar="TEXT|@FILE",
        help="the words to sing, or @FILE to read them from a file",
    )
    lyr.add_argument(
        "--instrumental",
        action="store_true",
        help="no vocals (also what a song without --lyrics gets)",
    )
    p.add_argument(
        "--cover",
        metavar="SONG|FILE",
        help="a cover: a new song in CAPTION's style that follows SONG (a song "
        "id from `cantor songs`, ID:TAKE, or an audio file)",
    )
    p.add_argument(
        "--strength",
        metavar="S",
        help="with --cover: how much of the song it hears, 0-1 (1 keeps closest "
        "to it; default: the engine's)",
    )
    p.add_argument(
        "--duration", metavar="S", help="length in seconds (10-600; default: the model's choice)"
    )
    p.add_argument("--bpm", metavar="N", help="tempo (30-300)")
    p.add_argument(
        "--key", metavar="K", help='key in any spelling, e.g. "F# minor", "Ebm", "E flat minor"'
    )
    p.add_argument(
        "--time-signature", metavar="N", dest="time_signature", help="beats per bar: 2, 3, 4 or 6"
    )
    p.add_argument("--language", metavar="L", help="vocal language code, e.g. en")
    p.add_argument("--seed", metavar="N", help="-1 for random (default)")
    p.add_argument(
        "--model",
        metavar="M",
        help="model name (default: models.default; sketch = the built-in engine)",
    )
    p.add_argument(
        "--format",
        metavar="F",
        choices=SONG_FORMATS,
        help=f"audio format: {', '.join(SONG_FORMATS)} (default: songs.format)",
    )
    p.add_argument(
        "--adapter",
        metavar="NAME",
        help="a LoRA adapter of the node (`cantor adapters` lists them)",
    )
    p.add_argument(
        "--scale",
        metavar="S",
        dest="adapter_scale",
        help="how strongly the adapter applies ({:g}-{:g}; default 1.0)".format(
            *ADAPTER_SCALE_RANGE
        ),
    )
    p.add_argument(
        "--steps",
        metavar="N",
        help="diffusion steps ({}-{}; default: the model's, turbo 8, sft/base 50)".format(
            *STEPS_RANGE
        ),
    )
    p.add_argument(
        "--guidance",
        metavar="G",
        help="how closely the audio follows the caption "
        "({:g}-{:g}; ignored above 1 on turbo models)".format(*GUIDANCE_RANGE),
    )
    p.add_argument(
        "--shift",
        metavar="X",
        help="where the steps spend their effort ({:g}-{:g}; default: turbo 3, others 1)".format(
            *SHIFT_RANGE
        ),
    )
    p.add_argument(
        "--solver",
        metavar="S",
        choices=SOLVERS,
        help=f"the sampler: {', '.join(SOLVERS)} (default euler)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="also copy the song to PATH: a folder (made if missing; a path "
        "without an extension is one), or a file name (the format's "
        "extension is added when it has another)",
    )
    add_node_option(p)
    p.set_defaults(func=run)


def build_request(args) -> dict:
    """The command line → a song request dict (validated later by the shared rules)."""
    from ..song.lyrics import INSTRUMENTAL
    from ..song.request import BASIC_FIELDS, STYLE_FIELDS

    request: dict = {"caption": args.caption} if args.caption else {}
    if args.lyrics is not None:
        text = args.lyrics
        if text.startswith("@"):
            path = Path(text[1:]).expanduser()
            try:
                text = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise _BadInput("lyrics", f"cannot read {path}: {exc}") from None
        request["lyrics"] = text
    else:
        request["lyrics"] = INSTRUMENTAL
    for name in BASIC_FIELDS + STYLE_FIELDS:  # each option is named as its field
        if name in request:
            continue
        value = getattr(args, name, None)
        if value is not None:
            request[name] = value
    return request


async def with_style(node, request: dict, name: str) -> dict | None:
    """``request`` with the node's style ``name`` filling what it does not give, checked;
    None (having said why) for an unknown style, one this node lacks a part of, or a
    request that is still not a song."""
    from ..song.request import RequestError, validate
    from ..song.style import Style, apply
    from .styles_cmd import pick

    found = pick(await node.styles(), name)
    if found is None:
        print(f"cantor sing: no style named {name!r} (`cantor styles` lists them)", file=sys.stderr)
        return None
    style = Style.from_json({k: v for k, v in found.items() if k != "missing"})
    styled = apply(style, request)
    # what the style lacks here matters only where the song takes the style's own part
    theirs = {"model", "adapter", "reference"} - {p for p in ("model", "adapter") if request.get(p)}
    if request.get("reference"):
        theirs.discard("reference")
    needs = [n["text"] for n in found.get("missing") or [] if n.get("part") in theirs]
    for need in needs:
        print(f"cantor sing: the style {found['name']} needs {need}", file=sys.stderr)
    if needs:
        return None
    try:
        validate(styled)
    except RequestError as exc:
        print(f"cantor sing: {exc}", file=sys.stderr)
        return None
    return styled


class _BadInput(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def run(args) -> int:
    from ..song.request import RequestError, validate

    if args.cover is not None or args.strength is not None:
        from .cover import run_cover

        return run_cover(args, build_request, _BadInput)
    try:
        request = build_request(args)
        if not args.style:
            validate(request)
    except _BadInput as exc:
        print(f"cantor sing: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RequestError as exc:
        flag = {"adapter_scale": "--scale"}.get(exc.field)  # a flag not named as its field
        print(f"cantor sing: {f'{flag}: {exc.message}' if flag else exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(sing(request, args.output, args.node, args.style))
    except KeyboardInterrupt:
        return 130


async def sing(
    request: dict, output: str | None, node_url: str | None = None, style: str | None = None
) -> int:
    from ..client.nodeclient import NodeError

    bar = ProgressBar()
    try:
        async with node_client("sing", node_url) as node:
            if style:
                styled = await with_style(node, request, style)
                if styled is None:
                    return EXIT_USAGE
                request = styled
            try:
                answer = await node.queue_song(request)
            except NodeError as exc:
                print(f"cantor sing: {exc.message}", file=sys.stderr)
                if exc.type == "model_not_found" and request.get("model") != "sketch":
                    print(
                        "cantor sing: to make a song now without a download, add "
                        "--model sketch (the built-in Sketch engine, no AI model)",
                        file=sys.stderr,
                    )
                return EXIT_USAGE if exc.status in (400, 404, 413, 415, 422) else EXIT_FAILED
            if answer.get("note"):
                print(f"cantor sing: {answer['note']}", file=sys.stderr)
            song_id = answer["id"]
            try:
                song = await follow(node, Song(id=song_id, request=request), bar)
            except (KeyboardInterrupt, asyncio.CancelledError):
                bar.note("cancelling…")
                with contextlib.suppress(NodeError):
                    await node.cancel(song_id)
                raise
            bar.end()
            if song.state == SongState.DONE:
                for take in song.takes:
                    path = Path(take.audio)
                    if output:
                        dest = output_path(
                            Path(output).expanduser(), take, many=len(song.takes) > 1
                        )
                        path = await node.audio(song_id, dest, take=take.n)
                    print(path)
                return EXIT_OK
            if song.state == SongState.FAILED:
                print(f"cantor sing: the song failed: {song.error}", file=sys.stderr)
            else:
                print("cantor sing: the song was cancelled", file=sys.stderr)
            return EXIT_FAILED
    except NodeUnavailable as exc:
        print(f"cantor sing: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except NodeError as exc:
        bar.end()
        print(f"cantor sing: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
