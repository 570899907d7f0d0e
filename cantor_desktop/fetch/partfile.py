"""The ``.part`` file of a ranged download: sized to the whole file up front, written in place
by several connections, its progress kept in a small ranges file, its sha256 taken in order.

- ``<dest>.part`` is truncated to the file's size when the download starts (sparse where the
  file system allows it) and every range is written at its own offset (``pwritev``).
- ``<dest>.part.ranges`` (JSON) lists each range and how many of its bytes are saved. It is
  written atomically (temp file, fsync, rename) about once a second and when the download
  stops, always after an ``fdatasync`` of the part, so it never counts a byte that is not
  on disk: a cut, a crash or Ctrl+C loses at most the last second, and the next call resumes
  every range where it stopped.
- The sha256 is computed in file order while ranges arrive. A batch at the hash frontier, or
  less than ``ahead`` bytes beyond it, is kept in memory until the frontier reaches it and
  hashed from there. A batch that arrives further ahead (the connection at the frontier is
  slow or cut) is not kept: the hasher reads those bytes back from the part when the
  frontier reaches them (``reread`` counts them). Bytes an earlier call saved are read from
  the part once, when the frontier reaches them.

Writing and hashing run on their own threads (hashlib and os.pwritev release the GIL); the
event loop only receives. Work handed to the writer is never dropped (a skipped batch would
leave a hole that the ranges file calls saved): stopping waits for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import hashlib
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..files import write_atomic
from ..units import human_size

VERSION = 1
SAVE_INTERVAL = 1.0  # seconds between checkpoints of the ranges file while data arrives
READ_BLOCK = 4 << 20  # bytes read back per hashing step
MAX_WRITES_IN_FLIGHT = 2  # batches of one range queued to the writer before it waits
_O_BINARY = getattr(os, "O_BINARY", 0)


def ranges_path(part: Path) -> Path:
    return part.with_name(part.name + ".ranges")


@dataclass
class Range:
    start: int
    end: int  # exclusive
    got: int = 0  # bytes saved from ``start`` on

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def done(self) -> bool:
        return self.got >= self.size

    @property
    def next_offset(self) -> int:
        return self.start + self.got


def plan(size: int, connections: int, chunk: int, first: int | None = None) -> list[Range]:
    """Ranges covering [0, size); the first one ``first`` bytes long when given.

    The first ``connections`` ranges grow from chunk/connections to chunk, so connections of
    equal speed finish them one after another and stay staggered (what arrives ahead of the
    hash frontier then stays near connections × chunk / 2); the last ranges shrink (what is
    left over twice the connections, at least chunk/8) so no connection idles long at the
    end while another fetches a whole chunk."""
    ranges: list[Range] = []
    pos = 0
    if first is not None and size > 0:
        pos = max(1, min(first, size))
        ranges.append(Range(0, pos))
    smallest = max(1, chunk // 8)
    while pos < size:
        k = len(ranges)
        n = chunk * (k + 1) // connections if k < connections else chunk
        left = size - pos
        n = min(n, max(smallest, left // (2 * connections)))
        n = max(1, min(n, left))
        ranges.append(Range(pos, pos + n))
        pos += n
    return ranges


@dataclass
class Saved:
    """What a ranges file says."""

    size: int
    sha256: str | None
    etag: str | None
    ranges: list[Range]

    @property
    def received(self) -> int:
        return sum(min(r.got, r.size) for r in self.ranges)


def load(part: Path) -> Saved | None:
    """The ranges file beside ``part`` when it is whole and matches the part; else None."""
    path = ranges_path(part)
    try:
        data = json.loads(path.read_text("utf-8"))
        if data.get("version") != VERSION:
            return None
        size = int(data["size"])
        ranges = [Range(int(a), int(b), int(g)) for a, b, g in data["ranges"]]
        sha = data.get("sha256")
        etag = data.get("etag")
        if part.stat().st_size != size:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pos = 0
    for r in ranges:
        if r.start != pos or r.end <= r.start or not 0 <= r.got <= r.size:
            return None
        pos = r.end
    if pos != size:
        return None
    return Saved(
        size, sha if isinstance(sha, str) else None, etag if isinstance(etag, str) else None, ranges
    )


def received(part: Path) -> int:
    """Bytes a ``.part`` holds: the ranges file's count for a ranged part, else its size."""
    saved = load(part)
    if saved is not None:
        return saved.received
    try:
        return part.stat().st_size
    except OSError:
        return 0


def discard(part: Path) -> int:
    """Delete a part and its ranges file; the bytes it held on disk (0 when none)."""
    freed = 0
    for path in (part, ranges_path(part)):
        try:
            st = path.stat()
            path.unlink()
        except FileNotFoundError:
            continue
        freed += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return freed


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class WriteFailed(Exception):
    """Writing the part failed; ``disk_full`` when the file system ran out of space."""

    def __init__(self, message: str, disk_full: bool):
        super().__init__(message)
        self.disk_full = disk_full


def _pwrite_all(fd: int, pieces: list[bytes], offset: int) -> int:
    """Write ``pieces`` at ``offset``; the bytes written (all of them, or an OSError)."""
    total = sum(len(p) for p in pieces)
    if hasattr(os, "pwritev"):
        views = [memoryview(p) for p in pieces if p]
        done = 0
        while views:
            n = os.pwritev(fd, views[:1024], offset + done)
            done += n
            while views and n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            if n:
                views[0] = views[0][n:]
        return total
    # Windows: no pwrite; one writer thread owns this descriptor's position
    os.lseek(fd, offset, os.SEEK_SET)
    for piece in pieces:
        view = memoryview(piece)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    return total


def _pread(fd: int, n: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, n, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows: the hasher's own descriptor
    return os.read(fd, n)


def _datasync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class PartFile:
    """One ranged ``.part`` in use by one download (see the module doc)."""

    def __init__(self, part: Path, saved: Saved, *, ahead: int):
        self.part = part
        self.size = saved.size
        self.sha256 = saved.sha256
        self.etag = saved.etag
        self.ranges = saved.ranges
        self.ahead_limit = ahead
        self.resumed = saved.received
        self.reread = 0  # bytes read back because they arrived too far ahead
        self.read_saved = 0  # bytes an earlier call saved, read for the hash
        self.failed: BaseException | None = None
        self._starts = [r.start for r in self.ranges]
        self._saved_before = [min(r.got, r.size) for r in self.ranges]
        self._cond = threading.Condition()
        self._ahead: dict[int, list[bytes]] = {}  # offset → batch kept for the hasher
        self._ahead_bytes = 0
        self._frontier = 0
        self._hasher = hashlib.sha256()
        self._closing = False
        self._saved_at = time.monotonic()
        self._dirty = False
        self._checkpointing = False
        self._pending: dict[int, deque[concurrent.futures.Future]] = {}  # per range
        self._done_future: asyncio.Future | None = None
        self._moved: asyncio.Event | None = None  # set when the hash frontier moves
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fd = -1
        self.rfd = -1
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="part-write")
        self._checkpointer = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="part-save"
        )
        self._hash_thread: threading.Thread | None = None

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        part: Path,
        size: int,
        ranges: list[Range],
        sha256: str | None,
        etag: str | None,
        *,
        ahead: int,
    ) -> PartFile:
        """A new part of ``size`` bytes (an old one is replaced) and its ranges file."""
        discard(part)
        pf = cls(part, Saved(size, sha256, etag, ranges), ahead=ahead)
        # the ranges file first: a part of the whole size never stands without one (a
        # reader would take it for a complete one-stream part)
        pf._save_now()
        pf.fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC | _O_BINARY, 0o644)
        try:
            os.ftruncate(pf.fd, size)
        except OSError:
            os.close(pf.fd)
            discard(part)
            raise
        pf._open_reader()
        return pf

    @classmethod
    def resume(cls, part: Path, saved: Saved, *, ahead: int) -> PartFile:
        pf = cls(part, saved, ahead=ahead)
        pf.fd = os.open(part, os.O_RDWR | _O_BINARY)
        pf._open_reader()
        return pf

    def _open_reader(self) -> None:
        self.rfd = os.open(self.part, os.O_RDONLY | _O_BINARY)
        self._hash_thread = threading.Thread(target=self._hash_loop, name="part-hash", daemon=True)
        self._hash_thread.start()

    # -- what is left ----------------------------------------------------------------------
    def received(self) -> int:
        with self._cond:
            return sum(min(r.got, r.size) for r in self.ranges)

    def todo(self) -> list[int]:
        """Indices of the ranges not complete yet, in file order."""
        return [i for i, r in enumerate(self.ranges) if not r.done]

    # -- the event-loop side ---------------------------------------------------------------
    async def write(self, index: int, offset: int, pieces: list[bytes]) -> None:
        """Hand one batch of range ``index`` (arrived at ``offset``) to the hasher and the
        writer. Waits when the writer is behind (a slow disk), and when the batch is too
        far ahead of the hash only because the hasher is behind (the bytes it needs next
        are there): a slow CPU is then the limit, and reading batches back would only add
        to its work. When the hash waits for bytes that have not arrived (a slow
        connection at the frontier), the batch is written and read back later instead."""
        if self.failed is not None:
            raise self.failed
        n = sum(len(p) for p in pieces)
        await self._wait_for_hasher(offset, n)
        with self._cond:
            if offset == self._frontier or (
                offset > self._frontier and self._ahead_bytes + n <= self.ahead_limit
            ):
                self._ahead[offset] = pieces
                self._ahead_bytes += n
                self._cond.notify_all()
        queue = self._pending.setdefault(index, deque())
        queue.append(self._writer.submit(self._write, index, offset, pieces))
        while queue and queue[0].done():
            queue.popleft().result()
        while len(queue) > MAX_WRITES_IN_FLIGHT:
            await asyncio.shield(asyncio.wrap_future(queue[0]))
            queue.popleft().result()

    def _hasher_behind(self, offset: int, n: int) -> bool:
        """The batch would not fit the memory kept for the hash, and the hasher has the
        bytes it needs next: it is the hasher that is slow."""
        with self._cond:
            if self.failed is not None or offset <= self._frontier:
                return False
            if self._ahead_bytes + n <= self.ahead_limit:
                return False
            return self._frontier in self._ahead or self._disk_avail(self._frontier) > 0

    async def _wait_for_hasher(self, offset: int, n: int) -> None:
        """Wait while the hasher is behind (it signals the event loop after each step)."""
        if not self._hasher_behind(offset, n):
            return
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._moved is None:
                self._loop = loop
                self._moved = asyncio.Event()
            event = self._moved
        while True:
            event.clear()  # before the check: a step after it sets the event again
            if not self._hasher_behind(offset, n):
                return
            await event.wait()

    async def drain(self, index: int | None = None) -> None:
        """Wait for the queued writes of range ``index`` (of every range: None); a failed
        write raises here."""
        for i in [index] if index is not None else list(self._pending):
            queue = self._pending.get(i)
            while queue:
                await asyncio.shield(asyncio.wrap_future(queue[0]))
                queue.popleft().result()

    async def digest(self) -> str:
        """Wait until every byte is written and hashed; fsync; the file's sha256."""
        await self.drain()
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._frontier < self.size and self.failed is None:
                self._loop = loop
                self._done_future = loop.create_future()
                fut = self._done_future
            else:
                fut = None
        if fut is not None:
            await fut
        if self.failed is not None:
            raise self.failed
        await asyncio.shield(asyncio.wrap_future(self._writer.submit(os.fsync, self.fd)))
        return self._hasher.hexdigest()

    # -- the writer thread -----------------------------------------------------------------
    def _write(self, index: int, offset: int, pieces: list[bytes]) -> None:
        if self.failed is not None:
            raise self.failed
        r = self.ranges[index]
        try:
            n = _pwrite_all(self.fd, pieces, offset)
        except OSError as exc:
            full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1))
            self.failed = WriteFailed(
                f"{'Disk full' if full else 'Cannot write'} while writing {self.part}: "
                f"{exc.strerror or exc}; {human_size(self.received())} were saved and kept",
                disk_full=full,
            )
            with self._cond:
                self._cond.notify_all()
            raise self.failed from exc
        with self._cond:
            r.got = max(r.got, offset + n - r.start)
            self._dirty = True
            self._cond.notify_all()
        if time.monotonic() - self._saved_at >= SAVE_INTERVAL and not self._checkpointing:
            self._checkpointing = True
            self._saved_at = time.monotonic()
            self._checkpointer.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            self._save_now()
        except OSError:
            pass  # the next checkpoint (or the final one) tries again
        finally:
            self._checkpointing = False

    def _save_now(self) -> None:
        """fdatasync the part, then write the ranges it holds (never more than is on disk)."""
        with self._cond:
            ranges = [[r.start, r.end, min(r.got, r.size)] for r in self.ranges]
            self._dirty = False
        if self.fd >= 0:
            _datasync(self.fd)
        data = {
            "version": VERSION,
            "size": self.size,
            "sha256": self.sha256,
            "etag": self.etag,
            "ranges": ranges,
        }
        write_atomic(ranges_path(self.part), json.dumps(data, separators=(",", ":")).encode())

    # -- the hash thread -------------------------------------------------------------------
    def _disk_avail(self, offset: int) -> int:
        """Saved bytes from ``offset`` on, contiguous (caller holds the lock)."""
        import bisect

        i = bisect.bisect_right(self._starts, offset) - 1
        avail = 0
        pos = offset
        while i < len(self.ranges):
            r = self.ranges[i]
            have_end = r.start + min(r.got, r.size)
            if pos >= have_end:
                break
            avail += have_end - pos
            if not r.done:
                break
            pos = r.end
            i += 1
            if avail >= READ_BLOCK:
                break
        return avail

    def _hash_loop(self) -> None:
        try:
            while True:
                read_at = n = 0
                pieces = None
                with self._cond:
                    while True:
                        if self._closing or self.failed is not None:
                            return
                        if self._frontier >= self.size:
                            self._finished()
                            return
                        pieces = self._ahead.pop(self._frontier, None)
                        if pieces is not None:
                            self._ahead_bytes -= sum(len(p) for p in pieces)
                            break
                        avail = self._disk_avail(self._frontier)
                        if avail > 0:
                            later = [k for k in self._ahead if k > self._frontier]
                            limit = min(later) - self._frontier if later else avail
                            read_at, n = self._frontier, min(READ_BLOCK, avail, limit)
                            break
                        self._cond.wait()
                if pieces is not None:
                    for p in pieces:
                        self._hasher.update(p)
                    step = sum(len(p) for p in pieces)
                else:
                    data = _pread(self.rfd, n, read_at)
                    if not data:
                        raise OSError(errno.EIO, f"{self.part} is shorter than its ranges say")
                    self._hasher.update(data)
                    step = len(data)
                    self._count_read(read_at, step)
                with self._cond:
                    self._frontier += step
                    for k in [k for k in self._ahead if k < self._frontier]:
                        self._ahead_bytes -= sum(len(p) for p in self._ahead.pop(k))
                    if self._moved is not None and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._moved.set)
        except BaseException as exc:  # noqa: BLE001 - handed to the event loop
            with self._cond:
                self.failed = exc
                self._finished()

    def _count_read(self, offset: int, n: int) -> None:
        """Count bytes read back: saved by an earlier call, or arrived too far ahead."""
        import bisect

        i = bisect.bisect_right(self._starts, offset) - 1
        while n > 0 and i < len(self.ranges):
            r = self.ranges[i]
            take = min(n, r.end - offset)
            before = max(0, min(take, r.start + self._saved_before[i] - offset))
            self.read_saved += before
            self.reread += take - before
            n -= take
            offset += take
            i += 1

    def _finished(self) -> None:
        """Caller holds the lock: wake digest() and any batch waiting for the hasher."""
        if self._moved is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._moved.set)
        fut, loop = self._done_future, self._loop
        if fut is not None and loop is not None:
            loop.call_soon_threadsafe(_resolve, fut)

    # -- closing ---------------------------------------------------------------------------
    def close(self, *, save: bool = True) -> None:
        """Finish queued writes, stop the threads, close the descriptors; with ``save`` write
        the ranges file a last time (kept for the next call). Synchronous: also runs on
        cancellation and Ctrl+C."""
        self._pending.clear()
        self._writer.shutdown(wait=True)
        self._checkpointer.shutdown(wait=True)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._hash_thread is not None:
            self._hash_thread.join()
        if save and self.fd >= 0 and self.part.exists():
            try:
                self._save_now()
            except OSError:
                pass
        for attr in ("fd", "rfd"):
            fd = getattr(self, attr)
            if fd >= 0:
                os.close(fd)
                setattr(self, attr, -1)
