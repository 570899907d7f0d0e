"""What the editing commands share (`sing --cover`, `repaint`, `extend`, `stems`, `layer`,
`complete`, `understand`, `songs`): the node to use (as `cantor sing` finds it), the SONG
argument (a song id, ``ID:TAKE``, an id's first digits, or an audio file that is uploaded),
queueing with the node's refusals turned into exit codes, following a song with the progress
bar, and ``-o``.

Exit codes as `cantor sing`: 0 done, 1 failed (the engine's reason, or no node), 2 bad input
naming the field (the command line's, or the node's 4xx).
"""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CantorError
from ..song.record import Song, SongState
from ..song.request import RequestError
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .follow import ProgressBar, follow, output_path

INPUT_STATUSES = (400, 404, 409, 413, 415, 422)
_SONG_ARG = re.compile(r"([0-9a-f]{4,16})(?::(\d+))?")

# the request's fields as the command line names them, for error messages
OPTION_OF = {
    "region": "--from/--to",
    "region.start": "--from",
    "region.end": "--to",
    "extend": "--before/--after",
    "extend.before": "--before",
    "extend.after": "--after",
    "extend.lyrics": "--lyrics",
    "extend.context": "--context",
    "strength": "--strength",
    "track": "--track",
    "tracks": "--tracks",
    "source": "SONG",
    "source.take": "SONG's :TAKE",
    "caption": "CAPTION",
    "lyrics": "--lyrics",
    "model": "--model",
    "format": "--format",
    "seed": "--seed",
}


class CliError(CantorError):
    """Stop the command: print ``message`` (prefixed with the command) and exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.code = code


def bad_input(exc: RequestError) -> CliError:
    """A request field refused here → exit 2, naming the option the musician typed."""
    option = OPTION_OF.get(exc.field)
    where = f"{exc.field} ({option})" if option and option != exc.field else exc.field
    return CliError(f"{where}: {exc.message}", EXIT_USAGE)


SONG_HELP = "a song id from `cantor songs` (ID:TAKE for another take), or an audio file"


def add_song_argument(p, help: str = SONG_HELP) -> None:  # noqa: A002 - argparse's name
    """The SONG an edit starts from (read with :func:`parse_song_arg`)."""
    p.add_argument("song", metavar="SONG", help=help)


def add_output_option(p, what: str = "the result") -> None:
    p.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help=f"also copy {what} to PATH: a folder (made if missing; a path "
        f"without an extension is one), or a file name",
    )


def add_model_option(p, default: str) -> None:
    p.add_argument("--model", metavar="M", help=f"model name (default: {default})")


def add_edit_options(p, model_default: str) -> None:
    """What every one-song edit takes after its own options: --seed, --model, -o, --node."""
    from .node_session import add_node_option

    p.add_argument("--seed", metavar="N", help="-1 for random (default)")
    add_model_option(p, model_default)
    add_output_option(p)
    add_node_option(p)


# -- SONG ---------------------------------------------------------------------------------


@dataclass
class SongArg:
    """A SONG as typed: an audio file, or a song id (or its first digits) and a take."""

    text: str
    path: Path | None = None
    label: str = "SONG"  # how the command line names it, for messages
    song: str | None = None  # 16 hex digits, or a prefix of at least 4
    take: int | None = None


def parse_song_arg(text: str, field_name: str = "SONG") -> SongArg:
    """An existing file is a file; else ``ID``, ``ID:TAKE`` or the id's first digits."""
    path = Path(text).expanduser()
    if path.is_file():
        return SongArg(text, path=path, label=field_name)
    found = _SONG_ARG.fullmatch(text.strip().lower())
    if found:
        take = int(found.group(2)) if found.group(2) else None
        if take is not None and take < 1:
            raise RequestError(field_name, f"{text!r}: takes are counted from 1")
        return SongArg(text, song=found.group(1), take=take, label=field_name)
    if path.suffix or "/" in text or "\\" in text:
        raise RequestError(field_name, f"{text!r}: no such file")
    raise RequestError(
        field_name, f"{text!r} is neither a song id (`cantor songs` lists them) nor an audio file"
    )


@dataclass
class Source:
    """What an edit starts from, as the node will name it."""

    ref: dict[str, Any]  # {"song": id, "take": n} | {"upload": id}
    name: str  # the song's title or caption; the file's name
    title: str = ""  # the song's title ("" for none, or a file)
    caption: str = ""  # its caption (a file: its name)
    request: dict[str, Any] = field(default_factory=dict)  # the song's own request
    song: Song | None = None

    @property
    def model(self) -> str | None:
        return self.request.get("model") or None


async def find_song(node, arg: SongArg) -> Song:
    """The song an id (or the first digits of one) names; CliError 2 when none or several."""
    from ..client.nodeclient import NodeError

    assert arg.song is not None  # asked only for a SONG that is an id (types only)
    if len(arg.song) == 16:
        try:
            return Song.from_json(await node.song(arg.song))
        except NodeError as exc:
            if exc.status == 404:
                raise CliError(
                    f"{arg.label}: no song with id {arg.song} on the node "
                    f"(`cantor songs` lists them)"
                ) from None
            raise
    matches = [s for s in await node.songs() if str(s.get("id", "")).startswith(arg.song)]
    if not matches:
        raise CliError(
            f"{arg.label}: no song id starts with {arg.song} (`cantor songs` lists them)"
        )
    if len(matches) > 1:
        ids = ", ".join(str(s["id"]) for s in matches[:5])
        raise CliError(
            f"{arg.label}: {arg.song} is the start of {len(matches)} song ids ({ids}"
            f"{'…' if len(matches) > 5 else ''}); give more digits"
        )
    return Song.from_json(matches[0])


async def resolve_source(node, arg: SongArg, bar: ProgressBar | None = None) -> Source:
    """A finished take of a song on the node, or the file uploaded to the node now."""
    from ..client.nodeclient import NodeError

    if arg.path is not None:
        if bar is not None:
            bar.note(f"uploading {arg.path.name}…")
        try:
            record = await node.upload(arg.path)
        except NodeError as exc:
            if exc.status in INPUT_STATUSES:
                raise CliError(f"{arg.label}: {arg.path.name} was refused: {exc.message}") from None
            raise
        except OSError as exc:
            raise CliError(f"{arg.label}: cannot read {arg.path}: {exc}") from None
        return Source(
            {"upload": record["id"]}, name=arg.path.stem, title=arg.path.stem, caption=arg.path.stem
        )
    song = await find_song(node, arg)
    if song.state != SongState.DONE:
        why = f" ({song.error})" if song.error else ""
        raise CliError(
            f"{arg.label}: song {song.id} is {song.state}{why}; only a finished song can be edited"
        )
    take = arg.take or 1
    if song.take(take) is None:
        raise CliError(
            f"{arg.label}: song {song.id} has {len(song.takes)} take(s), not take {take}"
        )
    return Source(
        {"song": song.id, "take": take},
        name=song.name,
        title=song.title,
        caption=song.caption,
        request=dict(song.request),
        song=song,
    )


# -- the node -----------------------------------------------------------------------------


class Session:
    """``async with Session(prog, node_url) as session:`` — ``session.client`` talks to the
    running node (or the one at ``--node``), else to a private node started for the call and
    stopped after. Songs queued through :meth:`queue` are cancelled when the command is
    interrupted."""

    def __init__(self, prog: str, node_url: str | None):
        self.prog = prog
        self.node_url = node_url
        self.client: Any = None  # the node's client (nodeclient.NodeClient) once entered
        self.queued: list[str] = []
        self.finished: set[str] = set()
        self._node: Any = None

    async def __aenter__(self):
        from .node_session import NodeUnavailable, node_client

        self._node = node_client(self.prog.removeprefix("cantor "), self.node_url)
        try:
            self.client = await self._node.__aenter__()
        except NodeUnavailable as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
        return self

    async def __aexit__(self, kind, exc, tb) -> None:
        try:
            if kind is not None:  # interrupted, or stopped by an error: nothing left behind
                await self._cancel_unfinished()
        finally:
            await self._node.__aexit__(kind, exc, tb)

    async def _cancel_unfinished(self) -> None:
        from ..client.nodeclient import NodeError

        for song_id in self.queued:
            if song_id not in self.finished:
                try:
                    await self.client.cancel(song_id)
                except NodeError:
                    pass

    async def queue(self, request: dict[str, Any]) -> str:
        """Queue a song; the node's refusal becomes CliError (2 for bad input, naming the
        field; a missing base model also says how to get it)."""
        from ..client.nodeclient import NodeError

        try:
            answer = await self.client.queue_song(request)
        except NodeError as exc:
            if exc.status in INPUT_STATUSES:
                message = exc.message
                if exc.field == "model" and "base model" in message:
                    message += "\n" + await self._base_hint()
                elif exc.type == "model_not_found" and request.get("model") != "sketch":
                    message += (
                        "\nto make it now without a download, add --model sketch "
                        "(the built-in Sketch engine, no AI model)"
                    )
                raise CliError(message, EXIT_USAGE) from None
            raise
        if answer.get("note"):
            print(f"{self.prog}: {answer['note']}", file=sys.stderr)
        self.queued.append(answer["id"])
        return answer["id"]

    async def _base_hint(self) -> str:
        """How to get the base model, with its size as the node's catalogue says."""
        from ..song.edits import BASE_PULL, base_offer
        from ..client.nodeclient import NodeError
        from ..units import human_size

        size = ""
        try:
            offer = base_offer((await self.client.models(all=True)).get("models", []))
            if offer and offer.get("download_bytes"):
                size = f" ({human_size(offer['download_bytes'])} to download)"
        except NodeError:
            pass
        return f"get it{size} with:  cantor pull {BASE_PULL}   — then run this command again"

    async def follow(self, song_id: str, request: dict[str, Any], bar: ProgressBar) -> Song:
        song = await follow(self.client, Song(id=song_id, request=request), bar)
        bar.end()
        if song.is_finished:
            self.finished.add(song_id)
        return song


def run_async(prog: str, coro) -> int:
    """Run a command's coroutine; CliError and node errors become their exit codes."""
    from ..client.nodeclient import NodeError

    try:
        return asyncio.run(coro)
    except CliError as exc:
        return report(prog, exc)
    except NodeError as exc:
        print(f"{prog}: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.status in INPUT_STATUSES else EXIT_FAILED
    except KeyboardInterrupt:
        return 130


def ended(prog: str, song: Song) -> int:
    """A song that did not finish well: say why; its exit code."""
    if song.state == SongState.FAILED:
        print(f"{prog}: the song failed: {song.error}", file=sys.stderr)
    else:
        print(f"{prog}: the song was cancelled", file=sys.stderr)
    return EXIT_FAILED


async def deliver(node, song: Song, output: str | None) -> list[Path]:
    """Print (and with ``-o`` copy) a finished song's takes, as `cantor sing` does."""
    paths = []
    for take in song.takes:
        path = Path(take.audio)
        if output:
            dest = output_path(Path(output).expanduser(), take, many=len(song.takes) > 1)
            path = await node.audio(song.id, dest, take=take.n)
        print(path)
        paths.append(path)
    return paths


def run_edit(
    prog: str, args, request_maker, *, needs_models: bool = False, hear_file: bool = False
) -> int:
    """A one-song edit from the command line: ``request_maker(args)`` (the command's
    options read, e.g. ``--lyrics @FILE``), SONG and the fields checked first (exit 2 before
    any node is asked), then :func:`edit_one`."""
    try:
        make_request = request_maker(args)
        arg = parse_song_arg(args.song)
        precheck(make_request)
    except RequestError as exc:
        return report(prog, bad_input(exc))
    except CliError as exc:
        return report(prog, exc)
    return run_async(
        prog,
        edit_one(
            prog,
            args.node,
            arg,
            make_request,
            args.output,
            needs_models=needs_models,
            hear_file=hear_file,
        ),
    )


def report(prog: str, exc: CliError) -> int:
    for line in exc.message.splitlines():
        print(f"{prog}: {line}", file=sys.stderr)
    return exc.code


async def hear(node, source: Source, bar: ProgressBar) -> None:
    """Fill a file's facts from what the engine hears in it (caption, tempo, key, time
    signature, language), for an edit that names no caption."""
    from ..client.nodeclient import NodeError

    bar.note(f"listening to {source.name} for its caption, tempo and key…")
    try:
        heard = await node.understand(source.ref)
    except NodeError as exc:
        raise CliError(
            f"CAPTION: none given, and the engine could not hear one in "
            f"{source.name} ({exc.message}); give a caption",
            EXIT_USAGE if exc.status in INPUT_STATUSES else EXIT_FAILED,
        ) from None
    from ..song.request import validate

    for name in ("caption", "bpm", "key", "time_signature", "language"):
        value = heard.get(name)
        try:  # only what a request may carry
            validate({"caption": "x", name: value})
        except RequestError:
            continue
        if value not in (None, ""):
            source.request[name] = value
    if source.request.get("caption"):
        source.caption = source.request["caption"]
    shown = ", ".join(
        str(v)
        for v in (
            source.request.get("caption"),
            source.request.get("bpm") and f"{source.request['bpm']:g} BPM",
            source.request.get("key"),
        )
        if v
    )
    bar.note(f"heard: {shown}")


async def edit_one(
    prog: str,
    node_url: str | None,
    arg: SongArg,
    make_request,
    output: str | None,
    *,
    needs_models: bool = False,
    hear_file: bool = False,
) -> int:
    """The shape of every one-song edit: find the source (``hear_file``: a file's caption,
    tempo and key from the engine), build its request (``make_request(source, models)``,
    which may raise RequestError), queue it, follow it, deliver it."""
    from ..song.request import validate

    bar = ProgressBar()
    async with Session(prog, node_url) as session:
        node = session.client
        source = await resolve_source(node, arg, bar)
        if hear_file and "upload" in source.ref:
            await hear(node, source, bar)
        models = (await node.models()).get("models", []) if needs_models else []
        try:
            request = make_request(source, models)
            validate(request)
        except RequestError as exc:
            raise bad_input(exc) from None
        song_id = await session.queue(request)
        song = await session.follow(song_id, request, bar)
        if song.state != SongState.DONE:
            return ended(prog, song)
        await deliver(node, song, output)
        return EXIT_OK


PLACEHOLDER = Source({"upload": "0" * 16}, name="song", caption="song")
"""A stand-in source to check a command line's fields before any node is started."""


def precheck(make_request) -> None:
    """Check the request the command line makes (on a stand-in source) before starting or
    asking a node: bad input exits 2 at once, naming the option."""
    from ..song.request import validate

    try:
        validate(make_request(PLACEHOLDER, []))
    except RequestError as exc:
        raise bad_input(exc) from None


def read_lyrics(text: str | None) -> str | None:
    """``--lyrics TEXT`` or ``@FILE``."""
    if text is None or not text.startswith("@"):
        return text
    path = Path(text[1:]).expanduser()
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"lyrics (--lyrics): cannot read {path}: {exc}") from None
