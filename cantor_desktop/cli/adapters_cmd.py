"""`cantor adapters [--json]`, `adapters add PATH [--name N]`, `adapters rm NAME`: LoRA
adapters, through the node (the running one, or a private one started for the call).

A path is sent as a path to this machine's node (it copies the file or the PEFT folder);
to a node of another machine (``--node URL``) a ``.safetensors`` file is uploaded (a PEFT
folder is added on its own machine). Exit 0 done, 1 failed, 2 refused (not an adapter, made
for another model, a name that clashes, in use, unknown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from ..units import human_size
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def register(sub) -> None:
    from .node_session import add_node_option

    p = sub.add_parser(
        "adapters",
        help="list, add and remove LoRA adapters",
        description="LoRA adapters for ACE-Step's DiT: a .safetensors file "
        "(ComfyUI) or a PEFT folder. A song uses one with "
        "`cantor sing … --adapter NAME --scale S`.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable list")
    add_node_option(p)
    asub = p.add_subparsers(dest="action", metavar="ACTION")
    add = asub.add_parser(
        "add", help="copy an adapter in (checked: one made for another model is refused)"
    )
    add.add_argument("path", help="a .safetensors file or a PEFT adapter folder")
    add.add_argument("--name", help="its name (default: the file's or folder's name)")
    rm = asub.add_parser("rm", help="remove an adapter")
    rm.add_argument("name")
    for action in (add, rm):  # also after the action; SUPPRESS keeps the one given before
        action.add_argument(
            "--node",
            metavar="URL",
            default=argparse.SUPPRESS,
            help="the node to use (as `cantor adapters --node URL`)",
        )
    p.set_defaults(func=run)


def show(answer: dict, as_json: bool) -> None:
    items = answer.get("adapters") or []
    if as_json:
        print(json.dumps(answer, indent=1))
        return
    if not items:
        print(
            f"No adapters yet ({answer.get('folder')}). "
            f"`cantor adapters add PATH` adds a .safetensors file or a PEFT folder."
        )
        return
    rows = [("NAME", "MADE FOR", "FORMAT", "SIZE", "RANK")]
    for a in items:
        made_for = a.get("made_for") or f"cannot be used: {a.get('problem')}"
        rows.append(
            (
                a["name"],
                made_for,
                (a.get("format") or "-").upper(),
                human_size(int(a.get("size") or 0)),
                str(a.get("rank") or "-"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    print(f"\n{answer.get('folder')}")


def run(args) -> int:
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


async def _this_homes(url: str) -> bool:
    """Whether the node at ``url`` is this home's own (it proves this home's token, not
    one given in CANTOR_NODE_TOKEN): a path on this machine is then on the node's."""
    from ..auth.access import TokenError, home_token
    from ..client.nodeclient import OURS, which_node

    try:
        token = await asyncio.to_thread(home_token)
    except TokenError:
        token = None
    return await which_node(url, token=token or "") == OURS


async def _run(args) -> int:
    from ..client.nodeclient import NodeError
    from .node_session import NodeUnavailable, node_client

    try:
        async with node_client("adapters", args.node) as node:
            local = not args.node or await _this_homes(node.base_url)
            if args.action is None:
                show(await node.adapters(), args.json)
            elif args.action == "add":
                added = await _add(node, args.path, args.name, local)
                print(
                    f"added {added['name']}: made for {added.get('made_for')}, "
                    f"{human_size(int(added.get('size') or 0))} ({added.get('path')})"
                )
                print(f'use it: cantor sing "…" --adapter {added["name"]} --scale 1.0')
            elif args.action == "rm":
                answer = await node.remove_adapter(args.name)
                print(
                    f"removed {args.name}, {human_size(int(answer.get('freed_bytes') or 0))} freed"
                )
            return EXIT_OK
    except NodeUnavailable as exc:
        print(f"cantor adapters: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except _Refused as exc:
        print(f"cantor adapters: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NodeError as exc:
        print(f"cantor adapters: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if 400 <= exc.status < 500 else EXIT_FAILED


class _Refused(Exception):
    pass


async def _add(node, path_text: str, name: str | None, local: bool) -> dict:
    """By path to this machine's node; uploaded (a .safetensors file only) to another's."""
    path = Path(path_text).expanduser()
    if not path.exists():
        raise _Refused(f"{path} does not exist")
    if local:
        return await node.add_adapter(path.resolve(), name)
    if path.is_dir():
        raise _Refused(
            f"{path} is a folder: a PEFT folder can be added only on the node's "
            f"own machine (`cantor adapters add` there); a .safetensors file can "
            f"be sent from here"
        )
    return await node.upload_adapter(path, name=name)
