"""What the app's pool polling costs a member: the time of one ``GET /v1/pool`` (every
member, lane and song state, read from Redis: ``cantor pool status``), of
``GET /v1/pool?songs=false`` (members and lanes, no song records: what Hardware & Backends
reads every 2 s while it is open), of ``GET /v1/pool?brief=true`` (the pool's state alone,
no Redis: what the app reads every 3 s otherwise) and, as the baseline, of
``GET /v1/system`` (what the app already reads on connecting), on a member of a real
three-node pool holding N songs.

    .venv/bin/python bench/pool_reads.py              # 30 songs, 40 reads of each
    .venv/bin/python bench/pool_reads.py --songs 300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.pool_nodes import ThreeNodePool, all_finished, post  # noqa: E402
from support.redis_server import binary  # noqa: E402

READS = (
    ("/v1/pool", None),
    ("/v1/pool?songs=false", {"songs": "false"}),
    ("/v1/pool?brief=true", {"brief": "true"}),
    ("/v1/system", None),
)


async def measure(members, songs: int, reads: int) -> dict[str, float]:
    for first in range(0, songs, 60):  # within the members' queues (node.max_queue)
        ids = []
        for k in range(first, min(songs, first + 60)):
            body = {"caption": f"lofi {k}", "duration": 10, "model": "sketch", "seed": k}
            ids.append(await post(members[k % 3], body))
        await all_finished(members[0], ids, timeout=60 + len(ids) * 2)
    out = {}
    async with members[0].http() as h:
        for name, params in READS:
            path = name.split("?")[0]
            await h.get(path, params=params)  # warm
            times = []
            for _ in range(reads):
                t0 = time.perf_counter()
                r = await h.get(path, params=params)
                times.append(time.perf_counter() - t0)
                assert r.status_code == 200, r.text
            out[name] = statistics.median(times) * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--songs", type=int, default=30)
    parser.add_argument("--reads", type=int, default=40)
    args = parser.parse_args()
    if binary() is None:
        print("redis-server is not installed (scripts/bootstrap.sh installs it)")
        return 1
    with ThreeNodePool(Path(tempfile.mkdtemp(prefix="cantor-pool-reads-"))) as (_r, members):
        found = asyncio.run(measure(members, args.songs, args.reads))
    base = found["/v1/system"]
    print(f"a member of a pool of 3 with {args.songs} songs; median of {args.reads} reads")
    for name, ms in found.items():
        print(f"  {name:22} {ms:7.2f} ms   {ms / base:5.2f}× GET /v1/system")
    return 0


if __name__ == "__main__":
    sys.exit(main())
