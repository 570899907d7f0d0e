"""Cancel a song in each stage of the real ace-server's work: the LM writing audio codes, the
DiT's steps, the VAE's decode. The song ends ``cancelled`` and the engine no longer works
on it: its job reads ``cancelled`` (or, where a step outlasts the grace, the engine was
stopped), it logs no further work of that job and never finishes it. The next song works.
How long a cancel takes is a figure in bench/real_songs.py (docs/performance.md), not an
assert here: the CI machine runs other lanes beside this one."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from real_engine.conftest import figure
from real_engine.fabricated import BASE_MODEL, SHORT_SEEDS, TURBO_MODEL
from real_engine.real_build import needs_real_engine
from real_engine.real_node import EngineLog, configure, set_up
from support.node import Node, until_state

pytestmark = needs_real_engine
WORK = r"^\[(LM-Phase2\] Step|DiT\] Step|VAE\])"  # the lines of an engine working on a song

VOCAL = {
    "caption": "dreamy synthwave",
    "lyrics": "la la la",
    "bpm": 96,
    "key": "A minor",
    "time_signature": 4,
}
STAGES = {
    # the long LM (fabricated.LONG_LM) writes codes until duration x 5 + 100
    "lm": (
        {**VOCAL, "duration": 600, "seed": 1, "model": TURBO_MODEL},
        r"^\[LM-Phase2\] Step 50,",
        r"^\[LM-Phase2\] Cancelled",
    ),
    # 100 steps of the base DiT on a 10-s instrumental
    "dit": (
        {"caption": "lofi piano", "duration": 10, "seed": 2, "steps": 100, "model": BASE_MODEL},
        r"^\[DiT\] Step 3/100",
        r"^\[DiT\] Cancelled at step",
    ),
    # the VAE decoding a 10-s instrumental
    "vae": (
        {"caption": "lofi piano", "duration": 10, "seed": 3, "model": TURBO_MODEL},
        r"^\[VAE\] Graph",
        r"^\[VAE\] Cancelled at tile",
    ),
}


async def engine_job(client, log_text: str, path_word: str) -> tuple[str, str] | None:
    """(engine url, job id) of the last job of the engine."""
    found = re.findall(rf"^\[Server\] Job (\w+) created \({path_word}", log_text, re.M)
    system = await client.system()
    running = [e for e in system["loaded"] if e["engine"] == "acestep" and e.get("url")]
    if not found or not running:
        return None
    return running[0]["url"], found[-1]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("stage", list(STAGES))
def test_a_cancel_in_each_stage_ends_the_song_and_the_engines_work(
    stage, cantor_home, fabricated, real_engine
):
    request, started, landed = STAGES[stage]
    port = set_up(cantor_home, real_engine, fabricated, lm="1.7B" if stage == "lm" else "0.6B")
    out: dict = {}

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                log = EngineLog(cantor_home)
                sid = await c.submit_song(request)
                await log.wait_for(started, timeout=300)
                job = await engine_job(c, log.text(), "LM" if stage == "lm" else r"\d")
                await c.cancel(sid)
                song = await until_state(c, sid, ("cancelled", "failed", "done"), 300)
                out["state"] = song["state"]
                out["job"] = None
                if job is not None:
                    try:
                        async with httpx.AsyncClient(trust_env=False) as http:
                            r = await http.get(f"{job[0]}/job", params={"id": job[1]})
                        out["job"] = r.json().get("status")
                    except httpx.TransportError:
                        out["job"] = "engine stopped"
                out["log"] = log.text()  # up to here: the cancel and what the engine did after
                # the next song works (on the short LM: the long one writes 150 codes)
                configure(cantor_home, real_engine, port=port)
                nxt = await c.submit_song({**VOCAL, "duration": 10, "seed": SHORT_SEEDS[0]})
                out["next"] = (await until_state(c, nxt, ("done", "failed"), 900))["state"]
                out["whole_log"] = log.text()
                out["job_id"] = job[1] if job else None
        finally:
            await node.stop()

    asyncio.run(main())
    how = "job cancelled" if out["job"] == "cancelled" else out["job"]
    figure(
        f"cancel in the {stage} stage: songs ending cancelled",
        int(out["state"] == "cancelled"),
        1,
        f"the engine: {how}",
    )
    assert out["state"] == "cancelled", out
    if stage in ("lm", "dit"):  # a token or a step is short: the engine's own cancel lands
        assert out["job"] == "cancelled", out["job"]
        landed_at = re.search(landed, out["log"], re.M)
        assert landed_at, out["log"][-2000:]
        # the engine did no more of the song's work after its cancel landed (the next
        # song's job is created after out["log"] was read)
        after = out["log"][landed_at.end() :]
        assert not re.search(WORK, after, re.M), after[-2000:]
    else:
        assert out["job"] in ("cancelled", "engine stopped"), out["job"]
    if out["job_id"]:  # the engine never finished the cancelled job, even later on
        assert f"[Server] Job {out['job_id']} done" not in out["whole_log"]
    assert out["next"] == "done"
