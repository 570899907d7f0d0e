"""`cantor export SONG -o DIR`: a song as a file a DAW understands.

SONG is a song id of the node (its takes fetched through the node's API: the running node,
or a private one started for the call, or ``--node URL``) or an audio file (exported
directly; tags from the sidecar beside it when there is one). Options not given come from
node.toml's [export] table, and the ones given are remembered there (``--no-remember`` to
leave it as it is). Prints each exported file's path. Exit 0 done, 1 failed, 2 bad input.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from .node_session import NodeUnavailable, add_node_option, node_client
from .follow import ProgressBar

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def register(sub) -> None:
    from ..export import DEFAULT_PATTERN, FORMATS

    p = sub.add_parser(
        "export",
        help="export a song for a DAW (WAV, FLAC, AIFF, MP3)",
        description="Export a song's takes as files a DAW understands: the "
        "format, sample rate and loudness you choose, tempo and "
        "key written into the file. The song's own files are "
        "never changed.",
    )
    p.add_argument(
        "song", help="a song id (see the app's Songs page or `cantor sing`), or an audio file"
    )
    p.add_argument(
        "--format", metavar="F", help=f"{', '.join(FORMATS)} (default: export.format, else wav24)"
    )
    p.add_argument("--rate", metavar="HZ", help="48000 or 44100 (default: export.rate)")
    p.add_argument(
        "--loudness",
        metavar="LUFS",
        help="off, or a target such as -14 (streaming) or -16 (default: export.loudness, else off)",
    )
    p.add_argument(
        "--peak",
        metavar="DBTP",
        help="true-peak ceiling with a loudness target, e.g. -1 (default: export.peak, else -1)",
    )
    p.add_argument(
        "--take", metavar="N|all", default="all", help="which take of the song (default: all)"
    )
    p.add_argument(
        "--pattern",
        metavar="P",
        help=f"file name pattern (default: export.pattern, else {DEFAULT_PATTERN})".replace(
            "{", "{{"
        )
        .replace("}", "}}")
        .replace("%", "%%"),
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        required=True,
        help="folder for the exported files (made if missing)",
    )
    p.add_argument(
        "--no-remember",
        dest="remember",
        action="store_false",
        help="do not save the options given in node.toml",
    )
    add_node_option(p)
    p.set_defaults(func=run)


def _options(args):
    from .. import config
    from ..export import ExportOptions

    cfg, _err = config.load_or_defaults()
    base = ExportOptions.from_config(cfg)
    given = {
        name: getattr(args, name)
        for name in ("format", "rate", "peak", "pattern")
        if getattr(args, name) is not None
    }
    if args.loudness is not None:
        given["loudness"] = args.loudness
    return ExportOptions.parse(base=base, **given), given


def _takes(text: str) -> int | None:
    """None for all takes."""
    if text.strip().lower() == "all":
        return None
    try:
        take = int(text)
    except ValueError:
        take = 0
    if take < 1:
        raise ValueError(f"take: {text!r} is not a take; write a number from 1, or all")
    return take


def run(args) -> int:
    from ..export import ExportError

    try:
        options, given = _options(args)
        take = _takes(args.take)
    except (ExportError, ValueError) as exc:
        print(f"cantor export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out_dir = Path(args.output).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        print(f"cantor export: output: {out_dir} is a file, not a folder", file=sys.stderr)
        return EXIT_USAGE
    source = Path(args.song).expanduser()
    try:
        if source.is_file():
            if take not in (None, 1):
                print("cantor export: take: an audio file has one take", file=sys.stderr)
                return EXIT_USAGE
            code = _export_files([(source, None)], out_dir, options)
        else:
            code = asyncio.run(_export_song(args.song, take, out_dir, options, args.node))
    except KeyboardInterrupt:
        return 130
    if code == EXIT_OK and given and args.remember:
        _remember(options, given)
    return code


def _remember(options, given: dict) -> None:
    """Save the options given on the command line (only those) in node.toml."""
    from .. import config

    changes = {
        key: value
        for key, value in options.config_changes().items()
        if key.split(".", 1)[1] in given
    }
    try:
        config.update(changes)
    except config.ConfigError as exc:
        print(f"cantor export: the choices were not saved: {exc}", file=sys.stderr)


def _export_files(items, out_dir: Path, options) -> int:
    """Export (path, meta) pairs one after another, with a progress bar; print each path."""
    from ..export import ExportError, export_file

    bar = ProgressBar()
    for index, (path, meta) in enumerate(items):
        label = f"take {meta.take}" if meta is not None and len(items) > 1 else "export"

        def show(fraction: float, stage: str, label=label) -> None:
            bar.show(f"{label}: {stage}", fraction, None)

        try:
            result = export_file(path, out_dir, options, meta=meta, progress=show)
        except ExportError as exc:
            bar.end()
            print(f"cantor export: {exc}", file=sys.stderr)
            return EXIT_USAGE if exc.field in ("source", "output") and index == 0 else EXIT_FAILED
        except OSError as exc:
            bar.end()
            print(f"cantor export: {exc}", file=sys.stderr)
            return EXIT_FAILED
        bar.end()
        print(result.path, flush=True)
    return EXIT_OK


async def _export_song(
    song_id: str, take: int | None, out_dir: Path, options, node_url: str | None
) -> int:
    from ..export import SongMeta
    from ..client.nodeclient import NodeError, check_song_id

    try:
        check_song_id(song_id)
    except ValueError:
        print(
            f"cantor export: song: {song_id!r} is neither a song id nor an audio file",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        async with node_client("export", node_url) as node:
            try:
                song = await node.song(song_id)
            except NodeError as exc:
                print(f"cantor export: {exc.message}", file=sys.stderr)
                return EXIT_USAGE if exc.status == 404 else EXIT_FAILED
            if song.get("state") != "done":
                print(
                    f"cantor export: song {song_id} has no audio (it is {song.get('state')})",
                    file=sys.stderr,
                )
                return EXIT_FAILED
            files = [f for f in song.get("takes") or song.get("files") or [] if isinstance(f, dict)]
            numbers = [_take_number(f, i + 1) for i, f in enumerate(files)]
            if take is not None and take not in numbers:
                print(
                    f"cantor export: take: song {song_id} has takes "
                    f"{', '.join(map(str, numbers)) or 'none'}, not {take}",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            wanted = [n for n in numbers if take is None or n == take]
            with tempfile.TemporaryDirectory(prefix="cantor-export-") as tmp:
                items = []
                for n in wanted:
                    # the node's own file, fetched through its API (it may be another
                    # machine's); exported from a private copy
                    path = await node.audio(song_id, Path(tmp) / f"take{n}", take=n)
                    items.append((path, SongMeta.from_song(song, n, _sidecar(files, n))))
                return await asyncio.to_thread(_export_files, items, out_dir, options)
    except NodeUnavailable as exc:
        print(f"cantor export: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except NodeError as exc:
        print(f"cantor export: {exc.message}", file=sys.stderr)
        return EXIT_FAILED


def _take_number(item: dict, default: int) -> int:
    try:
        return int(item.get("n") or item.get("take") or default)
    except (TypeError, ValueError):
        return default


def _sidecar(files: list[dict], take: int) -> dict | None:
    """The take's sidecar when this machine can read it (a local node): the LM's values
    live only there. None for another machine's node (its song JSON says the rest)."""
    import json

    for index, item in enumerate(files):
        if _take_number(item, index + 1) == take and item.get("sidecar"):
            try:
                data = json.loads(Path(item["sidecar"]).read_text("utf-8"))
            except (OSError, ValueError):
                return None
            return data if isinstance(data, dict) and data.get("cantor_song") else None
    return None
