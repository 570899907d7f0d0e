"""Download faults: cuts at random offsets, flipped bytes, a disk that fills up.

Run: .venv/bin/python -m pytest -q -m slow tests/faults/test_download_faults.py
Each test prints "tried / survived / lost". CANTOR_FAULT_SEED picks the random offsets.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cantor_desktop.fetch import download as dl
from cantor_desktop.fetch.download import DiskFull, DownloadError, HashMismatch, download
from support.http_files import FileServer

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("CANTOR_FAULT_SEED", "2026"))
SIZE = 2 * 1024 * 1024 + 4321


@pytest.fixture(scope="module")
def blob() -> bytes:
    return random.Random(SEED).randbytes(SIZE)


def report(capsys, what: str, tried: int, survived: int, lost: int, extra: str = "") -> None:
    with capsys.disabled():
        print(
            f"\n[faults] {what}: tried {tried} / survived {survived} / lost {lost}"
            f"{' — ' + extra if extra else ''}"
        )


def fetch(url: str, dest: Path, **kw) -> Path:
    kw.setdefault("backoff", 0.0)
    return asyncio.run(download(url, dest, **kw))


def test_cut_at_50_random_offsets_resumes_byte_identical(blob, tmp_path, capsys):
    rng = random.Random(SEED)
    digest = hashlib.sha256(blob).hexdigest()
    offsets = sorted(rng.sample(range(1, SIZE), 50))
    tried = survived = lost = 0
    failures: list[str] = []
    with FileServer({"/f.bin": blob}) as srv:
        for i, off in enumerate(offsets):
            tried += 1
            dest = tmp_path / f"f{i}.bin"
            srv.clear_log()
            srv.cut("/f.bin", after=off)
            across_calls = i % 2 == 1  # odd trials: the first call gives up, a new call resumes
            try:
                if across_calls:
                    with pytest.raises(DownloadError, match="connection"):
                        fetch(srv.url("/f.bin"), dest, sha256=digest, retries=0)
                    part = dl.part_path(dest)
                    assert part.read_bytes() == blob[:off], "the kept part is not a clean prefix"
                    assert not dest.exists()
                fetch(srv.url("/f.bin"), dest, sha256=digest)
                gets = srv.requests_for("/f.bin")
                assert gets[-1].header("range") == f"bytes={off}-", gets[-1].headers
                assert gets[-1].status == 206
                assert dest.read_bytes() == blob
                assert not dl.part_path(dest).exists()
                survived += 1
            except AssertionError as exc:
                lost += 1
                failures.append(f"offset {off}: {exc}")
            dest.unlink(missing_ok=True)
    report(
        capsys,
        "download cut at random offsets",
        tried,
        survived,
        lost,
        f"seed {SEED}, {SIZE} bytes, half resumed by a second call",
    )
    assert not failures, failures


def test_flipped_byte_refused_never_installed(blob, tmp_path, capsys):
    rng = random.Random(SEED + 1)
    digest = hashlib.sha256(blob).hexdigest()
    tried = survived = lost = 0
    failures: list[str] = []
    with FileServer({"/f.bin": blob}) as srv:
        for i in range(10):
            tried += 1
            flip = rng.randrange(SIZE)
            dest = tmp_path / f"f{i}.bin"
            srv.clear_faults()
            if i % 2:
                # the flip lands in the resumed half of a cut download
                cut = rng.randrange(1, flip) if flip > 1 else 1
                srv.cut("/f.bin", after=cut)
            srv.corrupt("/f.bin", offset=flip, times=None)
            try:
                with pytest.raises(HashMismatch):
                    fetch(srv.url("/f.bin"), dest, sha256=digest)
                assert not dest.exists(), "a corrupt file was installed"
                assert not dl.part_path(dest).exists(), "the corrupt part was kept"
                survived += 1
            except AssertionError as exc:
                lost += 1
                failures.append(f"flip at {flip}: {exc}")
        # after the faults: a clean download still works
        srv.clear_faults()
        fetch(srv.url("/f.bin"), tmp_path / "clean.bin", sha256=digest)
        assert (tmp_path / "clean.bin").read_bytes() == blob
    report(capsys, "flipped byte", tried, survived, lost, "HashMismatch, nothing installed")
    assert not failures, failures


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to create a 4 MiB tmpfs")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_during_download(tmp_path, small_tmpfs, capsys):
    data = random.Random(SEED + 2).randbytes(3 * 1024 * 1024)
    digest = hashlib.sha256(data).hexdigest()
    dest = small_tmpfs / "model.bin"
    part = dl.part_path(dest)
    filler = small_tmpfs / "filler"

    async def fill_the_disk_midway(url):
        task = asyncio.create_task(download(url, dest, sha256=digest, backoff=0.0))
        while not part.exists() or part.stat().st_size < 512 * 1024:
            await asyncio.sleep(0.01)
        # another program takes all the space that is left
        with open(filler, "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        return await task

    with FileServer({"/m.bin": data}) as srv:
        srv.throttle("/m.bin", 3_000_000, times=1)
        t0 = time.monotonic()
        with pytest.raises(DiskFull) as info:
            asyncio.run(fill_the_disk_midway(srv.url("/m.bin")))
        message = str(info.value)
        assert "Disk full while writing" in message and str(part) in message
        assert "kept" in message
        assert not dest.exists(), "a partial file was installed"
        kept = part.read_bytes()
        assert 0 < len(kept) < len(data)
        assert kept == data[: len(kept)], "the kept part is corrupt"
        # with the space back, the next call resumes from the kept part
        filler.unlink()
        fetch(srv.url("/m.bin"), dest, sha256=digest)
        assert dest.read_bytes() == data and not part.exists()
        assert srv.requests_for("/m.bin")[-1].header("range") == f"bytes={len(kept)}-"
        elapsed = time.monotonic() - t0
    report(
        capsys,
        "disk full during a download",
        1,
        1,
        0,
        f"kept {len(kept)} clean bytes, resumed after space was freed ({elapsed:.1f} s); "
        f"message: {message}",
    )


def test_not_enough_space_on_small_disk_refused_up_front(small_tmpfs, capsys):
    data = random.Random(SEED + 3).randbytes(5 * 1024 * 1024)  # bigger than the 4 MiB disk
    digest = hashlib.sha256(data).hexdigest()
    dest = small_tmpfs / "big.bin"
    with FileServer({"/big.bin": data}) as srv:
        # size unknown to the caller: the server's Content-Length is checked before writing
        with pytest.raises(dl.NotEnoughSpace, match="need 5.0 MiB"):
            fetch(srv.url("/big.bin"), dest, sha256=digest)
        assert not dest.exists() and not dl.part_path(dest).exists()
        # size known: refused before any request
        srv.clear_log()
        with pytest.raises(dl.NotEnoughSpace):
            fetch(srv.url("/big.bin"), dest, sha256=digest, size=len(data))
        assert srv.requests == []
    report(capsys, "not enough space", 2, 2, 0, "refused before the first byte")


# -- ranged (parallel) downloads ---------------------------------------------------------

RANGED = {"chunk": 128 * 1024, "connections": 4}  # a 2-MiB file in about twenty ranges


def test_ranged_cuts_at_random_offsets_resume_byte_identical(blob, tmp_path, capsys):
    """A range answer cut at a random offset: retried in the same call, or (odd trials)
    the call gives up and the next call resumes from the ranges file, fetching only what is
    missing. The saved ranges always hold the file's own bytes."""
    from cantor_desktop.fetch import partfile

    rng = random.Random(SEED + 4)
    digest = hashlib.sha256(blob).hexdigest()
    tried = survived = lost = 0
    failures: list[str] = []
    with FileServer({"/f.bin": blob}) as srv:
        for i in range(30):
            tried += 1
            dest = tmp_path / f"r{i}.bin"
            srv.clear_faults()
            srv.clear_log()
            after = rng.randrange(1, 32 * 1024)  # inside the range (32 KiB or more) it cuts
            srv.cut("/f.bin", after=after, times=rng.randint(1, 3), ranged=True)
            across_calls = i % 2 == 1
            try:
                if across_calls:
                    with pytest.raises(DownloadError):
                        fetch(srv.url("/f.bin"), dest, sha256=digest, retries=0, **RANGED)
                    part = dl.part_path(dest)
                    saved = partfile.load(part)
                    assert saved is not None, "no ranges file kept"
                    data = part.read_bytes()
                    for r in saved.ranges:
                        assert data[r.start : r.start + r.got] == blob[r.start : r.start + r.got]
                    srv.clear_faults()
                    srv.clear_log()
                    fetch(srv.url("/f.bin"), dest, sha256=digest, **RANGED)
                    sent = sum(r.bytes_sent for r in srv.requests_for("/f.bin"))
                    assert sent == SIZE - saved.received, (sent, SIZE - saved.received)
                else:
                    fetch(srv.url("/f.bin"), dest, sha256=digest, **RANGED)
                assert dest.read_bytes() == blob
                assert not dl.part_path(dest).exists()
                assert not partfile.ranges_path(dl.part_path(dest)).exists()
                survived += 1
            except AssertionError as exc:
                lost += 1
                failures.append(f"trial {i}, cut after {after}: {exc}")
            dest.unlink(missing_ok=True)
    report(
        capsys,
        "ranged download cut at random offsets",
        tried,
        survived,
        lost,
        f"seed {SEED}, {SIZE} bytes over 4 connections, half resumed by a second call",
    )
    assert not failures, failures


def test_ranged_flipped_byte_refused_never_installed(blob, tmp_path, capsys):
    from cantor_desktop.fetch import partfile

    rng = random.Random(SEED + 5)
    digest = hashlib.sha256(blob).hexdigest()
    tried = survived = lost = 0
    failures: list[str] = []
    with FileServer({"/f.bin": blob}) as srv:
        for i in range(10):
            tried += 1
            flip = rng.randrange(SIZE)
            dest = tmp_path / f"f{i}.bin"
            srv.clear_faults()
            srv.corrupt("/f.bin", offset=flip, times=None)
            try:
                with pytest.raises(HashMismatch):
                    fetch(srv.url("/f.bin"), dest, sha256=digest, **RANGED)
                part = dl.part_path(dest)
                assert not dest.exists(), "a corrupt file was installed"
                assert not part.exists() and not partfile.ranges_path(part).exists()
                survived += 1
            except AssertionError as exc:
                lost += 1
                failures.append(f"flip at {flip}: {exc}")
    report(capsys, "ranged flipped byte", tried, survived, lost, "HashMismatch, nothing kept")
    assert not failures, failures


def test_disk_full_during_a_ranged_download(tmp_path, small_tmpfs, capsys):
    from cantor_desktop.fetch import partfile

    data = random.Random(SEED + 6).randbytes(3 * 1024 * 1024)
    digest = hashlib.sha256(data).hexdigest()
    dest = small_tmpfs / "model.bin"
    part = dl.part_path(dest)
    filler = small_tmpfs / "filler"

    async def fill_the_disk_midway(url):
        task = asyncio.create_task(download(url, dest, sha256=digest, backoff=0.0, **RANGED))
        while partfile.received(part) < 512 * 1024 or partfile.load(part) is None:
            await asyncio.sleep(0.01)
        with open(filler, "wb", buffering=0) as fh:  # the sparse part's holes: all that is left
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
        return await task

    with FileServer({"/m.bin": data}) as srv:
        srv.throttle("/m.bin", 600_000)
        with pytest.raises(DiskFull) as info:
            asyncio.run(fill_the_disk_midway(srv.url("/m.bin")))
        message = str(info.value)
        assert "Disk full while writing" in message and "kept" in message
        assert not dest.exists(), "a partial file was installed"
        filler.unlink()
        saved = partfile.load(part)
        assert saved is not None and 0 < saved.received < len(data)
        kept = part.read_bytes()
        for r in saved.ranges:
            assert kept[r.start : r.start + r.got] == data[r.start : r.start + r.got]
        srv.clear_faults()
        srv.clear_log()
        fetch(srv.url("/m.bin"), dest, sha256=digest, **RANGED)
        assert dest.read_bytes() == data and not part.exists()
        assert sum(r.bytes_sent for r in srv.requests_for("/m.bin")) == len(data) - saved.received
    report(
        capsys,
        "disk full during a ranged download",
        1,
        1,
        0,
        f"kept {saved.received} clean bytes in ranges, resumed after space was freed",
    )
