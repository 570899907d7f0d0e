"""What a change costs in the app's idle memory: two revisions of this repository, A/B.

    .venv/bin/python bench/idle_ab.py REV_A REV_B [--runs 5] [--idle 8]
    e.g. .venv/bin/python bench/idle_ab.py main HEAD

Each revision is unpacked with ``git archive`` into a scratch folder and compiled to bytecode
(as an installed app runs); then the app is started from each, alternately, as
``cantor-desktop`` starts it (``ui.main.main``), offscreen, with a fresh CANTOR_HOME. Once
the node it started answers and it has been idle for ``--idle`` seconds, its RSS and PSS
(``/proc/PID/smaps_rollup``: shared pages divided among the processes sharing them) are read;
the node is not counted. Both revisions run on this checkout's .venv (same packages). Prints
the medians, their difference, and the spread of each (Linux only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, free_port, median, rss_mb, spread  # noqa: E402

from cantor_desktop.system.procs.table import end_child  # noqa: E402

PY = sys.executable
APP = "import sys; from cantor_desktop.ui.main import main; sys.exit(main())"
OFFLINE = {
    k: "http://127.0.0.1:9"
    for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy")
}
OFFLINE.update(NO_PROXY="127.0.0.1,localhost,::1", no_proxy="127.0.0.1,localhost,::1")


def pss_mb(pid: int) -> float:
    """Proportional set size in MiB (Linux /proc; nan elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def unpack(rev: str, into: Path) -> str:
    """``rev``'s tree in ``into``, compiled; returns its commit id."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "cantor_desktop"],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(into, filter="data")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [PY, "-m", "compileall", "-q", str(into / "cantor_desktop")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return commit


def idle(tree: Path, seconds: float) -> tuple[float, float]:
    """(RSS, PSS) in MiB of the app run from ``tree``, its node up, idle ``seconds``."""
    with tempfile.TemporaryDirectory(prefix="cantor-idle-ab-") as tmp:
        home = Path(tmp)
        port = free_port()
        (home / "node.toml").write_text(f"[node]\nport = {port}\n", "utf-8")
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            **OFFLINE,
            "CANTOR_HOME": str(home),
            "PYTHONPATH": str(tree),
            "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
            "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        }
        proc = subprocess.Popen(
            [PY, "-c", APP],
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{tree}: the app's node never answered") from None
                    time.sleep(0.2)
            time.sleep(seconds)
            if proc.poll() is not None:
                raise RuntimeError(f"{tree}: the app exited ({proc.returncode})")
            return rss_mb(proc.pid), pss_mb(proc.pid)
        finally:
            end_child(proc, grace=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", metavar="REV_A")
    ap.add_argument("b", metavar="REV_B")
    ap.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    ap.add_argument("--idle", type=float, default=8.0, help="idle seconds (default 8)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cantor-idle-ab-trees-") as tmp:
        trees = {}
        for label, rev in (("A", args.a), ("B", args.b)):
            commit = unpack(rev, Path(tmp) / label)
            trees[label] = Path(tmp) / label
            print(f"{label}: {rev} ({commit[:10]})", flush=True)
        got: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for i in range(args.runs):
            for label in ("A", "B") if i % 2 == 0 else ("B", "A"):
                got[label].append(idle(trees[label], args.idle))
                rss, pss = got[label][-1]
                print(f"  run {i + 1} {label}: RSS {rss:.1f} MiB, PSS {pss:.1f} MiB", flush=True)
    print(f"idle app from source, {args.runs} runs each, alternated, {args.idle:g} s idle:")
    for i, what in enumerate(("RSS", "PSS")):
        a = [r[i] for r in got["A"]]
        b = [r[i] for r in got["B"]]
        print(
            f"  {what}: A {median(a):.1f} MiB ({spread(a, '{:.1f}')}), "
            f"B {median(b):.1f} MiB ({spread(b, '{:.1f}')}), "
            f"B - A {median(b) - median(a):+.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
