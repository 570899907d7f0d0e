"""A pool whose Redis speaks TLS only (``rediss://``), its certificate signed by a CA of the
studio's own: a real redis-server started with ``--tls-port`` (and no plain port) on a free
loopback port, a real node given that CA (``[pool] ca``) that makes a song through it, and
a node or ``cantor pool join`` given another CA refused with a message naming the problem."""

from __future__ import annotations

import asyncio
import io

import pytest
from support.pool_nodes import TOKEN, PoolNode, all_finished, audio_digest, post, wait_pool_state
from support.redis_server import RedisServer, require
from support.tls_certs import authority, server_certificate

from cantor_desktop.auth import access
from cantor_desktop.cli.main import main
from cantor_desktop.pool import credentials

# one TLS Redis for the module's tests; the worker of test_pool's pool runs them (its
# members start their engines one pool at a time, not beside another pool's)
pytestmark = pytest.mark.xdist_group("test_pool")

SKETCH_SONG = {"caption": "glass harmonica", "duration": 10, "model": "sketch"}


@pytest.fixture(scope="module")
def tls_pool(tmp_path_factory):
    """(Redis with TLS only, the studio's CA, a CA that did not sign Redis's certificate)."""
    require()
    base = tmp_path_factory.mktemp("tls")
    studio, stranger = authority(base / "ca", "studio"), authority(base / "ca", "stranger")
    cert, key = server_certificate(studio, base / "redis-tls")
    redis = RedisServer(base / "redis", tls=(cert, key, studio.cert)).start()
    try:
        yield redis, studio, stranger
    finally:
        redis.stop()


def test_a_node_joins_a_rediss_pool_with_the_studios_ca_and_makes_a_song(tls_pool, tmp_path):
    redis, studio, stranger = tls_pool
    assert redis.url.startswith("rediss://")
    member = PoolNode(redis, tmp_path / "t", "tango", ca=studio.cert)
    wrong = PoolNode(redis, tmp_path / "w", "whisky", ca=stranger.cert)

    async def go():
        await member.start()
        try:
            connected = await wait_pool_state(member, "connected")
            song_id = await post(member, SKETCH_SONG)
            found = await all_finished(member, [song_id])
            heard = await audio_digest(member, song_id)
            # a node given a CA that did not sign Redis's certificate starts, says why the
            # pool is unreachable, and never joins
            await wrong.start()
            try:
                refused = await wait_pool_state(wrong, "unreachable")
                for _ in range(20):  # its first attempts may still be on their way
                    if "TLS" in (refused.get("error") or ""):
                        break
                    await asyncio.sleep(0.25)
                    refused = await wait_pool_state(wrong, "unreachable")
                async with member.http() as h:
                    pool = (await h.get("/v1/pool")).json()
            finally:
                await wrong.stop()
        finally:
            await member.stop()
        return connected, found[song_id], heard, refused, pool

    connected, done, heard, refused, pool = run(go())
    assert connected["tls"] is True and connected["url"] == redis.url
    assert done["state"] == "done" and done["node"]["name"] == "tango"
    assert len(done["takes"]) == 1 and heard[0] == 200
    error = refused["error"]
    assert f"TLS: the certificate of Redis at {redis.url} is not trusted" in error, error
    assert str(stranger.cert) in error and "certificate" in error
    assert redis.password not in error
    assert {m["name"] for m in pool["members"]} == {"tango"}


def _join(monkeypatch, capsys, home, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("CANTOR_HOME", str(home))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(["pool", "join", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pool_join_takes_the_ca_and_refuses_a_certificate_it_does_not_trust(
    tls_pool, tmp_path, monkeypatch, capsys
):
    redis, studio, stranger = tls_pool
    monkeypatch.setenv(credentials.PASSWORD_ENV, redis.password)
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    home = tmp_path / "home"
    join = (redis.url, "--name", "yankee")

    code, out, err = _join(monkeypatch, capsys, home, *join, "--ca", str(stranger.cert))
    assert code == 1, out + err
    assert f"TLS: the certificate of Redis at {redis.url} is not trusted by the CA" in err
    assert str(stranger.cert) in err and redis.password not in err + out

    code, out, err = _join(monkeypatch, capsys, home, *join, "--ca", str(tmp_path / "no.pem"))
    assert code == 2 and "no.pem: cannot be read" in err
    (tmp_path / "not-a-cert.pem").write_text("hello")
    code, out, err = _join(
        monkeypatch, capsys, home, *join, "--ca", str(tmp_path / "not-a-cert.pem")
    )
    assert code == 2 and "not a PEM certificate file" in err

    monkeypatch.chdir(studio.cert.parent)  # a relative path is kept as the absolute one
    code, out, err = _join(monkeypatch, capsys, home, *join, "--ca", studio.cert.name)
    assert code == 0, err
    toml = (home / "node.toml").read_text()
    assert redis.url in toml and f'ca = "{studio.cert}"' in toml
    assert redis.password not in toml


def run(coro):
    return asyncio.run(coro)
