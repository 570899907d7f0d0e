"""The pool's attack suite: someone who can write to a pool's Redis but is not a member
(a compromised machine on the studio's network, or anyone where Redis has no password),
against two real members (alpha, bravo) sharing a songs folder on a real redis-server.

Run: .venv/bin/python tests/faults/run.py -k pool_attack
(or: ./run-tests -m slow tests/faults/test_pool_attack_faults.py -s)

Each attack writes into Redis what an attacker would — a member record, a song record, a
lane entry, an event — and then does what the user would: play a song, delete it with its
files, send a song to a member by name, list the songs. What the attacker wanted must never
happen: the pool's token sent to an address that did not prove it is a member, a file read
or deleted outside the songs folder, a member that stops making or hearing songs, a 500.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil
import pytest
from support.pool_nodes import PoolNode, all_finished, post, start_all, wait_members
from support.redis_server import RedisServer, require

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pool_attack")]

SKETCH_SONG = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}
FAKE_ID = "f4ce0000beef"


def lan_address() -> str:
    """This machine's address on its network (the route out): the fake member's, as a
    machine of the studio's network would have it. Loopback is not enough: a member checks
    the port of a loopback address itself."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: the route picks the address
        found = s.getsockname()[0]
    if found.startswith("127."):
        pytest.fail("this machine has no address but loopback: the relay attack needs one")
    return found


class Relay:
    """The fake member: an HTTP server on the studio's network that passes every request on
    to a real member (bravo), and keeps the headers it was sent."""

    def __init__(self, host: str, target: str):
        self.seen: list[dict[str, str]] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def _pass(self) -> None:
                relay.seen.append({k.lower(): v for k, v in self.headers.items()})
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                try:
                    with httpx.Client(base_url=target, trust_env=False, timeout=30) as c:
                        r = c.request(self.command, self.path, headers=headers, content=body)
                    status, data = r.status_code, r.content
                    kind = r.headers.get("content-type", "application/json")
                except httpx.HTTPError:
                    status, data, kind = 502, b"{}", "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _pass

            def log_message(self, *_a):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def tokens_seen(self) -> list[str]:
        return [h["authorization"] for h in self.seen if "authorization" in h]

    def close(self) -> None:
        self.server.shutdown()


class Studio:
    """Redis, alpha and bravo (one shared songs folder), and the attacker's own client."""

    def __init__(self, base: Path):
        self.share = base / "share"
        self.redis = RedisServer(base / "redis")
        self.alpha = PoolNode(self.redis, base / "alpha", "alpha", shared_songs=self.share)
        self.bravo = PoolNode(self.redis, base / "bravo", "bravo", shared_songs=self.share)
        self.ids: dict[str, str] = {}

    def start(self) -> Studio:
        self.redis.start()
        asyncio.run(start_all([self.alpha, self.bravo]))
        asyncio.run(wait_members(self.alpha, 2))
        for m in (self.alpha, self.bravo):
            self.ids[m.name] = asyncio.run(m.node_id())
        return self

    def stop(self) -> None:
        async def stop():
            for m in (self.alpha, self.bravo):
                if m.node.proc.proc is not None and m.node.proc.proc.poll() is None:
                    await m.stop()

        try:
            asyncio.run(stop())
        finally:
            self.redis.stop()

    def attacker(self):
        import redis

        return redis.Redis(
            host="127.0.0.1",
            port=self.redis.port,
            password=self.redis.password,
            decode_responses=True,
        )


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    require()
    found = Studio(tmp_path_factory.mktemp("pool-attack"))
    try:
        yield found.start()
    finally:
        found.stop()


# -- the attacker's writes ------------------------------------------------------------------


def song_json(r, song_id: str) -> dict:
    """A song's record as the pool's scripts quote it into an event (JSON fields)."""
    return {k: json.loads(v) for k, v in r.hgetall(f"cantor:song:{song_id}").items() if k[0] != "_"}


def forge(r, record: dict, *, lane: str = "cantor:lane:model:sketch", origin: str = FAKE_ID):
    """Write a song record as the pool keeps one, place it in the order, and tell every
    member with an ``added`` event (a record with any fields the attacker likes)."""
    song_id = record["id"]
    seq = r.incr("cantor:seq")
    fields = {k: json.dumps(v) for k, v in record.items()}
    fields.update({"seq": str(seq), "_lane": lane, "_owner": "", "_entry": ""})
    r.hset(f"cantor:song:{song_id}", mapping=fields)
    r.zadd("cantor:order", {song_id: seq})
    r.xadd(
        "cantor:events",
        {"k": "added", "o": origin, "d": json.dumps({"id": song_id, "lane": lane, "song": record})},
    )


def fake_member(r, node_id: str, name: str, url: str) -> None:
    report = {
        "id": node_id,
        "name": name,
        "url": url,
        "shared": False,
        "models": ["sketch"],
        "backends": {"sketch": "sketch"},
        "engines": [],
        "running": [],
        "seen": time.time(),
    }
    r.hset("cantor:members", node_id, json.dumps(report))
    r.set(f"cantor:alive:{node_id}", "1", ex=3600)


def new_song_id() -> str:
    return secrets.token_hex(8)


async def made(member: PoolNode, body: dict | None = None, **params) -> dict:
    """A real song made through ``member``, as it lists it."""
    song_id = await post(member, body or SKETCH_SONG, **params)
    return (await all_finished(member, [song_id], timeout=120))[song_id]


def run(coro):
    return asyncio.run(coro)


def judge(t, held: bool, why: str) -> None:
    """One trial: survived when ``held``, else lost with ``why``."""
    if held:
        t.ok()
    else:
        t.fail(why)


async def listed(member: PoolNode, song_id: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        async with member.http() as h:
            r = await h.get(f"/v1/songs/{song_id}")
        if r.status_code == 200:
            return r.json()
        if time.monotonic() > deadline:
            raise AssertionError(f"{member.name} never listed song {song_id}: {r.text[:200]}")
        await asyncio.sleep(0.1)


async def pool_status(member: PoolNode) -> dict:
    async with member.http() as h:
        r = await h.get("/v1/pool")
    assert r.status_code == 200, r.text
    return r.json()


def refusals(studio: Studio) -> dict[str, int]:
    """What both members refused from Redis so far, added up by kind."""
    out: dict[str, int] = {}
    for member in (studio.alpha, studio.bravo):
        for kind, n in run(pool_status(member))["refused_entries"].items():
            if isinstance(n, int):
                out[kind] = out.get(kind, 0) + n
    return out


# -- the attacks ----------------------------------------------------------------------------


def test_the_pools_token_never_goes_to_an_address_that_did_not_prove_it_is_a_member(studio, tally):
    """A member record on the studio's network whose address relays to a real member, and a
    song that names it as its maker: playing, deleting and sending songs to it (by name, by
    id) send the fake nothing with the token; a fake id at a real member's address is no
    member either."""
    t = tally("pool attack: the pool's token to an unproven member")
    r = studio.attacker()
    relay = Relay(lan_address(), studio.bravo.url)
    try:
        fake_member(r, FAKE_ID, "delta", relay.url)
        base = run(made(studio.alpha))
        record = song_json(r, base["id"])
        record.update(id=new_song_id(), node={"id": FAKE_ID, "name": "delta", "shared": False})
        forge(r, record)
        run(listed(studio.alpha, record["id"]))
        run(listed(studio.bravo, record["id"]))

        async def attempts():
            out = []
            for member in (studio.alpha, studio.bravo):
                async with member.http() as h:
                    sid = record["id"]
                    out.append(("play", await h.get(f"/v1/songs/{sid}/audio")))
                    out.append(("delete", await h.delete(f"/v1/songs/{sid}?delete_files=true")))
                    for to in ("delta", FAKE_ID):
                        out.append(
                            (
                                f"song to {to}",
                                await h.post("/v1/songs", json=SKETCH_SONG, params={"node": to}),
                            )
                        )
            return out

        for what, answer in run(attempts()):
            if answer.status_code < 400:
                t.fail(f"{what}: {answer.status_code} {answer.text[:100]}")
            else:
                t.ok()
        if relay.tokens_seen:
            t.fail(f"the relay was sent the token {len(relay.tokens_seen)} time(s)")
        assert relay.seen, "the members never asked the fake member: the attack did not run"
        # a fake id at bravo's own address: bravo answers for its own id, not this one
        fake_member(r, "f4ce0000cafe", "echo", studio.bravo.url)

        async def at_bravos_address():
            async with studio.alpha.http() as h:
                return await h.post("/v1/songs", json=SKETCH_SONG, params={"node": "echo"})

        answer = run(at_bravos_address())
        judge(
            t,
            answer.status_code == 409,
            f"song to a fake id at bravo's address: {answer.status_code} {answer.text[:100]}",
        )
        listed_members = {m["name"]: m for m in run(pool_status(studio.alpha))["members"]}
        assert listed_members["delta"]["proven"] is False, listed_members["delta"]
        assert listed_members["bravo"]["proven"] is True, listed_members["bravo"]
    finally:
        relay.close()
        r.hdel("cantor:members", FAKE_ID, "f4ce0000cafe")
        r.delete(f"cantor:alive:{FAKE_ID}", "cantor:alive:f4ce0000cafe")
    assert not t.lost, t.lost


def test_no_file_outside_the_songs_folder_is_ever_served(studio, tally):
    """Takes naming a private file by its path, by a path out of the folder, and through a
    link in the shared folder, made by alpha (its own file) or by alpha for bravo to fetch:
    every member refuses each, and no byte of the file is served."""
    t = tally("pool attack: a file outside the songs folder read")
    r = studio.attacker()
    secret = b"PRIVATE " + secrets.token_hex(16).encode()
    private = studio.alpha.home / "private.txt"
    private.write_bytes(secret)
    on_share = studio.share / "private.txt"
    on_share.write_bytes(secret)
    link = studio.share / "a-take.wav"
    link.symlink_to(private)
    base = run(made(studio.alpha))
    record = song_json(r, base["id"])
    paths = [
        str(private),
        str(studio.alpha.home / "node.toml"),
        str(studio.share / ".." / "alpha" / "private.txt"),
        str(link),
        str(on_share.with_suffix("")),  # no such file: gone, not served
    ]
    forged = []
    for path in paths:
        for shared in (True, False):
            take = {**record["takes"][0], "audio": path, "sidecar": ""}
            fake = {
                **record,
                "id": new_song_id(),
                "takes": [take],
                "node": {"id": studio.ids["alpha"], "name": "alpha", "shared": shared},
            }
            forge(r, fake)
            forged.append(fake["id"])
    for song_id in forged:
        run(listed(studio.bravo, song_id))

    async def fetch(member: PoolNode, song_id: str) -> httpx.Response:
        async with member.http() as h:
            return await h.get(f"/v1/songs/{song_id}/audio")

    for song_id in forged:
        for member in (studio.alpha, studio.bravo):
            answer = run(fetch(member, song_id))
            if answer.status_code < 400 or secret in answer.content:
                t.fail(f"{member.name} served {song_id}: {answer.status_code}")
            else:
                t.ok()
    link.unlink()
    assert not t.lost, t.lost


def test_delete_with_files_removes_only_the_songs_own_files(studio, tally):
    """A song's takes rewritten to name another song's take on the share, and a file
    outside it, beside the song's own real sidecar: deleting the song with its files leaves
    both."""
    t = tally("pool attack: a file deleted through a forged take")
    r = studio.attacker()
    victim_song = run(made(studio.bravo))
    victim = Path(victim_song["takes"][0]["audio"])
    outside = studio.alpha.home / "keep-me.txt"
    outside.write_text("the user's file")
    for target in (victim, outside):
        song = run(made(studio.alpha))
        record = song_json(r, song["id"])
        own = record["takes"][0]
        record["takes"] = [{**own, "audio": str(target)}]
        r.hset(f"cantor:song:{song['id']}", "takes", json.dumps(record["takes"]))
        r.xadd(
            "cantor:events",
            {"k": "changed", "o": FAKE_ID, "d": json.dumps({"id": song["id"], "song": record})},
        )

        async def delete(song_id=song["id"]):
            deadline = time.monotonic() + 30
            async with studio.alpha.http() as h:
                while (await h.get(f"/v1/songs/{song_id}")).json()["takes"][0]["audio"] != str(
                    target
                ):
                    assert time.monotonic() < deadline, "alpha never heard of the change"
                    await asyncio.sleep(0.1)
                return await h.delete(f"/v1/songs/{song_id}", params={"delete_files": "true"})

        answer = run(delete())
        judge(t, target.exists(), f"{target.name} was deleted ({answer.text[:80]})")
    assert not t.lost, t.lost


def test_bad_records_and_lane_entries_never_stall_the_pool(studio, tally):
    """Queued songs whose request has a list for its model, a batch of 20,000,000, a 5 MB
    takes list, and lane entries naming no song: each is refused and counted, and songs
    sent meanwhile are made on every member; memory stays bounded."""
    t = tally("pool attack: a record that stalls the pool")
    r = studio.attacker()
    before = refusals(studio)
    rss = psutil.Process(studio.alpha.pid).memory_info().rss
    good = song_json(r, run(made(studio.alpha))["id"])
    queued = {
        **good,
        "state": "queued",
        "takes": [],
        "node": None,
        "started": None,
        "finished": None,
        "attempts": 0,
    }
    bad = [
        {**queued, "id": new_song_id(), "request": {**good["request"], "model": ["sketch"]}},
        {**queued, "id": new_song_id(), "request": {**good["request"], "batch": 20_000_000}},
        {**good, "id": new_song_id(), "takes": [good["takes"][0]] * 20_000},  # ~5 MB
    ]
    for record in bad:
        forge(r, record)
        r.xadd("cantor:lane:model:sketch", {"song": record["id"]})
    r.xadd("cantor:lane:model:sketch", {"song": "../../etc"})
    r.xadd("cantor:lane:model:sketch", {"nothing": "here"})
    ids = []
    for member in (studio.alpha, studio.bravo, studio.alpha):
        ids.append(run(post(member, SKETCH_SONG)))
    done = run(all_finished(studio.bravo, ids, timeout=120))
    for song_id in ids:
        judge(t, done[song_id]["state"] == "done", f"song {song_id} ended {done[song_id]['state']}")
    after = refusals(studio)
    assert run(pool_status(studio.alpha))["state"] == "connected"
    judge(
        t,
        after["songs"] + after["events"] - before["songs"] - before["events"] >= len(bad),
        f"refused records counted by the members: {before} then {after}",
    )
    judge(t, after["entries"] - before["entries"] >= 2, f"lane entries counted: {after}")
    grew = (psutil.Process(studio.alpha.pid).memory_info().rss - rss) / 2**20
    judge(t, grew < 100, f"alpha grew {grew:.0f} MiB")
    t.note(f"alpha's memory +{grew:.0f} MiB")
    for record in bad:
        r.delete(f"cantor:song:{record['id']}")
        r.zrem("cantor:order", record["id"])
    assert not t.lost, t.lost


def test_no_event_deafens_a_member(studio, tally):
    """Events of the wrong shape (a list for the data, a list for a lane, an unknown kind,
    an origin that is no id, 1 MB of data, a song whose request is wrong): each is refused,
    and alpha still hears of bravo's songs afterwards — its reader never stops."""
    t = tally("pool attack: an event that deafens a member")
    r = studio.attacker()
    before = run(pool_status(studio.alpha))["refused_entries"]["events"]
    song_id = new_song_id()
    junk = [
        {"k": "changed", "o": studio.ids["alpha"], "d": "[1]"},
        {"k": "changed", "o": FAKE_ID, "d": json.dumps({"id": song_id, "lane": [1]})},
        {"k": "bogus", "o": FAKE_ID, "d": "{}"},
        {"k": "added", "o": "[x]", "d": "{}"},
        {"k": "added", "o": FAKE_ID, "d": "x" * 2**20},
        {
            "k": "added",
            "o": FAKE_ID,
            "d": json.dumps({"id": song_id, "song": {"id": song_id, "request": [1]}}),
        },
    ]
    for fields in junk:
        r.xadd("cantor:events", fields)
    for _ in range(2):
        song = run(made(studio.bravo))
        heard = run(listed(studio.alpha, song["id"]))
        deadline = time.monotonic() + 30
        while heard["state"] != "done" and time.monotonic() < deadline:
            time.sleep(0.1)
            heard = run(listed(studio.alpha, song["id"]))
        judge(t, heard["state"] == "done", f"alpha heard {heard['state']}")
    counted = run(pool_status(studio.alpha))["refused_entries"]["events"] - before
    judge(t, counted >= len(junk), f"{counted} of {len(junk)} junk events counted")
    assert not t.lost, t.lost


def test_member_records_of_the_wrong_type_break_nothing(studio, tally):
    """Member reports that are a list, a number for an address, an id that is no id: the
    songs, a new song and the pool still answer on every member, and `cantor pool status`
    shows the pool and what it refused."""
    t = tally("pool attack: a member record of the wrong type")
    r = studio.attacker()
    junk = {"0badc0ffee00": "[1]", "0badc0ffee01": json.dumps({"url": 5}), "x y": "{}"}
    r.hset("cantor:members", mapping=junk)
    for node_id in junk:
        r.set(f"cantor:alive:{node_id}", "1", ex=3600)
    try:

        async def calls(member: PoolNode):
            async with member.http() as h:
                return [
                    ("songs", await h.get("/v1/songs")),
                    ("pool", await h.get("/v1/pool")),
                    ("new song", await h.post("/v1/songs", json=SKETCH_SONG)),
                ]

        for member in (studio.alpha, studio.bravo):
            for what, answer in run(calls(member)):
                judge(
                    t,
                    answer.status_code < 300,
                    f"{member.name} {what}: {answer.status_code} {answer.text[:100]}",
                )
        env = {
            **os.environ,
            "CANTOR_HOME": str(studio.alpha.home),
            "CANTOR_POOL_URL": studio.redis.url,
            "CANTOR_POOL_PASSWORD": studio.redis.password,
        }
        done = subprocess.run(
            [sys.executable, "-m", "cantor_desktop.cli.main", "pool", "status"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        ok = done.returncode == 0 and "refused from Redis" in done.stdout
        judge(t, ok, f"cantor pool status: {done.returncode} {done.stderr[-200:]}")
    finally:
        r.hdel("cantor:members", *junk)
        r.delete(*(f"cantor:alive:{i}" for i in junk))
    assert not t.lost, t.lost


def test_a_fake_member_cannot_take_a_real_members_name(studio, tally):
    """Sixteen fake "bravo"s (ids of their own, an address where nothing listens): songs
    sent to bravo by name are made by the real bravo, all of them."""
    from support.procs import free_port

    t = tally("pool attack: a fake member with a real member's name")
    r = studio.attacker()
    fakes = [f"f4ce0000b0{i:02x}" for i in range(16)]
    nowhere = f"http://127.0.0.1:{free_port()}"
    for node_id in fakes:
        fake_member(r, node_id, "bravo", nowhere)
    try:
        listed = [m for m in run(pool_status(studio.alpha))["members"] if m["name"] == "bravo"]
        assert len(listed) == len(fakes) + 1, "alpha does not know the fakes: no attack"
        ids = [run(post(studio.alpha, SKETCH_SONG, node="bravo")) for _ in range(4)]
        done = run(all_finished(studio.alpha, ids, timeout=120))
        for song_id in ids:
            maker = (done[song_id].get("node") or {}).get("id")
            judge(t, maker == studio.ids["bravo"], f"{song_id} made by {maker}")
    finally:
        r.hdel("cantor:members", *fakes)
        r.delete(*(f"cantor:alive:{i}" for i in fakes))
    assert not t.lost, t.lost


def test_secrets_never_go_on_a_command_line(studio, tally, tmp_path):
    """The Redis password in a pool URL and the pool's token after --token are refused,
    naming the private ways, and nothing is joined."""
    t = tally("pool attack: a secret left on the command line")
    env = {**os.environ, "CANTOR_HOME": str(tmp_path / "member")}
    env.pop("CANTOR_POOL_PASSWORD", None)
    for argv in (
        ["pool", "join", studio.redis.url_with_password],
        ["pool", "join", studio.redis.url, "--token", "the-pools-token"],
        ["node", "--pool", studio.redis.url_with_password],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cantor_desktop.cli.main", *argv],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        ok = done.returncode == 2 and "command line can be read" in done.stderr
        judge(t, ok, f"{argv[:2]}: {done.returncode} {done.stderr[-160:]}")
    assert not t.lost, t.lost
