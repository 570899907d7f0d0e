"""`cantor styles [--json]`, `styles save NAME --from SONG[:TAKE]`, `styles rm NAME`,
`styles rename NAME NEW`, `styles export NAME FILE`, `styles import FILE [--replace]`: a
song's recipe kept under a name by the node, for `cantor sing --style NAME`.

Exit 0 done, 1 failed, 2 refused (an unknown style or song, a name taken, a bad file).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

PROG = "cantor styles"


def register(sub) -> None:
    from .node_session import add_node_option

    p = sub.add_parser(
        "styles",
        help="list, save, rename, remove, export and import styles",
        description="A style is a song's recipe kept under a name: caption, reference sound, "
        "adapter, tempo, key, time signature, language, advanced settings and a seed policy. "
        'Use one with `cantor sing --style NAME "…"`.',
    )
    p.add_argument("--json", action="store_true", help="machine-readable list")
    add_node_option(p)
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    save = ssub.add_parser("save", help="keep a song's recipe as a style")
    save.add_argument("name")
    save.add_argument("--from", dest="source", required=True, metavar="SONG[:TAKE]")
    save.add_argument(
        "--reference",
        metavar="SONG[:TAKE]",
        help="a take whose sound the style borrows (default: the song's own reference)",
    )
    save.add_argument("--seed", default="random", help='"random" (default) or a fixed seed')
    rm = ssub.add_parser("rm", help="remove a style")
    rm.add_argument("name")
    rename = ssub.add_parser("rename", help="give a style another name")
    rename.add_argument("name")
    rename.add_argument("new")
    export = ssub.add_parser("export", help="write a style as one file (with its sound)")
    export.add_argument("name")
    export.add_argument("file")
    imp = ssub.add_parser("import", help="take in a style file")
    imp.add_argument("file")
    imp.add_argument("--replace", action="store_true", help="replace a style of that name")
    p.set_defaults(func=run)


def _take(text: str) -> dict:
    song, _, take = text.partition(":")
    return {"song": song, "take": int(take) if take.isdigit() else 1}


def show(styles: list[dict], as_json: bool) -> None:
    if as_json:
        print(json.dumps(styles, indent=1, ensure_ascii=False))
        return
    if not styles:
        print("No styles yet: `cantor styles save NAME --from SONG` keeps a song's recipe.")
        return
    for s in styles:
        f = s.get("fields") or {}
        facts = [
            str(f[k]) + (" BPM" if k == "bpm" else "")
            for k in ("bpm", "key", "language", "model", "adapter")
            if f.get(k)
        ]
        if s.get("reference"):
            facts.append(f"sound: {s.get('reference_name') or 'kept'}")
        facts.append(f"seed {s.get('seed')}")
        print(f"{s['name']}: {f.get('caption', '')}")
        print(f"    {', '.join(facts)}")
        for need in s.get("missing") or []:
            print(f"    needs {need['text']}")


def run(args) -> int:
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


async def _run(args) -> int:
    from ..client.nodeclient import NodeError
    from .node_session import NodeUnavailable, node_client

    try:
        async with node_client("styles", args.node) as node:
            if args.action is None:
                show(await node.styles(), args.json)
            elif args.action == "save":
                seed: int | str = int(args.seed) if args.seed.isdigit() else args.seed
                body: dict = {"from": _take(args.source), "seed": seed}
                if args.reference:
                    body["reference"] = _take(args.reference)
                kept = await node.save_style(args.name, **body)
                print(f"saved style {kept['name']}")
            elif args.action == "rm":
                print(f"removed style {(await node.remove_style(args.name))['name']}")
            elif args.action == "rename":
                print(f"renamed to {(await node.rename_style(args.name, args.new))['name']}")
            elif args.action == "export":
                data = await node.export_style(args.name)
                Path(args.file).expanduser().write_bytes(data)
                print(f"{args.file}: style {args.name}, {len(data)} bytes")
            elif args.action == "import":
                try:
                    data = Path(args.file).expanduser().read_bytes()
                except OSError as exc:
                    print(f"{PROG}: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
                    return EXIT_USAGE
                kept = await node.import_style(data, replace=args.replace)
                print(f"imported style {kept['name']}")
            return EXIT_OK
    except NodeUnavailable as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except NodeError as exc:
        print(f"{PROG}: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if 400 <= exc.status < 500 else EXIT_FAILED


def pick(styles: list[dict], name: str) -> dict | None:
    """The style named ``name`` (case ignored), as the node listed it."""
    wanted = name.strip().casefold()
    return next((s for s in styles if s["name"].casefold() == wanted), None)
