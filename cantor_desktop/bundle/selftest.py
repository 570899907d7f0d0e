"""`cantor-desktop --self-test`: prove a build works end to end, then exit 0 (1 on failure).

In a fresh temporary CANTOR_HOME, offscreen, it

1. starts its own node as a child with the app's launcher (``node_process.NodeProcess``,
   which runs ``selfexec.self_argv("node")``: in a frozen build the frozen executable
   itself, so a missing hidden import in the node fails here);
2. has the node render a short instrumental song and a short song with lyrics on the
   built-in sketch engine (the node starts the engine as its own child, again through
   selfexec), through the app's client (``nodeclient.NodeClient``: submit, events, audio);
3. checks both files: present, decodable WAV, the asked duration (± 0.5 s), not silent;
4. exports a few seconds of the instrumental song as the app and ``cantor export`` do: MP3
   (soundfile's libsndfile with LAME), 44.1 kHz (soxr), −14 LUFS with a −1 dBTP ceiling
   (the numpy BS.1770 meter, soxr's oversampled true peak), ID3 tags (mutagen); decodes the
   file and checks rate, length, loudness, true peak and tags;
5. opens the main window once, offscreen, through the app's own start-up
   (``cantor_desktop.ui.main.main``), and waits for its first paint;
6. checks that no scipy module was loaded by any of it (the bundle leaves scipy out);
7. prints a summary and stops the node.

Runs unfrozen too: ``python -m cantor_desktop.bundle.frozen_main --self-test``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from ..system.net import free_port

SONGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "instrumental",
        {
            "caption": "bright synth-pop groove, punchy drums, warm bass",
            "lyrics": "[Instrumental]",
            "duration": 10,
            "bpm": 120,
            "key": "A minor",
            "time_signature": 4,
            "seed": 7,
            "model": "sketch",
            "format": "wav16",
        },
    ),
    (
        "lyrics",
        {
            "caption": "gentle folk song, acoustic guitar, soft voice",
            "lyrics": "[verse]\nMorning light on the river\nCarry me home again\n"
            "[chorus]\nSing it slow, sing it low\nCarry me home again",
            "duration": 12,
            "bpm": 96,
            "key": "G major",
            "time_signature": 3,
            "seed": 11,
            "language": "en",
            "model": "sketch",
            "format": "wav16",
        },
    ),
)
DURATION_TOLERANCE = 0.5  # seconds
MIN_RMS = 1e-3  # full scale = 1.0; the sketch engine plays at ~0.1..0.3
EXPORT_SECONDS = 4.0  # of the instrumental song (LAME at 320 kbps is the slow part)
EXPORT_TARGET, EXPORT_CEILING = -14.0, -1.0


class SelfTestError(Exception):
    """One check failed; the message says which and why."""


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def ok(self, what: str, detail: str = "") -> None:
        self.lines.append(f"  ok    {what}{': ' + detail if detail else ''}")
        print(self.lines[-1], flush=True)

    def fail(self, what: str, why: str) -> None:
        self.lines.append(f"  FAIL  {what}: {why}")
        print(self.lines[-1], flush=True)


def processes_with_home(home: Path | str) -> list[int]:
    """Pids of processes whose environment has ``CANTOR_HOME=home`` (Linux /proc; [] elsewhere).

    After the node stops, nothing of this run may be left: no engine, no second node.
    """
    needle = f"CANTOR_HOME={home}".encode()
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int(entry.name) != os.getpid() and needle in (entry / "environ").read_bytes().split(
                b"\0"
            ):
                pids.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return pids


def end_leftovers(home: Path | str, grace: float = 5.0) -> list[int]:
    """Wait up to ``grace`` s for this run's processes to end; kill and return what is left."""
    import signal

    deadline = time.monotonic() + grace
    while (pids := processes_with_home(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        try:
            # Windows has no SIGKILL: there os.kill ends a process with TerminateProcess
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        except (ProcessLookupError, PermissionError):
            pass
    return pids


# --- songs ------------------------------------------------------------------------------------


async def start_node(report: Report):
    """Start a node child with the app's launcher on a free port (written to node.toml, so
    the app's window finds this node later and starts none)."""
    from .. import config
    from ..client.node_process import NodeProcess

    port = free_port()
    config.update({"node.host": "127.0.0.1", "node.port": port})
    node = NodeProcess("127.0.0.1", port)
    t = time.perf_counter()
    try:
        await node.start(timeout=60)
    except Exception as exc:
        await node.stop()
        raise SelfTestError(
            f"the node did not start: {exc}\nnode log (last lines):\n{_tail(node.log_path)}"
        ) from None
    report.ok(
        "node started",
        f"{' '.join(node.argv()[:-4])} → {node.url}, {time.perf_counter() - t:.1f} s",
    )
    return node


async def render_songs(report: Report, node, out: Path, timeout: float) -> None:
    """Render SONGS on ``node`` through the app's client and check the files."""
    from ..client.nodeclient import NodeClient

    try:
        async with NodeClient(node.url) as client:
            health = await client.health()
            report.ok("node answers", f"version {health.get('version')}")
            for name, request in SONGS:
                t = time.perf_counter()
                song = await asyncio.wait_for(
                    _render(client, request, out / f"{name}.wav"), timeout
                )
                detail = check_audio(out / f"{name}.wav", request["duration"])
                engine = (song.get("engine") or {}).get("backend", "?")
                report.ok(
                    f"{name} song", f"{detail}, engine {engine}, {time.perf_counter() - t:.1f} s"
                )
    except (SelfTestError, asyncio.TimeoutError) as exc:
        why = str(exc) or f"a song took longer than {timeout:.0f} s"
        raise SelfTestError(f"{why}\nnode log (last lines):\n{_tail(node.log_path)}") from None


async def _render(client, request: dict, dest: Path) -> dict:
    """One song: queue it, follow its events to the end, download its audio."""
    song_id = await client.submit_song(request)
    last: tuple[str, object] = ("", None)
    async for event, data in client.events(song_id):
        last = (event, data)
    song = await client.song(song_id)
    if song.get("state") != "done":
        raise SelfTestError(
            f"song {song_id} ended {song.get('state')} "
            f"(last event {last[0]!r}): {song.get('error')}"
        )
    await client.audio(song_id, dest)
    return song


def _tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) or "(empty)"


def check_audio(path: Path, duration: float) -> str:
    """Raise SelfTestError unless ``path`` is a decodable, non-silent WAV of ``duration`` s."""
    import numpy as np
    import soundfile as sf

    if not path.is_file() or path.stat().st_size == 0:
        raise SelfTestError(f"{path.name}: missing or empty")
    head = path.read_bytes()[:12]
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        raise SelfTestError(f"{path.name}: not a WAV file (starts {head!r})")
    try:
        data, rate = sf.read(io.BytesIO(path.read_bytes()), dtype="float32", always_2d=True)
    except Exception as exc:
        raise SelfTestError(f"{path.name}: cannot be decoded: {exc}") from None
    seconds = len(data) / rate
    if abs(seconds - duration) > DURATION_TOLERANCE:
        raise SelfTestError(f"{path.name}: {seconds:.2f} s long, asked {duration} s")
    if not np.all(np.isfinite(data)):
        raise SelfTestError(f"{path.name}: holds NaN or infinite samples")
    rms = float(np.sqrt(np.mean(np.square(data, dtype=np.float64))))
    if rms < MIN_RMS:
        raise SelfTestError(f"{path.name}: silent (RMS {rms:.2e})")
    return f"{seconds:.2f} s, {rate} Hz, {data.shape[1]} ch, RMS {rms:.3f}"


# --- the export ---------------------------------------------------------------------------------


def check_export(song: Path, out: Path, request: dict) -> str:
    """Export the first EXPORT_SECONDS of ``song`` to MP3, 44.1 kHz, EXPORT_TARGET LUFS with
    an EXPORT_CEILING dBTP ceiling, through ``export.export_file``; decode it and check it."""
    import soundfile as sf

    from .. import export
    from ..export import loudness as lu

    t = time.perf_counter()
    try:
        audio, rate = sf.read(
            str(song), dtype="float32", always_2d=True, frames=int(EXPORT_SECONDS * 48000)
        )
        excerpt = out / "export-source.wav"
        sf.write(str(excerpt), audio, rate, subtype="PCM_24")
        meta = export.SongMeta(
            title="self-test",
            caption=request["caption"],
            bpm=request["bpm"],
            key=request["key"],
            seed=request["seed"],
            model=request["model"],
        )
        options = export.ExportOptions(
            format="mp3", rate=44100, loudness=EXPORT_TARGET, peak=EXPORT_CEILING
        )
        result = export.export_file(excerpt, out / "export", options, meta=meta)
        decoded, got_rate = sf.read(str(result.path), dtype="float32", always_2d=True)
    except Exception as exc:
        raise SelfTestError(f"the export failed: {type(exc).__name__}: {exc}") from None
    seconds = len(decoded) / got_rate
    loudness = lu.integrated_loudness(decoded, got_rate)
    peak = lu.true_peak(decoded, got_rate)
    problems = []
    if got_rate != 44100:
        problems.append(f"rate {got_rate} Hz")
    if abs(seconds - len(audio) / rate) > 0.1:
        problems.append(f"{seconds:.2f} s long, the source {len(audio) / rate:.2f} s")
    if not abs(loudness - EXPORT_TARGET) <= 0.5:
        problems.append(f"{loudness:.2f} LUFS, asked {EXPORT_TARGET:g}")
    if not peak <= EXPORT_CEILING + 0.01:
        problems.append(f"true peak {peak:.2f} dBTP over {EXPORT_CEILING:g}")
    from mutagen.mp3 import MP3

    tags = MP3(str(result.path)).tags
    bpm = str(tags.get("TBPM")) if tags is not None else None
    if bpm != f"{request['bpm']}":
        problems.append(f"TBPM tag {bpm!r}")
    if problems:
        raise SelfTestError(f"the exported {result.path.name}: {'; '.join(problems)}")
    return (
        f"{result.path.name}, {seconds:.2f} s, {got_rate} Hz, {loudness:.1f} LUFS, "
        f"{peak:.1f} dBTP, TBPM {bpm}, {time.perf_counter() - t:.1f} s"
    )


def check_no_scipy() -> str:
    """No scipy (nor pyloudnorm, which needs it) was loaded in this process."""
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "pyloudnorm"))
    if loaded:
        raise SelfTestError(
            f"scipy is loaded ({', '.join(loaded[:5])}…): the export's "
            f"loudness must need numpy alone"
        )
    return f"{len(sys.modules)} modules loaded, none of scipy"


def check_multiprocessing(where: Path, timeout: float = 60.0) -> str:
    """A worker multiprocessing spawns (as it does on Windows and macOS) runs as that worker.

    Frozen, the worker is this executable: frozen_main's freeze_support(), with PyInstaller's
    runtime hook, runs it as the worker (and, on POSIX, as the resource tracker spawning
    starts) instead of as a second Cantor."""
    import multiprocessing

    made = where / "made-by-a-multiprocessing-worker"
    t = time.perf_counter()
    worker = multiprocessing.get_context("spawn").Process(target=os.makedirs, args=(str(made),))
    worker.start()
    worker.join(timeout)
    if worker.exitcode is None:
        worker.kill()
        raise SelfTestError(
            f"a multiprocessing worker did not end within {timeout:.0f} s (did it start as the app?)"
        )
    if worker.exitcode != 0 or not made.is_dir():
        raise SelfTestError(
            f"a multiprocessing worker ended with exit code {worker.exitcode} and did not run"
        )
    made.rmdir()
    return f"a spawned worker ran and ended (exit 0, {time.perf_counter() - t:.1f} s)"


# --- Qt parts the app loads late: playback, keyring ---------------------------------------------


def _qapp():
    os.environ.setdefault("QT_API", "pyside6")
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication([sys.argv[0]])


def check_playback(path: Path, duration: float, timeout: float = 20.0) -> str:
    """The Songs page's playback path: soundfile decodes the song to 16-bit PCM for the
    output device and a QAudioSink (Qt Multimedia, no FFmpeg plugin) takes that format;
    with a device the sink plays a moment of it."""
    app = _qapp()  # noqa: F841 (Qt Multimedia needs the application object)
    from PySide6.QtCore import QBuffer, QByteArray, QElapsedTimer, QIODevice
    from PySide6.QtMultimedia import QAudioSink

    from cantor_desktop.ui.player import decode, device_format, output_device

    import soundfile as sf

    info = sf.info(str(path))
    device = output_device()
    fmt = device_format(device, info.samplerate, info.channels)
    pcm = decode(str(path), fmt.sampleRate(), fmt.channelCount())
    if abs(pcm.duration_ms / 1000 - duration) > DURATION_TOLERANCE:
        raise SelfTestError(
            f"the player decoded {path.name} to {pcm.duration_ms / 1000:.2f} s, asked {duration} s"
        )
    sink = QAudioSink(device, fmt) if device is not None else QAudioSink(fmt)
    where = "no output device here"
    if device is not None:
        data = QByteArray(pcm.data)
        buffer = QBuffer()
        buffer.setData(data)
        buffer.open(QIODevice.OpenModeFlag.ReadOnly)
        sink.start(buffer)
        clock = QElapsedTimer()
        clock.start()
        while sink.processedUSecs() == 0 and clock.elapsed() < timeout * 1000:
            app.processEvents()
        played = sink.processedUSecs()
        sink.stop()
        if played == 0:
            raise SelfTestError(
                f"the audio sink played nothing of {path.name} ({sink.error().name})"
            )
        where = f"played on {device.description()}"
    sink.deleteLater()
    return f"{pcm.duration_ms / 1000:.2f} s decoded, {pcm.rate} Hz x{pcm.channels}, {where}"


def check_keyring() -> str:
    """The OS keyring backend for this platform is in the build (loaded by entry points)."""
    import importlib

    module = {"win32": "keyring.backends.Windows", "darwin": "keyring.backends.macOS"}.get(
        sys.platform, "keyring.backends.SecretService"
    )
    try:
        importlib.import_module(module)
        if module.endswith("SecretService"):
            importlib.import_module("secretstorage")
    except ImportError as exc:
        raise SelfTestError(f"the keyring backend {module} cannot be loaded: {exc}") from None
    return module


# --- the window -------------------------------------------------------------------------------


def loop_running() -> bool:
    """Whether an asyncio loop runs on this thread now (qasync's, under a Qt callback)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def open_main_window_once(
    argv: list[str] | None = None,
    timeout: float = 60.0,
    t0: float | None = None,
    settle: float = 0.3,
) -> float:
    """Start the app the way a double-click does; close its window after the first paint.

    Returns the seconds from ``t0`` (default: now) to the main window's first Paint event;
    raises SelfTestError when no main window paints within ``timeout``. The QApplication is
    made here first (``ui.main`` reuses an existing one) so an application-wide event filter
    sees the first Paint of the top-level QMainWindow (the app may paint a skeleton frame
    before it builds the rest). Once the app's asyncio loop runs — the app is whole — and
    settles for ``settle`` s, the window is closed: offscreen there is no tray, so that is
    the app's own quit path, which stops a node the app started. Should the app still run
    20 s later, QApplication.quit() ends it.
    """

    t0 = time.perf_counter() if t0 is None else t0
    os.environ.setdefault("QT_API", "pyside6")
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow

    app = QApplication.instance() or QApplication([sys.argv[0], *(argv or [])])
    painted: list[float] = []
    closing: list[bool] = []
    deadline = time.monotonic() + timeout

    def close_all() -> None:
        if closing:
            return
        closing.append(True)
        for w in QApplication.topLevelWidgets():
            if w.isVisible():
                w.close()
        QTimer.singleShot(20_000, app.quit)

    def close_when_whole() -> None:
        if loop_running():  # ui.main's qasync loop: Shell is built
            QTimer.singleShot(int(settle * 1000), close_all)
        elif time.monotonic() > deadline:
            close_all()
        else:
            QTimer.singleShot(50, close_when_whole)

    class FirstPaint(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 (Qt's name)
            if not painted and event.type() == QEvent.Paint and isinstance(obj, QMainWindow):
                painted.append(time.perf_counter() - t0)
                QTimer.singleShot(0, close_when_whole)
            return False

    watcher = FirstPaint()
    app.installEventFilter(watcher)
    QTimer.singleShot(int(timeout * 1000), close_all)
    from ..ui.main import main as app_main

    try:
        app_main([sys.argv[0], *(argv or [])])
    except RuntimeError as exc:
        # the 20 s fallback quit stops the loop under the app: only an error if it never
        # painted (reported below)
        if painted and not closing:
            raise
        why = f"the app did not quit by itself after its window closed ({exc})"
        if painted:
            raise SelfTestError(why) from None
    finally:
        app.removeEventFilter(watcher)
    if not painted:
        raise SelfTestError(f"the main window did not paint within {timeout:.0f} s")
    return painted[0]


# --- the whole run ------------------------------------------------------------------------------


def run(keep: bool = False, timeout: float = 180.0) -> int:
    report = Report()
    home = Path(tempfile.mkdtemp(prefix="cantor-selftest-"))
    frozen = bool(getattr(sys, "frozen", False))
    print(f"cantor self-test ({'frozen' if frozen else 'unfrozen'}: {sys.executable})", flush=True)
    # everything below (and every child) uses the temporary home, offscreen, no OS keyring
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    os.environ.pop("CANTOR_NODE_TOKEN", None)
    failed = False
    node = None
    try:
        # first, with a home of its own: multiprocessing's resource tracker lives as long as
        # this process, and every process with the run's home must be gone at its end
        os.environ["CANTOR_HOME"] = str(home / "multiprocessing")
        report.ok("multiprocessing worker", check_multiprocessing(home))
        os.environ["CANTOR_HOME"] = str(home)
        from ..system.paths import paths

        paths().ensure()
        out = home / "selftest-audio"
        out.mkdir()
        node = asyncio.run(start_node(report))
        asyncio.run(render_songs(report, node, out, timeout))
        report.ok(
            "export (MP3, soxr, BS.1770, mutagen)",
            check_export(out / "instrumental.wav", out, SONGS[0][1]),
        )
        report.ok(
            "playback (soundfile + QAudioSink)",
            check_playback(out / "instrumental.wav", SONGS[0][1]["duration"]),
        )
        report.ok("keyring backend", check_keyring())
        seconds = open_main_window_once()
        report.ok("main window painted offscreen", f"{seconds:.2f} s")
        report.ok("no scipy", check_no_scipy())
    except SelfTestError as exc:
        failed = True
        report.fail("self-test", str(exc))
    except Exception as exc:  # an import error in a frozen build must say what is missing
        failed = True
        import traceback

        report.fail("self-test", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    finally:
        if node is not None:
            code = asyncio.run(node.stop())
            report.ok("node stopped", f"exit code {code}")
        left = end_leftovers(home)
        if left:
            failed = True
            report.fail(
                "clean stop",
                f"processes of this run still ran after the node stopped (pids {left}; killed)",
            )
        if keep or failed:
            print(f"self-test files kept in {home}", flush=True)
        else:
            shutil.rmtree(home, ignore_errors=True)
    elapsed = time.perf_counter() - report.started
    verdict = "FAILED" if failed else "passed"
    print(f"cantor self-test {verdict} in {elapsed:.1f} s", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    from ..system.stdio import utf8_output

    utf8_output()  # its log goes to a file: cp1252 on Windows has no "→"
    parser = argparse.ArgumentParser(
        prog="cantor-desktop --self-test", description="Render two songs end to end and check them."
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary CANTOR_HOME (it is kept on failure anyway)",
    )
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds each song may take (default 180)"
    )
    args = parser.parse_args(argv)
    return run(keep=args.keep, timeout=args.timeout)


if __name__ == "__main__":
    sys.exit(main())
