"""Ranged (parallel) downloads against real HTTP servers on 127.0.0.1: a file split into
ranges over several connections, written in place, resumed range by range after a cut, a
cancellation or Ctrl+C, its sha256 taken in order; one stream when the server ignores Range.

The chunk is made small (``chunk=CHUNK``) so a 3-MiB file has a dozen ranges; the product's
own 16-MiB chunk is used by the Ctrl+C test, which runs a real `cantor pull` process."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from support.http_files import FileServer
from support.hub import ModelHub

from cantor_desktop import config
from cantor_desktop.fetch import partfile
from cantor_desktop.fetch.connection_slots import ConnectionSlots
from cantor_desktop.fetch import download as dl
from cantor_desktop.fetch.download import DownloadError, HashMismatch, Progress, Stats, download
from cantor_desktop.models import library

SIZE = 3 * 1024 * 1024 + 4321
CHUNK = 256 * 1024


@pytest.fixture(scope="module")
def blob() -> bytes:
    return random.Random(11).randbytes(SIZE)


@pytest.fixture(scope="module")
def digest(blob) -> str:
    return hashlib.sha256(blob).hexdigest()


@pytest.fixture
def server(blob):
    with FileServer({"/f.bin": blob}) as srv:
        yield srv


def fetch(url, dest, **kw):
    kw.setdefault("backoff", 0.0)
    kw.setdefault("chunk", CHUNK)
    kw.setdefault("connections", 4)
    return asyncio.run(download(url, dest, **kw))


def ranges_asked(srv: FileServer, path: str = "/f.bin") -> list[tuple[int, int]]:
    out = []
    for r in srv.requests_for(path):
        rng = r.header("range")
        if rng:
            a, _, b = rng.removeprefix("bytes=").partition("-")
            out.append((int(a), int(b)))
    return out


def test_ranges_over_several_connections_make_the_file(server, blob, digest, tmp_path):
    seen: list[Progress] = []
    stats = Stats()
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest, on_progress=seen.append, stats=stats)
    assert dest.read_bytes() == blob
    assert not dl.part_path(dest).exists()
    assert not partfile.ranges_path(dl.part_path(dest)).exists()
    assert stats.mode == "ranges" and stats.connections == 4 and stats.ranges > 8
    gets = server.requests_for("/f.bin")
    # the first answer is a plain GET (its first bytes make the first range), then ranges
    assert gets[0].header("range") is None and gets[0].status == 200
    asked = sorted(ranges_asked(server))
    assert all(r.status == 206 for r in gets[1:])
    covered = [(0, CHUNK // 4 - 1)] + asked
    assert covered[0][0] == 0 and covered[-1][1] == SIZE - 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(covered))  # no gap, no overlap
    # one progress bar for the file: monotonic, to the end
    assert [p.received for p in seen] == sorted(p.received for p in seen)
    assert seen[-1].received == SIZE and seen[-1].total == SIZE and seen[-1].resumed_from == 0
    # every byte hashed as it arrived: nothing was read back from the part
    assert stats.reread == 0 and stats.read_saved == 0


def _received(dest) -> int:
    return dl.part_received(dest)


def test_cut_at_half_resumes_byte_identical_from_the_saved_ranges(blob, digest, tmp_path):
    """The server goes away at 50 %: the call fails, the part and its ranges file stay; a
    new call (another server, the same file) fetches only what is missing."""
    dest = tmp_path / "f.bin"
    part = dl.part_path(dest)
    srv = FileServer({"/f.bin": blob})
    srv.start()
    srv.throttle("/f.bin", 400_000)  # per connection: ~2 s for the file over 4
    cut = threading.Event()

    def on_progress(p: Progress) -> None:
        if p.received >= SIZE // 2 and not cut.is_set():
            cut.set()  # every connection dropped, nothing listens any more
            threading.Thread(target=srv.stop).start()

    try:
        with pytest.raises(DownloadError):
            fetch(srv.url("/f.bin"), dest, sha256=digest, retries=1, on_progress=on_progress)
    finally:
        srv.stop()
    assert cut.is_set()
    assert not dest.exists()
    saved = partfile.load(part)
    assert saved is not None and saved.size == SIZE
    have = saved.received
    assert SIZE // 2 <= have < SIZE
    with open(part, "rb") as fh:  # what the ranges file calls saved is the file's bytes
        for r in saved.ranges:
            fh.seek(r.start)
            assert fh.read(r.got) == blob[r.start : r.start + r.got]
    assert library.FileInfo("f", "dit", SIZE, str(dest), "partial", on_disk=have).to_get < SIZE

    stats = Stats()
    seen: list[Progress] = []
    with FileServer({"/f.bin": blob}) as again:
        fetch(again.url("/f.bin"), dest, sha256=digest, stats=stats, on_progress=seen.append)
        sent = sum(r.bytes_sent for r in again.requests_for("/f.bin"))
        asked = ranges_asked(again)
    assert dest.read_bytes() == blob
    assert not part.exists() and not partfile.ranges_path(part).exists()
    assert stats.mode == "ranges" and stats.resumed_from == have
    assert sent == SIZE - have  # only what was missing came again
    starts = {r.start + r.got for r in saved.ranges if r.got < r.size}
    assert {a for a, _ in asked} == starts  # each range from where it stopped
    assert stats.read_saved == have  # the saved bytes were read once, for the hash
    assert seen[-1].resumed_from == have and seen[-1].received == SIZE


def test_cancel_keeps_the_ranges_and_the_next_call_resumes(server, blob, digest, tmp_path):
    server.throttle("/f.bin", 500_000)
    dest = tmp_path / "f.bin"

    async def cancel_midway():
        task: asyncio.Task

        def on_progress(p: Progress) -> None:
            if p.received >= SIZE // 3:
                task.cancel()

        task = asyncio.create_task(
            download(
                server.url("/f.bin"),
                dest,
                sha256=digest,
                chunk=CHUNK,
                connections=4,
                on_progress=on_progress,
            )
        )
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    server.clear_faults()
    saved = partfile.load(dl.part_path(dest))
    assert saved is not None and SIZE // 3 <= saved.received < SIZE
    server.clear_log()
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert sum(r.bytes_sent for r in server.requests_for("/f.bin")) == SIZE - saved.received


def test_a_server_that_ignores_range_gets_one_stream(server, blob, digest, tmp_path):
    # It says Accept-Ranges but answers every range with the whole file (200).
    server.ignore_range("/f.bin")
    stats = Stats()
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest, stats=stats)
    assert dest.read_bytes() == blob
    assert stats.mode == "stream"
    gets = server.requests_for("/f.bin")
    assert gets[-1].header("range") is None and gets[-1].status == 200
    assert not partfile.ranges_path(dl.part_path(dest)).exists()


def test_a_server_without_ranges_is_never_asked_for_one(server, blob, digest, tmp_path):
    server.no_ranges("/f.bin")
    stats = Stats()
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest, stats=stats)
    assert dest.read_bytes() == blob and stats.mode == "stream"
    assert [r.header("range") for r in server.requests_for("/f.bin")] == [None]


def test_a_short_range_is_asked_again_from_where_it_stopped(server, blob, digest, tmp_path):
    server.cut("/f.bin", after=100_000, ranged=True)  # the first range answer ends early
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    asked = [r.header("range") for r in server.requests_for("/f.bin") if r.header("range")]
    # the ranges run at once, so whichever answer the server cut, the same range must be
    # asked again from 100,000 bytes further on
    spans = [tuple(int(x) for x in h.removeprefix("bytes=").split("-")) for h in asked]
    again = [(s, e) for (s, e) in spans if (s - 100_000, e) in spans]
    assert len(again) == 1, asked


def test_another_range_than_asked_is_asked_again(server, blob, digest, tmp_path):
    server.shift_range("/f.bin", by=1000)
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    asked = [r.header("range") for r in server.requests_for("/f.bin") if r.header("range")]
    assert len(asked) == len(set(asked)) + 1  # the shifted one, asked once more


def test_a_range_answer_past_its_end_is_not_written_past_it(server, blob, digest, tmp_path):
    server.widen_range("/f.bin", extra=50_000, times=3)
    dest = tmp_path / "f.bin"
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob


def test_wrong_bytes_in_a_range_are_refused_and_nothing_is_kept(server, digest, tmp_path):
    server.corrupt("/f.bin", offset=SIZE - 1000, ranged=True)  # in the last range
    dest = tmp_path / "f.bin"
    with pytest.raises(HashMismatch, match="sha256 mismatch for f.bin"):
        fetch(server.url("/f.bin"), dest, sha256=digest)
    part = dl.part_path(dest)
    assert not dest.exists() and not part.exists() and not partfile.ranges_path(part).exists()


def test_wrong_sha256_refuses_the_file(server, tmp_path):
    dest = tmp_path / "f.bin"
    with pytest.raises(HashMismatch):
        fetch(server.url("/f.bin"), dest, sha256="0" * 64)
    assert not dest.exists() and not dl.part_path(dest).exists()


def test_a_range_that_keeps_failing_fails_cleanly_and_keeps_the_rest(server, digest, tmp_path):
    server.fail("/f.bin", 503, times=None, ranged=True)
    dest = tmp_path / "f.bin"
    with pytest.raises(dl.HTTPStatus, match="503.*gave up after 3 attempts"):
        fetch(server.url("/f.bin"), dest, sha256=digest, retries=2)
    assert not dest.exists()
    saved = partfile.load(dl.part_path(dest))  # the first range came with the plain GET
    assert saved is not None and saved.received == CHUNK // 4
    server.clear_faults()
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dl.sha256_file(dest) == digest


def test_a_part_of_another_version_is_not_resumed(server, blob, digest, tmp_path):
    dest = tmp_path / "f.bin"
    part = dl.part_path(dest)
    part.write_bytes(b"\0" * SIZE)
    partfile.ranges_path(part).write_text(
        json.dumps(
            {
                "version": 1,
                "size": SIZE,
                "sha256": "1" * 64,
                "etag": None,
                "ranges": [[0, SIZE, SIZE // 2]],
            }
        )
    )
    fetch(server.url("/f.bin"), dest, sha256=digest)
    assert dest.read_bytes() == blob
    assert server.requests_for("/f.bin")[0].header("range") is None  # started over


def test_the_hub_token_never_reaches_the_cdn(tmp_path):
    """Ranges go straight to the resolved (signed) address without the hub's token; the
    CDN refuses any request that carries one (400), so one leak would fail this."""
    name = "acestep-v15-turbo-Q8_0.gguf"
    with ModelHub() as hub:
        sha = hub.add(name, size=SIZE)
        hub.gate(name, "hf_secret")
        hub.cdn.fail(hub.cdn_path(name), 403, times=1, ranged=True)  # a signature expired
        dest = tmp_path / name
        fetch(
            f"{hub.base_url}{hub.resolve_path(name)}",
            dest,
            sha256=sha,
            headers={"Authorization": "Bearer hf_secret"},
        )
        assert dest.read_bytes() == hub.files[name]
        cdn = hub.cdn.requests_for(hub.cdn_path(name))
        assert len(cdn) > 8 and all(r.header("authorization") is None for r in cdn)
        assert all(r.status in (200, 206, 403) for r in cdn)
        # resolved once, and again after the 403 of an expired signature (by each
        # connection that started a range before the address was known again)
        assert 2 <= len(hub.server.requests_for(hub.resolve_path(name))) <= 1 + 4


def test_connections_come_from_node_toml(server, blob, digest, tmp_path):
    with pytest.raises(config.ConfigError, match="downloads.connections"):
        config.set_from_text("downloads.connections", "0")
    assert config.load().get("downloads.connections") == 8
    config.set_from_text("downloads.connections", "1")
    stats = Stats()
    dest = tmp_path / "f.bin"
    asyncio.run(download(server.url("/f.bin"), dest, sha256=digest, chunk=CHUNK, stats=stats))
    assert stats.mode == "stream" and dest.read_bytes() == blob
    config.set_from_text("downloads.connections", "3")
    dest.unlink()
    asyncio.run(download(server.url("/f.bin"), dest, sha256=digest, chunk=CHUNK, stats=stats))
    assert stats.mode == "ranges" and stats.connections == 3 and dest.read_bytes() == blob


def test_a_shared_download_says_it_asked_for_everything_before_its_last_byte(tmp_path):
    """With connections shared (a pull's files), the next file may start once this one has
    asked for its last range, while its ranges still come.

    1 MiB in ranges of 256, 192, 144 … KiB over 2 connections; the first range request
    (192 KiB) paced at 100 KB/s, over a second, while the other connection takes every
    other range, the last one included: when the signal comes, the server is still
    sending the paced one."""
    blob = random.Random(5).randbytes(1 << 20)
    turn = ConnectionSlots(2).turn(0)
    dest = tmp_path / "f.bin"

    def unsent(srv: FileServer) -> int:
        """Bytes the server still has to send of the range answers it has begun."""
        ranged = [r for r in srv.requests_for("/f.bin") if r.header("range")]
        left = 0
        for r in ranged:
            a, _, b = r.header("range").removeprefix("bytes=").partition("-")
            left += max(0, int(b) + 1 - int(a) - r.bytes_sent)
        return left

    async def go(srv: FileServer) -> int:
        job = asyncio.create_task(
            download(
                srv.url("/f.bin"),
                dest,
                sha256=hashlib.sha256(blob).hexdigest(),
                slots=turn,
                connections=2,
                chunk=512 * 1024,
                backoff=0.0,
            )
        )
        await turn.asked_all.wait()
        left = unsent(srv)
        await job
        return left

    with FileServer({"/f.bin": blob}) as srv:
        srv.throttle("/f.bin", 100_000, times=1, ranged=True)
        left_when_asked = asyncio.run(go(srv))
    assert dest.read_bytes() == blob and turn.asked_all.is_set()
    assert left_when_asked > 0  # bytes were still coming after it was set
    assert turn.slots.free == 2


def test_plan_staggers_the_first_ranges_and_shrinks_the_last():
    ranges = partfile.plan(100 * 16, 4, 64, first=16)
    sizes = [r.size for r in ranges]
    assert sizes[:4] == [16, 32, 48, 64]
    assert sum(sizes) == 1600 and ranges[-1].end == 1600
    assert sizes[-2] < 64 and min(sizes[:-1]) >= 8  # the last one: what is left


# -- Ctrl+C to a real `cantor pull` ------------------------------------------------------

DIT = "acestep-v15-turbo-Q8_0.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"
PULL = [sys.executable, "-m", "cantor_desktop", "pull", "acestep-v15-turbo", "--lm-size", "0.6B"]


def test_ctrl_c_in_a_parallel_pull_resumes_range_by_range(monkeypatch, tmp_path):
    big = 48 * 1024 * 1024  # three of the product's 16-MiB chunks: 8 ranges or more
    with ModelHub() as hub:
        hub.add_set(DIT, LM, size=64 * 1024)
        hub.add(DIT, data=random.Random(5).randbytes(big))
        monkeypatch.setenv("HF_ENDPOINT", hub.base_url)
        hub.cdn.shape(rate=1_500_000)  # each connection: ~4 s for the file over 8
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            [*PULL, "--no-engine"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        dest = library.family_dir() / DIT
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _received(dest) < big // 3:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1, (out, err)
        assert "partial files are kept" in err
        saved = partfile.load(dl.part_path(dest))
        assert saved is not None and big // 3 <= saved.received < big
        assert len({r.start for r in saved.ranges if 0 < r.got < r.size}) >= 2  # in flight
        model = library.find("acestep-v15-turbo", lm_size="0.6B")
        assert model.state == library.PARTIAL
        assert model.files[0].on_disk == saved.received  # not the sparse part's size

        hub.cdn.shape()
        hub.cdn.clear_log()
        done = subprocess.run(
            [*PULL, "--no-engine"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "(resuming)" in done.stdout and "sha256 verified" in done.stdout
        assert dest.read_bytes() == hub.files[DIT]
        cdn = hub.cdn.requests_for(hub.cdn_path(DIT))
        assert sum(r.bytes_sent for r in cdn) == big - saved.received
        starts = {r.start + r.got for r in saved.ranges if r.got < r.size}
        asked = {int(r.header("range").removeprefix("bytes=").split("-")[0]) for r in cdn}
        assert asked == starts
