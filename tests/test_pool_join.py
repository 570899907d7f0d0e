"""`cantor pool join / status / leave` against a real redis-server (password, append-only
file): the first member's token becomes the pool's, a later member must give it, the Redis
password goes to the keyring and never into node.toml; and the pool URL's parsing."""

from __future__ import annotations

import io
import json

import pytest
from support.redis_server import RedisServer, require

from cantor_desktop import access
from cantor_desktop.cli.main import main
from cantor_desktop.pool import address as pool_address
from cantor_desktop.pool import credentials


@pytest.fixture
def redis(tmp_path):
    require()
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def _cantor(monkeypatch, capsys, home, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setenv("CANTOR_HOME", str(home))
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_join_makes_the_first_token_the_pools_and_asks_later_members_for_it(
    redis, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv(credentials.PASSWORD_ENV, raising=False)
    monkeypatch.delenv(access.TOKEN_ENV, raising=False)
    first, second = tmp_path / "first", tmp_path / "second"
    url = redis.url
    join = ("pool", "join", url, "--password-stdin")

    code, out, err = _cantor(monkeypatch, capsys, first, *join, "--name", "a", stdin="wrong\n")
    assert code == 1 and "Redis refused" in err and "wrong" not in err + out

    code, out, err = _cantor(
        monkeypatch, capsys, first, *join, "--name", "a", stdin=redis.password + "\n"
    )
    assert code == 0, err
    assert "its first member" in out
    toml = (first / "node.toml").read_text()
    assert url in toml and redis.password not in toml  # the password is in the keyring
    _code, pool_token, _err = _cantor(monkeypatch, capsys, first, "node", "token")
    pool_token = pool_token.strip()

    code, out, err = _cantor(
        monkeypatch, capsys, second, *join, "--token", "not-the-pools", stdin=redis.password
    )
    assert code == 1 and "not the token of the pool" in err
    assert not (second / "node.toml").exists() or url not in (second / "node.toml").read_text()

    code, out, err = _cantor(
        monkeypatch, capsys, second, *join, "--token", pool_token, stdin=redis.password
    )
    assert code == 0, err
    _code, second_token, _err = _cantor(monkeypatch, capsys, second, "node", "token")
    assert second_token.strip() == pool_token

    # status finds the password this member kept (no member runs: none alive)
    code, out, err = _cantor(monkeypatch, capsys, second, "pool", "status", "--json")
    assert code == 0, err
    assert json.loads(out)["url"] == url

    code, out, err = _cantor(monkeypatch, capsys, second, "pool", "leave")
    assert code == 0 and "left the pool" in out
    _code, own, _err = _cantor(monkeypatch, capsys, second, "node", "token")
    assert own.strip() != pool_token
    assert url not in (second / "node.toml").read_text()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://studio:6379/0", "must start with redis://"),
        ("redis:///0", "names no host"),
        ("redis://studio:6379/zero", "the path is the database number"),
        ("redis://studio:6379/0?password=x", "takes no ?query"),
    ],
)
def test_a_bad_pool_url_says_what_is_wrong(url, problem):
    with pytest.raises(pool_address.PoolAddressError) as exc:
        pool_address.parse(url)
    assert problem in str(exc.value)


def test_the_redis_password_never_shows_and_never_goes_into_node_toml():
    found = pool_address.parse("redis://cantor:s3cret@studio:6380/2")
    assert (found.user, found.password, found.port, found.db) == ("cantor", "s3cret", 6380, 2)
    assert "s3cret" not in found.shown()
    assert pool_address.redact("redis://cantor:s3cret@studio/0") == "redis://cantor:***@studio/0"
    assert "keyring" in (pool_address.check("redis://:s3cret@studio/0") or "")
    assert pool_address.check("rediss://studio:6379/0") is None


def test_redis_keeps_a_check_of_the_pools_token_never_the_token():
    check = credentials.token_check("the-pools-token")
    assert "the-pools-token" not in check
    assert credentials.token_matches("the-pools-token", check)
    assert not credentials.token_matches("another-token", check)
