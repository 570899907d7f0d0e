"""Figure: `cantor pull` against what a musician would use instead to fetch the same model.

    .venv/bin/python bench/download.py                       # 256 MiB model, 3 rounds
    .venv/bin/python bench/download.py --size-mib 64 --rounds 2 --json out.json

The peers (the locked ``bench`` extra: ``scripts/bootstrap.sh test,bench``):

- ``huggingface_hub``: ``hf_hub_download`` of the current release (one stream per file);
- ``hf_transfer``: what ``HF_HUB_ENABLE_HF_TRANSFER=1`` made ``huggingface_hub`` do up to
  its 1.0 release (the current one ignores that variable): the file's address resolved by
  ``get_hf_file_metadata``, then ``hf_transfer.download`` with huggingface_hub's own
  settings (100 connections, 10-MB chunks);
- ``curl -fL`` of each file's resolve URL (one process, the files one after another).

Also timed, as a reference and not a peer: ``httpx loop``, the bare loop of the client
``cantor pull`` is built on (httpx's AsyncClient, 8 ranges written in place, no hash, no
progress, no resume): the floor for a downloader on httpx's public API.

Every tool fetches the same model (a 4-file set: the DiT of ``--size-mib`` and three small
companions) from the same local hub (tests/support/hub.py: the hub answers the resolve
HEAD/GET as huggingface.co does, with ETag, X-Repo-Commit, X-Linked-Size and a redirect to
its CDN, another server; ``HF_ENDPOINT`` points every tool at it), as a separate process
into an empty folder. Two hubs:

- shaped, like a CDN seen from home: each connection capped at ``--rate-mib`` MiB/s, each
  answer ``--first-byte-ms`` late, and the line capped at ``--line-mib`` MiB/s;
- unshaped: loopback as fast as this machine goes (the CDN sends with sendfile).

Every tool runs once untimed first (from bytecode, as installed: each Python tool writes
its ``.pyc`` files even where ``PYTHONDONTWRITEBYTECODE`` is set, and the model is in the
page cache for all). Each round then runs every tool once, in an order rotated each round. A run counts only when
every file it wrote is byte-identical to the hub's (compared byte by byte). Per tool: wall
time, CPU time (user + system of its process, from wait4) and peak memory (its maximum
resident set). The ratio is the fastest peer's median wall time over ours (≥ 1: ours is at
least as fast). ``cantor pull`` also checks every file's sha256 and resumes a cut download
range by range; the table marks which peers do neither. Once per hub, a `cantor pull` is
interrupted (SIGINT) half-way and run again: the bench checks that the second run fetched
only what was missing and that the files are byte-identical.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from common import add_json_option, compiled_sources, write_json
from support.hub import ModelHub, model_bytes

from cantor_desktop.fetch import partfile

DIT = "acestep-v15-turbo-Q8_0.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"
COMPANION_SIZE = 1 << 20
PY = sys.executable

HF_SCRIPT = """
import sys
from huggingface_hub import hf_hub_download
repo, out = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    hf_hub_download(repo, name, local_dir=out)
"""

HFT_SCRIPT = """
import os, sys
import hf_transfer
from huggingface_hub import get_hf_file_metadata, hf_hub_url
repo, out = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    meta = get_hf_file_metadata(hf_hub_url(repo, name))
    hf_transfer.download(
        url=meta.location,
        filename=os.path.join(out, name),
        max_files=100,
        chunk_size=10 * 1024 * 1024,
        parallel_failures=3,
        max_retries=5,
    )
"""

# Not a peer (no musician runs it): the bare loop of the HTTP client cantor pull is built on,
# httpx's AsyncClient, fetching the same files in 8 ranges written in place with no hash, no
# progress and no resume. Its time is the floor for any downloader on httpx's public API.
HTTPX_SCRIPT = """
import asyncio, os, sys
import httpx
repo, out, base = sys.argv[1], sys.argv[2], os.environ["HF_ENDPOINT"]
async def fetch(client, url, path):
    head = await client.head(url)
    size = int(head.headers["Content-Length"])
    step = max(1, -(-size // 8))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, size)
    async def one(start):
        end = min(size, start + step) - 1
        async with client.stream("GET", url, headers={"Range": f"bytes={start}-{end}"}) as r:
            at = start
            async for piece in r.aiter_raw():
                os.pwrite(fd, piece, at)
                at += len(piece)
            assert at == end + 1, (path, at, end)
    await asyncio.gather(*(one(s) for s in range(0, size, step)))
    os.close(fd)
async def main():
    async with httpx.AsyncClient(follow_redirects=True, timeout=60) as client:
        for name in sys.argv[3:]:
            url = f"{base}/{repo}/resolve/main/{name}"
            await fetch(client, url, os.path.join(out, name))
asyncio.run(main())
"""
REFERENCE = "httpx loop"

# What each tool does besides fetching (a peer that does not is marked so in the table).
VERIFIES = {
    "cantor pull": True,
    "huggingface_hub": False,
    "hf_transfer": False,
    "curl": False,
    REFERENCE: False,
}
RESUMES = {
    "cantor pull": True,
    "huggingface_hub": True,
    "hf_transfer": False,
    "curl": False,
    REFERENCE: False,
}
NOTES = {
    "cantor pull": "sha256 of every file checked; resumes range by range",
    "huggingface_hub": "size checked, no hash; resumes its one stream",
    "hf_transfer": "no hash, no resume",
    "curl": "no hash; resumes only with -C - (not how it is run here)",
    REFERENCE: "not a peer: httpx's bare loop, 8 ranges, no hash, no progress, no resume",
}


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mib: float


@dataclass
class ToolRuns:
    runs: list[Run] = field(default_factory=list)

    def med(self, what: str) -> float:
        return statistics.median(getattr(r, what) for r in self.runs)


def _hwm_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(argv: list[str], env: dict, log: Path) -> Run:
    """Run a tool to its end: its wall time, CPU time (wait4's rusage: the process and its
    threads) and peak resident memory (VmHWM, read every 10 ms while it runs: rusage's
    ru_maxrss would count the bench's own memory, which a forked child inherits)."""
    import threading

    with open(log, "ab") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        peak = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.01):
                peak[0] = max(peak[0], _hwm_kib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-800:]
        raise SystemExit(f"{argv[0:4]} exited with {proc.returncode}:\n{tail}")
    return Run(wall, usage.ru_utime + usage.ru_stime, peak[0] / 1024)


class Race:
    def __init__(self, hub: ModelHub, work: Path, names: list[str], connections: int):
        self.hub = hub
        self.work = work
        self.names = names
        self.connections = connections
        self.base_env = {
            **compiled_sources(),  # every tool from bytecode, as installed
            "HF_ENDPOINT": hub.base_url,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_ETAG_TIMEOUT": "30",
            "HF_HUB_DOWNLOAD_TIMEOUT": "60",
            "PYTHONPATH": str(ROOT),
        }
        self.base_env.pop("HF_TOKEN", None)
        self.base_env.pop("HF_HUB_ENABLE_HF_TRANSFER", None)

    def fresh(self, tool: str) -> tuple[Path, dict]:
        folder = Path(tempfile.mkdtemp(prefix=tool.replace(" ", "-") + "-", dir=self.work))
        env = dict(self.base_env, HF_HOME=str(folder / "hf-home"))
        return folder, env

    def cantor_home(self, folder: Path) -> dict:
        home = folder / "home"
        home.mkdir()
        (home / "node.toml").write_text(f"[downloads]\nconnections = {self.connections}\n")
        return {"CANTOR_HOME": str(home)}

    def argv(self, tool: str, folder: Path, env: dict) -> tuple[list[str], Path]:
        """The command line and the folder the files land in."""
        repo = self.hub.repo
        if tool == "cantor pull":
            env.update(self.cantor_home(folder))
            out = folder / "home" / "models" / "acestep"
            return [
                PY,
                "-m",
                "cantor_desktop",
                "pull",
                "acestep-v15-turbo",
                "--lm-size",
                "0.6B",
                "--no-engine",
            ], out
        out = folder / "out"
        out.mkdir()
        if tool == "huggingface_hub":
            return [PY, "-c", HF_SCRIPT, repo, str(out), *self.names], out
        if tool == "hf_transfer":
            return [PY, "-c", HFT_SCRIPT, repo, str(out), *self.names], out
        if tool == REFERENCE:
            return [PY, "-c", HTTPX_SCRIPT, repo, str(out), *self.names], out
        if tool == "curl":
            argv = ["curl", "-sSfL"]
            for name in self.names:
                argv += ["-o", str(out / name), f"{self.hub.base_url}/{repo}/resolve/main/{name}"]
            return argv, out
        raise ValueError(tool)

    def check(self, tool: str, out: Path) -> None:
        """Every file byte-identical to the hub's, or the run does not count."""
        for name in self.names:
            got = out / name
            want = self.hub.files[name]
            same = got.is_file() and (
                filecmp.cmp(got, want, shallow=False)
                if isinstance(want, Path)
                else got.read_bytes() == want
            )
            if not same:
                raise SystemExit(f"{tool}: {got} is not the hub's {name}: the run does not count")

    def once(self, tool: str) -> Run:
        folder, env = self.fresh(tool)
        argv, out = self.argv(tool, folder, env)
        try:
            run = run_measured(argv, env, self.work / "tools.log")
            self.check(tool, out)
            return run
        finally:
            _remove(folder)

    def resume_trial(self) -> dict:
        """`cantor pull` stopped by SIGINT half-way through the DiT (the CDN slowed down so
        that half-way lasts), then run again on the unshaped hub."""
        folder, env = self.fresh("resume")
        argv, out = self.argv("cantor pull", folder, env)
        log = self.work / "resume.log"
        size = self.hub.files[DIT].stat().st_size
        part = out / (DIT + ".part")
        cdn_path = self.hub.cdn_path(DIT)
        self.hub.cdn.shape(line=max(64 * 1024, size / 6))  # ~6 s for the DiT
        self.hub.cdn.clear_log()
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=fh)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and partfile.received(part) < size // 2:
                if proc.poll() is not None:
                    break
                time.sleep(0.02)
            at = partfile.received(part)
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        saved = partfile.load(part)
        kept = saved.received if saved else 0
        first_sent = sum(r.bytes_sent for r in self.hub.cdn.requests_for(cdn_path))
        self.hub.cdn.shape()
        self.hub.cdn.clear_log()
        run_measured(argv, env, log)
        self.check("cantor pull (resumed)", out)
        again = sum(r.bytes_sent for r in self.hub.cdn.requests_for(cdn_path))
        _remove(folder)
        return {
            "interrupted_at": at,
            "kept": kept,
            "size": size,
            "refetched": again,
            "first_run_sent": first_sent,
            "interrupted": 0 < kept < size,
            "only_missing": again == size - kept,
            "identical": True,
        }


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def make_model(folder: Path, size: int) -> Path:
    """A DiT-named file of ``size`` random bytes on disk (a GGUF header first)."""
    path = folder / DIT
    head = model_bytes(DIT, size=4096)
    rng = random.Random(2026)
    with open(path, "wb") as fh:
        fh.write(head)
        left = size - len(head)
        block = rng.randbytes(8 << 20)
        i = 0
        while left > 0:
            chunk = (i.to_bytes(8, "little") + block[8:])[: min(len(block), left)]
            fh.write(chunk)
            left -= len(chunk)
            i += 1
    return path


TOOLS = ["cantor pull", "huggingface_hub", "hf_transfer", "curl", REFERENCE]


def race(args, hub: ModelHub, work: Path, names: list[str], label: str) -> dict:
    r = Race(hub, work, names, args.connections)
    tools = [t for t in TOOLS if t in args.tools]
    results = {t: ToolRuns() for t in tools}
    for k in range(args.rounds):
        order = tools[k % len(tools) :] + tools[: k % len(tools)]
        for t in order:
            run = r.once(t)
            results[t].runs.append(run)
            print(
                f"  {label} round {k + 1} {t:16s} {run.wall:7.2f} s  "
                f"{args.size_mib / run.wall:7.1f} MiB/s  CPU {run.cpu:6.2f} s  "
                f"peak {run.peak_mib:6.0f} MiB",
                flush=True,
            )
    return {"tools": results}


def summary(label: str, size_mib: int, res: dict) -> dict:
    tools: dict[str, ToolRuns] = res["tools"]
    rows = {}
    for t, tr in tools.items():
        walls = [x.wall for x in tr.runs]
        rows[t] = {
            "wall_s": walls,
            "mib_s": [size_mib / w for w in walls],
            "cpu_s": [x.cpu for x in tr.runs],
            "peak_mib": [x.peak_mib for x in tr.runs],
            "verifies": VERIFIES[t],
            "resumes": RESUMES[t],
            "note": NOTES[t],
        }
    peers = {t: tr for t, tr in tools.items() if t not in ("cantor pull", REFERENCE)}
    out: dict = {"tools": rows}
    if "cantor pull" in tools and peers:
        fastest = min(peers, key=lambda t: peers[t].med("wall"))
        ours = tools["cantor pull"].med("wall")
        out["fastest_peer"] = fastest
        out["ratio"] = peers[fastest].med("wall") / ours
        print(f"\n{label}:")
        print(
            f"{'tool':16s} {'median s':>9s} {'MiB/s':>8s} {'CPU s':>7s} {'peak MiB':>9s}  "
            f"verifies resumes"
        )
        for t, tr in tools.items():
            print(
                f"{t:16s} {tr.med('wall'):9.2f} {size_mib / tr.med('wall'):8.1f} "
                f"{tr.med('cpu'):7.2f} {tr.med('peak_mib'):9.0f}  "
                f"{'yes' if VERIFIES[t] else 'NO':8s} {'yes' if RESUMES[t] else 'NO'}"
            )
        print(f"ratio: fastest peer ({fastest}) / cantor pull, wall time: {out['ratio']:.2f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=256, help="the DiT's size")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate-mib", type=float, default=8.0, help="shaped: MiB/s per connection")
    ap.add_argument("--first-byte-ms", type=float, default=80.0, help="shaped: answer delay")
    ap.add_argument("--line-mib", type=float, default=50.0, help="shaped: the line, MiB/s")
    ap.add_argument("--connections", type=int, default=8, help="cantor's downloads.connections")
    ap.add_argument("--hubs", default="shaped,unshaped")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--no-resume", action="store_true", help="skip the SIGINT/resume trial")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    add_json_option(ap)
    args = ap.parse_args()
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    missing = [m for m in ("huggingface_hub", "hf_transfer") if _absent(m) and m in args.tools]
    if missing:
        print(
            f"{', '.join(missing)} not installed: run scripts/bootstrap.sh test,bench",
            file=sys.stderr,
        )
        return 1
    import huggingface_hub

    versions = {
        "huggingface_hub": huggingface_hub.__version__,
        "hf_transfer": _version("hf_transfer"),
    }
    versions["curl"] = subprocess.run(
        ["curl", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    figures: dict = {
        "size_mib": args.size_mib,
        "rounds": args.rounds,
        "connections": args.connections,
        "versions": versions,
        "shaping": {
            "rate_mib_s": args.rate_mib,
            "first_byte_ms": args.first_byte_ms,
            "line_mib_s": args.line_mib,
        },
        "hubs": {},
        "files_checked": True,
    }
    with tempfile.TemporaryDirectory(prefix="cantor-bench-race-", dir=args.dir) as tmp:
        work = Path(tmp)
        print(f"generating a {args.size_mib} MiB model …", flush=True)
        dit = make_model(work, args.size_mib << 20)
        with ModelHub() as hub:
            names = hub.add_set(DIT, LM, size=COMPANION_SIZE)
            hub.add(DIT, path=dit)
            hub.cdn.shape()
            warm = Race(hub, work, names, args.connections)
            for t in [t for t in TOOLS if t in args.tools]:
                warm.once(t)  # untimed: each tool's bytecode written, the model in the page cache
            for label in [h.strip() for h in args.hubs.split(",") if h.strip()]:
                if label == "shaped":
                    hub.cdn.shape(
                        rate=args.rate_mib * 2**20,
                        first_byte=args.first_byte_ms / 1000,
                        line=args.line_mib * 2**20,
                    )
                else:
                    hub.cdn.shape()
                print(f"\n--- {label} hub", flush=True)
                res = race(args, hub, work, names, label)
                figures["hubs"][label] = summary(label, args.size_mib, res)
            if "cantor pull" in args.tools and not args.no_resume:
                rs = Race(hub, work, names, args.connections).resume_trial()
                figures["resume"] = rs
                print(
                    f"\nresume: `cantor pull` interrupted (SIGINT) with "
                    f"{rs['kept'] / 2**20:.1f} of {rs['size'] / 2**20:.0f} MiB of the DiT "
                    f"saved; the second run fetched {rs['refetched'] / 2**20:.1f} MiB "
                    f"({'only what was missing' if rs['only_missing'] else 'MORE than was missing'}"
                    f"); every file byte-identical"
                )
                if not (rs["interrupted"] and rs["only_missing"]):
                    raise SystemExit("the resume trial failed: see above")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    figures["load"] = load
    write_json(args.json, "download", figures)
    return 0


def _absent(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    sys.exit(main())
