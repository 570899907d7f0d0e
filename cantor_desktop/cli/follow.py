"""Following a song on the node from the command line: a progress bar on stderr, the song's
events folded into its record until it ends, and where ``-o`` puts each take. Shared by
`cantor sing` and the editing commands."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
from pathlib import Path

from ..song.record import Song, SongEvent, SongState, Take


class ProgressBar:
    """One line on stderr: bar, percent, stage, time left (redrawn in place on a terminal)."""

    WIDTH = 28

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = ""
        self.last_plain = 0.0
        self.last_stage: str | None = None

    def show(self, stage: str | None, progress: float, eta: float | None) -> None:
        filled = int(round(progress * self.WIDTH))
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        left = f"  {_clock(eta)} left" if eta is not None and progress < 1 else ""
        line = f"[{bar}] {progress * 100:5.1f}%  {stage or 'queued':<7}{left}"
        if line == self.last:
            return
        self.last = line
        if self.tty:
            width = shutil.get_terminal_size((80, 20)).columns
            self.stream.write("\r" + line[: width - 1].ljust(width - 1))
            self.stream.flush()
        elif (
            time.monotonic() - self.last_plain >= 1.0 or progress >= 1.0 or stage != self.last_stage
        ):
            # not a terminal (a log, a pipe): a line per stage, then at most one a second
            self.last_plain = time.monotonic()
            self.last_stage = stage
            self.stream.write(line.rstrip() + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()
            self.last = ""


def output_path(dest: Path, take: "Take", *, many: bool) -> Path:
    """Where ``-o`` puts a take: into a folder (an existing one, or a path without an
    extension, made now), or as a file named by the user with the take's own extension
    (``_takeN`` added when the song has several)."""
    ext = Path(take.file_name).suffix
    if dest.is_dir() or not dest.suffix:
        dest.mkdir(parents=True, exist_ok=True)
        return dest
    if dest.suffix.lower() != ext.lower():
        dest = dest.with_name(dest.name + ext)
    if many:
        dest = dest.with_name(f"{dest.stem}_take{take.n}{dest.suffix}")
    return dest


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(int(round(seconds)), 0)
    return f"{seconds // 60}:{seconds % 60:02d}"


class EventShower:
    """A song's record → the progress bar. Every stage the CLI receives gets drawn (a line of
    its own when stderr is not a terminal), even when no progress event follows it: a short
    song can pass a stage in milliseconds, or be past it before the stream connects (a late
    subscriber gets the current state only). ``done`` always ends on a 100% line."""

    def __init__(self, bar: ProgressBar):
        self.bar = bar

    def __call__(self, song: "Song") -> bool:
        """Show the song as it is now; True when it has ended."""
        if song.state == SongState.DONE:
            self.bar.show("done", 1.0, None)
        elif song.state == SongState.QUEUED:
            self.bar.show(None, 0.0, None)
        elif song.state == SongState.RUNNING:
            self.bar.show(song.stage, song.progress, song.eta)
        return song.is_finished


async def follow(node, song: "Song", bar: ProgressBar) -> "Song":
    """Fold the song's events into its record until it ends; reconnects if the stream
    drops, and asks for the song itself if it never ends on the stream."""
    from ..client.nodeclient import NodeError

    shower = EventShower(bar)
    for _attempt in range(5):
        try:
            async with contextlib.aclosing(node.events(song.id)) as events:
                async for kind, data in events:
                    song.apply(SongEvent.from_sse(kind, data, song.id))
                    if shower(song):
                        return song
        except NodeError as exc:
            if exc.status:
                raise
            await asyncio.sleep(0.5)
    song = Song.from_json(await node.song(song.id))
    shower(song)
    return song
