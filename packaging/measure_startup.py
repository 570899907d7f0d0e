"""Frozen against unfrozen start-up, in the same run: process start to the main window's
first paint, measured from the outside (the child prints "first-paint" and quits).

    .venv/bin/python packaging/measure_startup.py dist/cantor/cantor-desktop [--runs 3]

Each side runs once to warm the disk cache, then RUNS times alternately, each time with a
fresh CANTOR_HOME, offscreen; the medians and their ratio (frozen / unfrozen) are printed:

    startup frozen 0.61 s  unfrozen 0.83 s  ratio 0.73
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


LEFTOVERS: list[str] = []


def _end_leftovers(home: str, argv: list[str]) -> None:
    """The app must stop the node it started when it quits; end (and count) any process
    still running with this run's CANTOR_HOME."""
    from cantor_desktop.bundle.selftest import end_leftovers

    pids = end_leftovers(home, grace=2.0)  # a clean quit may still be stopping its node
    if pids:
        LEFTOVERS.append(f"{Path(argv[0]).name}: pids {pids}")


def first_paint(argv: list[str], timeout: float = 90.0) -> float:
    """Seconds from spawning ``argv + ["--measure-startup"]`` to its "first-paint" line."""
    with tempfile.TemporaryDirectory(prefix="cantor-startup-") as home:
        env = dict(
            os.environ,
            CANTOR_HOME=home,
            QT_QPA_PLATFORM="offscreen",
            PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        )
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*argv, "--measure-startup"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            cwd=home,
        )
        seconds = None
        try:
            deadline = t0 + timeout
            for line in proc.stdout:
                if line.startswith("first-paint "):
                    seconds = time.perf_counter() - t0
                    if "failed" in line or "timeout" in line:
                        seconds = None
                    break
                if time.perf_counter() > deadline:
                    break
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _end_leftovers(home, argv)
        if seconds is None:
            raise SystemExit(
                f"measure_startup: {' '.join(argv)} did not paint a window "
                f"(exit code {proc.returncode})"
            )
        return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("frozen", help="the frozen executable (dist/cantor/cantor-desktop)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the Python that runs the unfrozen app (default: this one)",
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    frozen = [str(Path(args.frozen).resolve())]
    unfrozen = [args.python, "-m", "cantor_desktop.bundle.frozen_main"]
    first_paint(frozen)
    first_paint(unfrozen)
    times: dict[str, list[float]] = {"frozen": [], "unfrozen": []}
    for _ in range(max(args.runs, 1)):
        times["frozen"].append(first_paint(frozen))
        times["unfrozen"].append(first_paint(unfrozen))
    f, u = statistics.median(times["frozen"]), statistics.median(times["unfrozen"])
    print(
        f"startup frozen {f:.2f} s  unfrozen {u:.2f} s  ratio {f / u:.2f}  "
        f"(median of {len(times['frozen'])}; goal ratio <= 1.2)"
    )
    if LEFTOVERS:
        print(
            f"measure_startup: warning: in {len(LEFTOVERS)} of {2 * (len(times['frozen']) + 1)}"
            f" runs the app left a process running after it quit (ended here): "
            f"{'; '.join(LEFTOVERS)}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
