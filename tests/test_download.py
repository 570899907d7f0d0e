"""The downloader against a real HTTP server on 127.0.0.1 (tests/support/http_files.py)."""

from __future__ import annotations

import asyncio
import hashlib
import random
import shutil
import time

import httpx
import pytest

from cantor_desktop.fetch import download as dl
from cantor_desktop.fetch.download import (
    AuthRequired,
    DownloadError,
    HashMismatch,
    HTTPStatus,
    NotEnoughSpace,
    Progress,
    Stalled,
    download,
)
from support.http_files import FileServer

SIZE = 3 * 1024 * 1024 + 12345


@pytest.fixture(scope="module")
def blob() -> bytes:
    return random.Random(7).randbytes(SIZE)


@pytest.fixture(scope="module")
def digest(blob) -> str:
    return hashlib.sha256(blob).hexdigest()


@pytest.fixture
def server(blob):
    with FileServer({"/f.bin": blob, "/cdn/f.bin": blob}) as srv:
        yield srv


def run(coro):
    return asyncio.run(coro)


def fetch(url, dest, **kw):
    kw.setdefault("backoff", 0.01)
    return run(download(url, dest, **kw))


def test_full_download_with_hash_and_progress(server, blob, digest, tmp_path):
    seen: list[Progress] = []
    dest = tmp_path / "out" / "f.bin"
    assert (
        fetch(server.url("/f.bin"), dest, sha256=digest, size=SIZE, on_progress=seen.append) == dest
    )
    assert dest.read_bytes() == blob
    assert not dl.part_path(dest).exists()
    assert seen and seen[-1].received == SIZE and seen[-1].total == SIZE
    assert seen[-1].speed > 0 and seen[-1].resumed_from == 0
    assert [p.received for p in seen] == sorted(p.received for p in seen)
    assert dl.sha256_file(dest) == digest


def test_redirect_followed_and_authorization_dropped_cross_host(server, blob, digest, tmp_path):
    # 127.0.0.1 → localhost is another origin: httpx must not forward the token there.
    server.redirect("/resolve/", f"http://localhost:{server.port}/cdn/")
    dest = tmp_path / "f.bin"
    fetch(
        server.url("/resolve/f.bin"),
        dest,
        sha256=digest,
        headers={"Authorization": "Bearer secret"},
    )
    assert dest.read_bytes() == blob
    first, second = server.requests[0], server.requests[-1]
    assert first.path == "/resolve/f.bin" and first.header("authorization") == "Bearer secret"
    assert second.path == "/cdn/f.bin" and second.header("authorization") is None


def test_same_host_redirect_keeps_authorization(server, blob, digest, tmp_path):
    server.redirect("/resolve/", "/cdn/")
    server.require_token("/cdn/", "tok")
    dest = tmp_path / "f.bin"
    fetch(
        server.url("/resolve/f.bin"), dest, sha256=digest, headers={"Authorization": "Bearer tok"}
    )
    assert dest.read_bytes() == blob


def test_cut_connection_resumes_with_range(server, blob, digest, tmp_path):
    server.cut("/f.bin", after=1_000_000)
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    gets = server.requests_for("/f.bin")
    assert len(gets) == 2
    assert gets[0].header("range") is None
    assert gets[1].header("range") == "bytes=1000000-" and gets[1].status == 206


def test_existing_part_is_resumed_and_hashed(server, blob, digest, tmp_path):
    dest = tmp_path / "f.bin"
    dl.part_path(dest).write_bytes(blob[:777_777])
    seen: list[Progress] = []
    fetch(server.url("/f.bin"), dest, sha256=digest, on_progress=seen.append)
    assert dest.read_bytes() == blob
    assert server.requests_for("/f.bin")[0].header("range") == "bytes=777777-"
    assert seen[-1].resumed_from == 777_777 and seen[-1].total == SIZE


def test_complete_part_finishes_on_416(server, blob, digest, tmp_path):
    dest = tmp_path / "f.bin"
    dl.part_path(dest).write_bytes(blob)
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert [r.status for r in server.requests_for("/f.bin")] == [416]


def test_stale_part_416_starts_over(server, blob, digest, tmp_path):
    dest = tmp_path / "f.bin"
    dl.part_path(dest).write_bytes(b"x" * (SIZE + 10))  # bigger than the file
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    gets = server.requests_for("/f.bin")
    assert [r.status for r in gets] == [416, 200]
    assert gets[1].header("range") is None


def test_server_ignoring_range_restarts_correctly(server, blob, digest, tmp_path):
    dest = tmp_path / "f.bin"
    dl.part_path(dest).write_bytes(b"garbage" * 1000)  # would corrupt the file if appended
    server.ignore_range("/f.bin")
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert server.requests_for("/f.bin")[0].status == 200


def test_stall_is_retried(server, blob, digest, tmp_path):
    server.stall("/f.bin", after=500_000, seconds=10)
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest, stall_timeout=0.5)
    assert dest.read_bytes() == blob
    gets = server.requests_for("/f.bin")
    assert len(gets) == 2 and gets[1].header("range") == "bytes=500000-"


def test_stall_gives_up_after_retries(server, digest, tmp_path):
    server.stall("/f.bin", after=0, seconds=10, times=None)
    dest = tmp_path / "f.bin"
    with pytest.raises(Stalled, match="no data for 0.3 s"):
        fetch(server.url("/f.bin"), dest, sha256=digest, stall_timeout=0.3, retries=2)
    assert len(server.requests_for("/f.bin")) == 3
    assert not dest.exists()


def test_5xx_is_retried_then_succeeds(server, blob, digest, tmp_path):
    server.fail("/f.bin", 503, times=2)
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert [r.status for r in server.requests_for("/f.bin")] == [503, 503, 200]


def test_404_is_final(server, digest, tmp_path):
    with pytest.raises(HTTPStatus, match="404") as info:
        fetch(server.url("/missing.bin"), tmp_path / "m.bin", sha256=digest)
    assert info.value.status == 404
    assert len(server.requests_for("/missing.bin")) == 1


def test_wrong_hash_leaves_nothing(server, tmp_path):
    dest = tmp_path / "f.bin"
    with pytest.raises(HashMismatch, match="sha256 mismatch for f.bin"):
        fetch(server.url("/f.bin"), dest, sha256="0" * 64)
    assert not dest.exists() and not dl.part_path(dest).exists()


def test_flipped_byte_refused(server, digest, tmp_path):
    server.corrupt("/f.bin", offset=SIZE // 3)
    dest = tmp_path / "f.bin"
    with pytest.raises(HashMismatch):
        fetch(server.url("/f.bin"), dest, sha256=digest)
    assert not dest.exists() and not dl.part_path(dest).exists()


def test_size_checked_without_hash(server, blob, tmp_path):
    dest = tmp_path / "f.bin"
    with pytest.raises(DownloadError, match="expected"):
        fetch(server.url("/f.bin"), dest, sha256=None, size=SIZE - 1)
    assert not dest.exists()
    fetch(server.url("/f.bin"), dest, sha256=None, size=SIZE)
    assert dest.read_bytes() == blob


def test_401_and_403_are_auth_required(server, digest, tmp_path):
    server.require_token("/f.bin", "tok")
    with pytest.raises(AuthRequired, match="401") as info:
        fetch(server.url("/f.bin"), tmp_path / "a.bin", sha256=digest)
    assert info.value.status == 401
    with pytest.raises(AuthRequired, match="403"):
        fetch(
            server.url("/f.bin"),
            tmp_path / "a.bin",
            sha256=digest,
            headers={"Authorization": "Bearer wrong"},
        )
    assert len(server.requests_for("/f.bin")) == 2  # not retried


def test_cancel_keeps_part_and_next_call_resumes(server, blob, digest, tmp_path):
    server.throttle("/f.bin", 2_000_000, times=1)
    dest = tmp_path / "f.bin"

    async def cancel_midway():
        task = asyncio.create_task(download(server.url("/f.bin"), dest, sha256=digest))
        part = dl.part_path(dest)
        while not part.exists() or part.stat().st_size < 1_100_000:
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancel_midway())
    part = dl.part_path(dest)
    kept = part.stat().st_size
    assert 1_000_000 <= kept < SIZE and not dest.exists()
    assert part.read_bytes() == blob[:kept]
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert server.requests_for("/f.bin")[-1].header("range") == f"bytes={kept}-"


def test_plain_http_to_other_hosts_refused(tmp_path):
    with pytest.raises(DownloadError, match="Refusing to download http://example.com/x"):
        fetch("http://example.com/x", tmp_path / "x", sha256=None)
    with pytest.raises(DownloadError, match="Refusing"):
        fetch("ftp://127.0.0.1/x", tmp_path / "x", sha256=None)


def test_redirect_to_plain_http_elsewhere_refused(server, digest, tmp_path):
    server.redirect("/resolve/", "http://example.com/cdn/")
    with pytest.raises(DownloadError, match="redirect .* to http://example.com/cdn/f.bin"):
        fetch(server.url("/resolve/f.bin"), tmp_path / "f.bin", sha256=digest)


def test_not_enough_space_refused_before_first_byte(server, digest, tmp_path):
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(NotEnoughSpace, match="Not enough disk space") as info:
        fetch(server.url("/f.bin"), tmp_path / "f.bin", sha256=digest, size=free * 4)
    assert info.value.needed == free * 4
    assert server.requests == []


def test_caller_client_is_used_and_left_open(server, blob, digest, tmp_path):
    async def go():
        async with httpx.AsyncClient() as client:
            await download(server.url("/f.bin"), tmp_path / "a.bin", sha256=digest, client=client)
            assert not client.is_closed
            await download(server.url("/f.bin"), tmp_path / "b.bin", sha256=digest, client=client)

    run(go())
    assert (tmp_path / "a.bin").read_bytes() == blob == (tmp_path / "b.bin").read_bytes()


def test_bad_sha256_argument(tmp_path):
    with pytest.raises(DownloadError, match="not 64 hex digits"):
        fetch("https://example.com/x", tmp_path / "x", sha256="abc")


def test_check_free_space_and_sha256_file(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"hello")
    assert dl.sha256_file(f) == hashlib.sha256(b"hello").hexdigest()
    dl.check_free_space(tmp_path / "not" / "yet", 1)
    with pytest.raises(NotEnoughSpace, match=str(tmp_path)):
        dl.check_free_space(tmp_path, 1 << 62)


def test_http_files_server_basics(blob):
    with FileServer({"/a": blob}, json_routes={"/api/tree": [{"path": "a"}]}) as srv:
        with httpx.Client() as c:
            assert c.get(srv.url("/api/tree?recursive=true")).json() == [{"path": "a"}]
            head = c.head(srv.url("/a"))
            assert head.status_code == 200 and int(head.headers["content-length"]) == SIZE
            r = c.get(srv.url("/a"), headers={"Range": f"bytes={SIZE}-"})
            assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{SIZE}"
            r = c.get(srv.url("/a"), headers={"Range": "bytes=10-19"})
            assert r.status_code == 206 and r.content == blob[10:20]
            assert c.get(srv.url("/nope")).status_code == 404


def test_progress_is_throttled_and_speed_smoothed(server, blob, digest, tmp_path):
    server.throttle("/f.bin", 4_000_000)  # ~0.8 s for the file
    seen: list[Progress] = []
    t0 = time.monotonic()
    fetch(server.url("/f.bin"), tmp_path / "f.bin", sha256=digest, on_progress=seen.append)
    elapsed = time.monotonic() - t0
    assert len(seen) <= elapsed * 10 + 2  # ≤ 10 per second plus the final one
    assert len(seen) >= 3
    assert seen[-1].received == SIZE and seen[-1].eta == 0.0
    # the smoothed speed follows what arrived (whatever this machine's pace): each sample
    # within a factor of four of the whole download's average rate
    average = SIZE / elapsed
    middle = [p.speed for p in seen[1:-1]]
    assert all(average / 4 < s < average * 4 for s in middle), (average, middle)
    assert all(p.eta is not None and p.eta >= 0 for p in seen)


def test_unresolvable_host_fails_at_once_with_a_clear_reason(tmp_path):
    # An offline machine: the host name does not resolve (.invalid never does). The default
    # backoff would retry for ~30 s; the user gets the reason at once instead.
    dest = tmp_path / "f.bin"
    with pytest.raises(DownloadError) as err:
        run(download("https://cantor-offline-test.invalid/f.bin", dest, sha256="0" * 64))
    assert "cantor-offline-test.invalid" in str(err.value)
    # one attempt: a retried download says "gave up after N attempts in a row"
    assert "does not resolve" in str(err.value) and "attempts" not in str(err.value)
    assert not dest.exists() and not dl.part_path(dest).exists()


def test_refused_connection_is_still_retried(tmp_path):
    from support.procs import free_port

    url = f"http://127.0.0.1:{free_port()}/f.bin"  # nothing listens there
    with pytest.raises(DownloadError) as err:
        fetch(url, tmp_path / "f.bin", sha256="0" * 64, retries=2)
    assert "gave up after 3 attempts in a row" in str(err.value)
