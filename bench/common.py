"""Small helpers shared by the benchmarks: statistics, memory, machine facts, local ports."""

from __future__ import annotations

import functools
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cantor_desktop.system.net import free_port  # noqa: F401 - re-exported for the benches

ROOT = Path(__file__).resolve().parent.parent


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def spread(values: list[float], fmt: str = "{:.0f}") -> str:
    """ "min–max (n=K)" of the runs, or the single value's n."""
    if not values:
        return "—"
    if len(values) == 1:
        return "n=1"
    return f"{fmt.format(min(values))}–{fmt.format(max(values))} (n={len(values)})"


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (Linux /proc; nan elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def pss_mb(pid: int) -> float:
    """Proportional set size in MiB: the process's private pages plus its share of pages
    other processes map too (Qt's libraries, with another Qt app open), where the OS says
    (Linux; nan elsewhere)."""
    import psutil

    try:
        return getattr(psutil.Process(pid).memory_full_info(), "pss", float("nan")) / 2**20
    except (psutil.Error, OSError):
        return float("nan")


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 200 (raise if ``proc`` dies or time runs out)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


def machine_facts() -> dict[str, str]:
    """What the figures were measured on: the hardware probe's CPU and RAM, plus the load."""
    from cantor_desktop.system import hardware

    hw = hardware.probe()
    load = ""
    if hasattr(os, "getloadavg"):
        load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    ram = f"{hw.ram_bytes / 2**30:.1f} GiB" if hw.ram_bytes else "?"
    return {
        "os": f"{platform.system()} {platform.release()}",
        "cpu": hw.cpu_name or platform.processor() or platform.machine(),
        "cores": str(os.cpu_count()),
        "ram": ram,
        "python": platform.python_version(),
        "load": load,
    }


def dir_size(path: Path) -> int:
    """Bytes of every regular file under ``path`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total


# -- figures as JSON (bench/run_all.py reads them; the printed table stays for people) -----

JSON_ENV = "CANTOR_BENCH_JSON"


def add_json_option(parser) -> None:
    """``--json PATH``: also write the figures there (default: $CANTOR_BENCH_JSON, which
    bench/run_all.py sets for every script it runs)."""
    parser.add_argument(
        "--json",
        type=Path,
        default=os.environ.get(JSON_ENV) or None,
        metavar="PATH",
        help="also write the figures as JSON to PATH",
    )


def write_json(path: Path | None, script: str, figures: dict) -> None:
    if path is None:
        return
    import json

    Path(path).write_text(
        json.dumps(
            {"script": script, "machine": machine_facts(), **figures}, indent=1, default=float
        ),
        "utf-8",
    )


def sketch_home(prefix: str, song_format: str) -> Path:
    """A throw-away CANTOR_HOME (removed at exit) whose node makes Sketch songs in
    ``song_format`` into its own songs folder; set for this process too."""
    import atexit
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["CANTOR_HOME"] = str(home)
    (home / "node.toml").write_text(
        f'[models]\ndefault = "sketch"\n[songs]\n'
        f'dir = "{home / "songs"}"\nformat = "{song_format}"\n'
    )
    return home


async def direct_sketch_engine(home: Path):
    """A Sketch engine of this process's own (the baseline: no node in between), started."""
    from cantor_desktop.engine.supervisor import EngineSupervisor
    from cantor_desktop.system.selfexec import self_argv
    from cantor_desktop.sketch import ensure_sketch_models

    models = home / "direct-models"
    ensure_sketch_models(models)
    sup = EngineSupervisor(
        "sketch",
        self_argv("sketch-server"),
        {},
        models,
        log_path=home / "logs" / "direct-engine.log",
    )
    await sup.start()
    return sup


async def follow_new_song(client, request: dict):
    """Queue a song and yield its events: ``("queued", {"id": …})`` first, then each of
    the song's own events to its final one. The node-wide event stream is open (its
    ``hello`` read) before the song is submitted, so no event of the song, not even its
    first step, can pass before the bench listens."""
    import contextlib

    async with contextlib.aclosing(client.all_events()) as stream:
        events = stream.__aiter__()
        event, data = await events.__anext__()
        if event != "hello":
            raise RuntimeError(f"the node's event stream began with {event!r}, not hello")
        sid = await client.submit_song(request)
        yield "submitted", {"id": sid}
        async for event, data in events:
            if isinstance(data, dict) and data.get("id") == sid:
                yield event, data
                if event in ("done", "failed", "cancelled"):
                    return


async def song_to_the_end(client, request: dict) -> tuple[str, str, dict]:
    """Queue a song, listening first; its id, its final event and that event's data."""
    sid = ""
    async for event, data in follow_new_song(client, request):
        if event == "submitted":
            sid = data["id"]
        elif event in ("done", "failed", "cancelled"):
            return sid, event, data
    raise RuntimeError(f"the node's event stream ended before song {sid} did")


@functools.cache
def _compiled_env() -> tuple[tuple[str, str], ...]:
    """The environment that runs Cantor's sources from bytecode, as an installed app runs
    (pip writes it at install; a checkout with PYTHONDONTWRITEBYTECODE would compile every
    module at every start, ~1 MiB more): compiled here first, next to the sources, where
    Python looks for it (a private cache prefix would hide the standard library's too)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "cantor_desktop")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return tuple(env.items())


def compiled_sources() -> dict[str, str]:
    """:func:`_compiled_env` as a fresh dict: compiled once per bench process, however many
    races or runs ask."""
    return dict(_compiled_env())
