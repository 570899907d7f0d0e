"""`cantor pool join / status / leave` against a real redis-server (password, append-only
file): the first member's token becomes the pool's, a later member must give it, the Redis
password goes to the keyring and never into node.toml; the pool URL's parsing; a member
sends the token only to a node that proves it holds it."""

from __future__ import annotations

import io
import json

import pytest
from support.redis_server import RedisServer, require

from cantor_desktop.auth import access
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
        monkeypatch,
        capsys,
        second,
        *join,
        "--token-stdin",
        stdin=f"{redis.password}\nnot-the-pools\n",
    )
    assert code == 1 and "not the token of the pool" in err
    assert not (second / "node.toml").exists() or url not in (second / "node.toml").read_text()

    code, out, err = _cantor(
        monkeypatch,
        capsys,
        second,
        *join,
        "--token-stdin",
        stdin=f"{redis.password}\n{pool_token}\n",
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


def test_a_member_sends_the_pools_token_only_to_a_node_that_proves_it(monkeypatch):
    """A member's address comes from Redis: something else listening there (here a plain
    HTTP server that answers health like a node) is asked for a proof and sent nothing."""
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cantor_desktop.node.pool import peers as pool_peers
    from cantor_desktop.node.http_common import ApiError

    seen: list[dict[str, str]] = []

    class Stranger(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(dict(self.headers))
            body = json.dumps({"status": "ok", "port": self.server.server_port}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stranger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(access.TOKEN_ENV, "the-pools-token-0123456789abcdef")
    member = {"id": "evil", "name": "evil", "url": f"http://127.0.0.1:{server.server_port}"}
    try:
        for call in (
            pool_peers.send(member, "GET", "/v1/songs"),
            pool_peers.stream(member, "/v1/songs/x/audio", {"take": 1}),
        ):
            with pytest.raises(ApiError) as refused:
                asyncio.run(call)
            assert refused.value.status == 502
            assert "did not prove it holds the pool's token" in str(refused.value)
    finally:
        server.shutdown()
    assert seen and all(h.get("Authorization") is None for h in seen)


def test_no_secret_is_taken_from_the_command_line(redis, tmp_path, monkeypatch, capsys):
    """Every user of the machine can read a process's command line: a password in the pool
    URL and ``--token`` are refused, naming the ways that keep them private, and nothing
    is joined."""
    home = tmp_path / "member"
    for argv in (
        ("pool", "join", redis.url_with_password),
        ("pool", "join", redis.url, "--token", "the-pools-token"),
        ("node", "--pool", redis.url_with_password),
    ):
        code, out, err = _cantor(monkeypatch, capsys, home, *argv)
        assert code == 2, (argv, out, err)
        assert redis.password not in out + err and "the-pools-token" not in out + err
        assert "command line can be read by every user" in err
        assert "--password-stdin" in err or "--token-stdin" in err
    assert not (home / "node.toml").exists()


def test_a_pool_open_to_its_network_is_joined_only_when_the_user_says_so(
    redis, tmp_path, monkeypatch, capsys
):
    """Redis on another machine with no password, or with no TLS, exposes the pool to its
    network: the join says what it exposes and needs --allow-insecure (or a yes when asked);
    a node started on such a pool without that choice is refused with the reason."""
    from cantor_desktop import config
    from cantor_desktop.node.pool.membership import Pool, PoolRefused

    monkeypatch.delenv(credentials.PASSWORD_ENV, raising=False)
    exposed = pool_address.parse("redis://10.9.8.7:6379/0")
    said = pool_address.exposure(exposed, has_password=False) or ""
    assert "asks for no password" in said and "not encrypted" in said
    assert "Redis password" in (pool_address.exposure(exposed, has_password=True) or "")
    assert pool_address.exposure(pool_address.parse("rediss://10.9.8.7/0"), True) is None
    assert pool_address.exposure(pool_address.parse("redis://127.0.0.1/0"), False) is None

    home = tmp_path / "member"
    code, out, err = _cantor(monkeypatch, capsys, home, "pool", "join", "redis://10.9.8.7/0")
    assert code == 2 and "open to its network" in err and "--allow-insecure" in err
    assert not (home / "node.toml").exists()
    monkeypatch.setenv("CANTOR_HOME", str(home))
    cfg, _err = config.load_or_defaults()
    with pytest.raises(PoolRefused, match="open to its network"):
        Pool("redis://10.9.8.7:6379/0", cfg, ("127.0.0.1", 7823))


def test_a_new_token_never_begins_with_a_dash():
    """A token pasted where a leading "-" reads as an option (``--token-stdin``'s line is
    safe; an earlier release took ``--token T``): none begins with one."""
    tokens = [access.new_token() for _ in range(5000)]
    assert not [t for t in tokens if t.startswith("-")]
    assert len(set(tokens)) == len(tokens)
    assert all(len(t) == len(tokens[0]) >= 43 for t in tokens)
    allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert all(set(t) <= allowed for t in tokens)
