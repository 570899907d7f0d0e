"""`cantor models [--json] [--all]`, `models rm NAME`, `models import PATH`, `models verify`,
`models find [FOLDER ...] [--adopt [--copy]] [--json]`.

Exit 0 done, 1 failed, 2 bad input (unknown model, a path that does not exist).
"""

from __future__ import annotations

import json
import sys

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def register(sub) -> None:
    p = sub.add_parser(
        "models",
        help="list, remove, import and verify models",
        description="The model library: what is downloaded, partial, "
        "corrupt or missing a companion file.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable list")
    p.add_argument(
        "--all", action="store_true", help="also list catalogue models not downloaded yet"
    )
    msub = p.add_subparsers(dest="action", metavar="ACTION")
    rm = msub.add_parser("rm", help="remove a model (and companions no other model uses)")
    rm.add_argument("name")
    imp = msub.add_parser("import", help="adopt GGUF files you already have (not moved)")
    imp.add_argument("path", help="a .gguf file or a folder of them")
    msub.add_parser("verify", help="re-hash every model file")
    find = msub.add_parser(
        "find",
        help="find models other tools downloaded (Hugging Face cache, acestep.cpp) and adopt them",
        description="Looks in the Hugging Face cache, ~/acestep.cpp/models and the folders "
        "you name for ACE-Step files. --adopt checks each against the catalogue's sha256 and "
        "hard-links it into the library: no second copy, and the other tool's file is never "
        "changed.",
    )
    find.add_argument("folders", nargs="*", metavar="FOLDER", help="another folder to look in")
    find.add_argument("--adopt", action="store_true", help="adopt every new file found")
    find.add_argument(
        "--copy", action="store_true", help="copy a file that cannot be linked (another drive)"
    )
    find.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _size(n: int, approx: bool = False) -> str:
    from ..units import human_size

    return ("~" if approx else "") + human_size(n)


def _list(args) -> int:
    from ..models import library

    models = library.list_models(include_catalogue=args.all)
    if args.json:
        print(json.dumps([m.to_dict() for m in models], indent=1))
        return EXIT_OK
    rows = [("NAME", "STATE", "ON DISK", "TO GET", "")]
    for m in models:
        to_get = _size(m.download_bytes, m.download_approximate) if m.download_bytes else "-"
        problem = next((f.problem for f in m.files if f.problem), None)
        rows.append(
            (
                m.name,
                m.state,
                _size(m.size_bytes) if m.size_bytes else "-",
                to_get,
                m.display_name
                + (f"  [imported: {m.folder}]" if m.imported else "")
                + (f"  [{problem}]" if problem else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    usage = library.disk_usage()
    print(
        f"\n{usage['folder']}: {_size(usage['library_bytes'])} in models, "
        f"{_size(usage['partial_bytes'])} partial, {_size(usage['imported_bytes'])} "
        f"imported elsewhere; {_size(usage['free_bytes'])} free"
    )
    if not args.all:
        print("`cantor models --all` lists every model you can pull.")
    return EXIT_OK


def _find(args) -> int:
    from ..models import finder

    found = finder.find(args.folders)
    if not args.adopt:
        if args.json:
            print(json.dumps([f.to_json() for f in found], indent=1))
            return EXIT_OK
        for f in found:
            print(f"{f.state:<17} {_size(f.size):>10}  {f.name}  ({f.where}: {f.shown})")
            if f.note:
                print(f"{'':<17} {f.note}")
        new = [f for f in found if f.state == finder.NEW]
        if not found:
            print("no ACE-Step model files found (give a folder to look in as well)")
        elif new:
            spared = _size(sum(f.size for f in new))
            print(
                f"`cantor models find --adopt` adopts {len(new)} file(s): {spared} not downloaded"
            )
        return EXIT_OK
    offer = [f.path for f in found if f.state == finder.NEW]
    done = finder.adopt(offer, folders=args.folders, copy=args.copy)
    if args.json:
        print(json.dumps([a.to_json() for a in done], indent=1))
    else:
        for a in done:
            print(f"{a.how:<13} {a.name}  ({a.source})" + (f": {a.note}" if a.note else ""))
        adopted = sum(a.how in (finder.LINKED, finder.COPIED) for a in done)
        print(f"{adopted} adopted, {_size(sum(a.saved for a in done))} saved")
    refused = [a for a in done if a.how == finder.REFUSED]
    if refused and not args.json:
        for a in refused:
            print(f"cantor models find: {a.name} refused: {a.note}", file=sys.stderr)
    return EXIT_FAILED if refused else EXIT_OK


def run(args) -> int:
    from ..models import library
    from ..models.catalogue import UnknownModel

    try:
        if args.action is None:
            return _list(args)
        if args.action == "rm":
            result = library.remove(args.name)
            for p in result.deleted:
                print(f"deleted {p}")
            for p in result.forgotten:
                print(f"forgotten (file left in place) {p}")
            print(f"{result.name} removed, {_size(result.freed_bytes)} freed")
            return EXIT_OK
        if args.action == "import":
            results = library.import_path(args.path)
            adopted = 0
            for r in results:
                if r.kind:
                    adopted += 1
                    print(f"{r.kind:<8} {r.path}")
                else:
                    print(f"skipped  {r.path}: {r.note}")
            if not adopted:
                print("cantor models import: no ACE-Step GGUF file was imported", file=sys.stderr)
                return EXIT_FAILED
            return EXIT_OK
        if args.action == "find":
            return _find(args)
        if args.action == "verify":

            def show(r):
                print(f"{r.state:<10} {r.path}")

            checked = library.verify(on_file=show)
            bad = [r for r in checked if r.state in ("corrupt", "missing")]
            print(f"{len(checked)} file(s) checked, {len(bad)} corrupt or missing")
            return EXIT_FAILED if bad else EXIT_OK
    except library.NotInstalled as exc:
        print(f"cantor models: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except UnknownModel as exc:
        print(f"cantor models: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except library.LibraryError as exc:
        print(f"cantor models: {exc}", file=sys.stderr)
        return EXIT_USAGE if "does not exist" in str(exc) else EXIT_FAILED
    return EXIT_USAGE
