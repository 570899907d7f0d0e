"""`cantor pull MODEL [--lm-size S] [--no-engine]`: download a model and an engine for it.

Prints the total still to download first, then a live line per file with the total, speed
and time left. Ctrl-C keeps the partial files; the next pull resumes them.
Exit 0 ready, 1 failed (the reason is printed) or the model is ready but no engine could be
installed (e.g. offline), 2 bad input (unknown model or LM size).
"""

from __future__ import annotations

import asyncio
import sys
import time

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

NO_ENGINE = (
    "Model ready. No engine yet: {reason}. Run `cantor backends --install` when you are online."
)


def register(sub) -> None:
    p = sub.add_parser(
        "pull",
        help="download a model (and an engine for it)",
        description="Download a model's files (DiT, text encoder, VAE and a language model "
        "for vocals), resuming partial downloads, then make sure an engine is "
        "installed. MODEL is e.g. acestep-v15-turbo (= Q8_0) or "
        "acestep-v15-xl-sft-Q6_K; `cantor models --all` lists them.",
        epilog="Exit status: 0 the model and an engine for it are ready; 1 the pull failed, "
        "or the model is ready but no engine could be installed (e.g. offline: run "
        "`cantor backends --install` later); 2 bad input (unknown model or LM size).",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument(
        "--lm-size",
        dest="lm_size",
        metavar="S",
        choices=("0.6B", "1.7B", "4B"),
        help="language model for vocals: 0.6B, 1.7B or 4B "
        "(default: node.toml models.lm; auto picks by memory)",
    )
    p.add_argument(
        "--no-engine",
        dest="no_engine",
        action="store_true",
        help="download the model files only, not the engine",
    )
    p.set_defaults(func=run)


def duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "--"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Printer:
    """Turns PullEvents into lines: live (\\r) on a terminal, every few seconds otherwise."""

    def __init__(self, out=None, live: bool | None = None):
        from ..units import human_size

        self.size = human_size
        self.out = out = out or sys.stdout
        self.live = out.isatty() if live is None else live
        self.last = 0.0
        self.width = 0
        self.done = None  # the final "done" event (engine_ready, engine_error)

    def _line(self, text: str, final: bool = False) -> None:
        if self.live:
            pad = max(0, self.width - len(text))
            self.out.write("\r" + text + " " * pad + ("\n" if final else ""))
            self.width = 0 if final else len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, e) -> None:
        approx = "~" if e.approximate else ""
        if e.type == "plan":
            if not e.files:
                self._line(f"{e.model}: all files already downloaded", True)
                return
            self._line(
                f"{e.model}: {approx}{self.size(e.total)} to download "
                f"({len(e.files)} file{'s' if len(e.files) != 1 else ''})"
                f"{' — sizes approximate (hub not reachable)' if e.approximate else ''}",
                True,
            )
            for f in e.files:
                resumed = " (resuming)" if f["state"] == "partial" else ""
                self._line(
                    f"  {f['kind']:<8} {f['name']}  {approx}{self.size(f['to_get'])}{resumed}", True
                )
        elif e.type == "progress":
            now = time.monotonic()
            if now - self.last < (0.2 if self.live else 5.0):
                return
            self.last = now
            pct = f"{100 * e.file_received / e.file_total:3.0f}%" if e.file_total else "  ?%"
            tot = f"{100 * e.received / e.total:3.0f}%" if e.total else "  ?%"
            self._line(
                f"  {e.file}  {pct}  | total {tot} {self.size(e.received)}/"
                f"{approx}{self.size(e.total)}  {self.size(e.speed)}/s  "
                f"{duration(e.eta)} left"
            )
        elif e.type == "file_done":
            check = "sha256 verified" if e.verified else "size checked (no sha256 known)"
            self._line(f"  {e.file}  done, {self.size(e.file_received)}, {check}", True)
        elif e.type == "engine" and (e.engine or {}).get("kind") == "download":
            now = time.monotonic()  # engine archive progress: one live line
            if now - self.last >= (0.2 if self.live else 5.0):
                self.last = now
                self._line(f"  {e.message}")
        elif e.type == "engine" and e.engine_ready is False:
            return  # said once, at the end (see run)
        elif e.type in ("engine", "catalogue") and e.message:
            self._line(f"{e.message}", True)
        elif e.type == "done":
            self.done = e
            if e.engine_ready is not False:
                self._line(e.message, True)


def run(args) -> int:
    from ..fetch import download as dl
    from ..models import pull as pl
    from ..models.library import LibraryError

    printer = Printer()

    async def go():
        from ..install import backends

        return await pl.pull(
            args.model,
            on_event=printer,
            lm_size=args.lm_size,
            ensure_engine=None if args.no_engine else backends.ensure_engine,
        )

    try:
        files = asyncio.run(go())
    except pl.BadModelName as exc:
        print(f"cantor pull: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            f"\ncantor pull: interrupted; partial files are kept: run `cantor pull "
            f"{args.model}` again to resume",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except (pl.PullError, dl.DownloadError, LibraryError) as exc:
        print(f"\ncantor pull: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the engine step's own errors (backends) end the same way
        print(f"\ncantor pull: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not files.builtin:
        print(f"folder: {files.models_dir}")
    done = printer.done
    if done is not None and done.engine_ready is False:
        print(NO_ENGINE.format(reason=done.engine_error), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
