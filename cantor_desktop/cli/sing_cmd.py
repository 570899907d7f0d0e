"""`cantor sing CAPTION …`: one song through the node, with a progress bar on stderr.

Uses the running node, or starts a private one for the call and stops it after. Prints the
song's file path(s) on stdout. Exit 0 done, 1 the song failed (the reason is printed),
2 bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
from pathlib import Path

from ..song import Song, SongEvent, SongState, Take
from .node_session import NodeUnavailable, add_node_option, node_client

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(sub) -> None:
    from ..config import SONG_FORMATS
    from ..song_request import (
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
    )
    p.add_argument("caption", help="the style: genre, instruments, mood")
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
    request: dict = {"caption": args.caption}
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
        request["lyrics"] = "[Instrumental]"
    for name in (
        "duration",
        "bpm",
        "key",
        "time_signature",
        "language",
        "seed",
        "model",
        "format",
        "adapter",
        "adapter_scale",
        "steps",
        "guidance",
        "shift",
        "solver",
    ):
        value = getattr(args, name, None)
        if value is not None:
            request[name] = value
    return request


class _BadInput(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def run(args) -> int:
    from ..song_request import RequestError, validate

    if args.cover is not None or args.strength is not None:
        from .cover import run_cover

        return run_cover(args, build_request, _BadInput)
    try:
        request = build_request(args)
        validate(request)
    except _BadInput as exc:
        print(f"cantor sing: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RequestError as exc:
        flag = {"adapter_scale": "--scale"}.get(exc.field)  # a flag not named as its field
        print(f"cantor sing: {f'{flag}: {exc.message}' if flag else exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(sing(request, args.output, args.node))
    except KeyboardInterrupt:
        return 130


class ProgressBar:
    """One line on stderr: bar, percent, stage, time left (redrawn in place on a terminal)."""

    WIDTH = 28

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = ""
        self.last_plain = 0.0
        self.last_stage: str | None = None

    def show(self, stage: str | None, progress: float, eta: float | None) -> None:
        filled = int(round(progress * self.WIDTH))
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        left = f"  {_clock(eta)} left" if eta is not None and progress < 1 else ""
        line = f"[{bar}] {progress * 100:5.1f}%  {stage or 'queued':<7}{left}"
        if line == self.last:
            return
        self.last = line
        if self.tty:
            width = shutil.get_terminal_size((80, 20)).columns
            self.stream.write("\r" + line[: width - 1].ljust(width - 1))
            self.stream.flush()
        elif (
            time.monotonic() - self.last_plain >= 1.0 or progress >= 1.0 or stage != self.last_stage
        ):
            # not a terminal (a log, a pipe): a line per stage, then at most one a second
            self.last_plain = time.monotonic()
            self.last_stage = stage
            self.stream.write(line.rstrip() + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()
            self.last = ""


def output_path(dest: Path, take: "Take", *, many: bool) -> Path:
    """Where ``-o`` puts a take: into a folder (an existing one, or a path without an
    extension, made now), or as a file named by the user with the take's own extension
    (``_takeN`` added when the song has several)."""
    ext = Path(take.file_name).suffix
    if dest.is_dir() or not dest.suffix:
        dest.mkdir(parents=True, exist_ok=True)
        return dest
    if dest.suffix.lower() != ext.lower():
        dest = dest.with_name(dest.name + ext)
    if many:
        dest = dest.with_name(f"{dest.stem}_take{take.n}{dest.suffix}")
    return dest


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(int(round(seconds)), 0)
    return f"{seconds // 60}:{seconds % 60:02d}"


async def sing(request: dict, output: str | None, node_url: str | None = None) -> int:
    from ..nodeclient import NodeError

    bar = ProgressBar()
    try:
        async with node_client("sing", node_url) as node:
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
                song = await _follow(node, Song(id=song_id, request=request), bar)
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


class EventShower:
    """A song's record → the progress bar. Every stage the CLI receives gets drawn (a line of
    its own when stderr is not a terminal), even when no progress event follows it: a short
    song can pass a stage in milliseconds, or be past it before the stream connects (a late
    subscriber gets the current state only). ``done`` always ends on a 100% line."""

    def __init__(self, bar: ProgressBar):
        self.bar = bar

    def __call__(self, song: "Song") -> bool:
        """Show the song as it is now; True when it has ended."""
        if song.state == SongState.DONE:
            self.bar.show("done", 1.0, None)
        elif song.state == SongState.QUEUED:
            self.bar.show(None, 0.0, None)
        elif song.state == SongState.RUNNING:
            self.bar.show(song.stage, song.progress, song.eta)
        return song.is_finished


async def _follow(node, song: "Song", bar: ProgressBar) -> "Song":
    """Fold the song's events into its record until it ends; reconnects if the stream
    drops, and asks for the song itself if it never ends on the stream."""
    from ..nodeclient import NodeError

    shower = EventShower(bar)
    for _attempt in range(5):
        try:
            async with contextlib.aclosing(node.events(song.id)) as events:
                async for kind, data in events:
                    song.apply(SongEvent.from_sse(kind, data, song.id))
                    if shower(song):
                        return song
        except NodeError as exc:
            if exc.status:
                raise
            await asyncio.sleep(0.5)
    song = Song.from_json(await node.song(song.id))
    shower(song)
    return song
