"""`cantor backends [--json] [--install | --use X | --update | --rollback |
--keep-loaded on|off]`.

A thin shell over :mod:`cantor_desktop.install.backends`. For tests and support, the hardware probe
honours ``CANTOR_HW_ROOT`` (a root for /proc, /sys, /dev), ``PATH`` (where nvidia-smi and
vulkaninfo are looked for), ``CANTOR_HW_OS`` and ``CANTOR_HW_ARCH``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from .. import config
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

# backends and manifest are imported when the command runs: every `cantor` start (the node's
# too) builds this parser, and they cost a few hundred milliseconds to import.
if TYPE_CHECKING:
    from ..install import backends


def register(sub) -> None:
    p = sub.add_parser(
        "backends",
        help="what this machine can run, and switch engine backends",
        description="Show the backends this machine can run, with the evidence for each; "
        "install, switch or update engine builds.",
    )
    act = p.add_mutually_exclusive_group()
    act.add_argument(
        "--install",
        action="store_true",
        help="fetch candidates in order; keep the first that works",
    )
    act.add_argument(
        "--use",
        metavar="BACKEND",
        choices=("auto",) + config.BACKENDS,
        help="fetch BACKEND, check it loads, then pin it (cuda12, metal, vulkan, cpu, or auto)",
    )
    act.add_argument(
        "--update",
        action="store_true",
        help="fetch newer engine builds for the backends in use (not loaded: "
        "the node tries them at its next start)",
    )
    act.add_argument(
        "--rollback",
        action="store_true",
        help="return to the previous engine build (or drop a staged update)",
    )
    act.add_argument(
        "--keep-loaded",
        metavar="on|off",
        choices=("on", "off"),
        help="keep the last model loaded between songs",
    )
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")
    p.add_argument("--family", default="acestep", choices=config.FAMILIES, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


class _Printer:
    """Prints each event as it happens; download progress only on a terminal."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.progress_shown = False

    def __call__(self, event: backends.BackendEvent) -> None:
        if event.kind == "download" and event.received is not None:
            if self.tty and not self.quiet:
                print("\r" + event.message + " " * 8, end="", file=sys.stderr, flush=True)
                self.progress_shown = True
            return
        if self.progress_shown:
            print(file=sys.stderr)
            self.progress_shown = False
        out = sys.stderr if self.quiet else sys.stdout
        print(event.message, file=out, flush=True)


def _print_status(st: backends.SystemStatus) -> None:
    hw = st.hardware
    print(f"Machine: {hw.summary()}")
    for gpu in hw.gpus:
        bits = [gpu.vendor]
        if gpu.vram_mib:
            bits.append(f"{gpu.vram_mib} MiB")
        if gpu.driver:
            bits.append(f"driver {gpu.driver}")
        print(f"GPU: {gpu.name} ({', '.join(bits)})")
    for note in hw.notes:
        print(f"Note: {note}")
    if st.config_problem:
        print(f"Note: node.toml cannot be read ({st.config_problem}); showing defaults.")
    pin = st.pinned or "none (auto)"
    default = st.default or "none"
    if st.default and not st.backend(st.default).works:
        default += f" ({st.backend(st.default).state})"
    print(f"\nBackends for {st.family}, in order (default: {default}; pinned: {pin}):")
    for b in st.backends:
        tags = [b.state]
        if b.pinned:
            tags.append("pinned")
        if b.name == st.default:
            tags.append("default")
        version = f" {b.version}" if b.version else ""
        print(f"  {b.name:<7} {', '.join(tags)}{version}")
        for line in b.evidence:
            print(f"      evidence: {line}")
        print(f"      {b.message}")


def run(args) -> int:
    from ..install import backends, manifest

    family = args.family
    printer = _Printer(quiet=args.json)
    try:
        if args.keep_loaded:
            print(backends.set_keep_loaded(args.keep_loaded == "on"))
            return EXIT_OK
        if args.install:
            asyncio.run(backends.install(family, printer))
        elif args.use:
            asyncio.run(backends.use(args.use, printer))
        elif args.update:
            asyncio.run(backends.update(printer))
        elif args.rollback:
            backends.rollback(printer)
        st = backends.status(family)
    except backends.BackendError as exc:
        print(f"cantor backends: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except config.ConfigError as exc:
        print(f"cantor backends: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except manifest.ManifestError as exc:
        print(f"cantor backends: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(st.to_dict(), indent=2))
    elif not (args.install or args.use or args.update or args.rollback):
        _print_status(st)
    return EXIT_OK
