"""Song playback with QAudioSink fed from PCM decoded by soundfile (no QMediaPlayer).

QMediaPlayer needs Qt's FFmpeg plugin and its libraries (plus QtQml/QtQuick, which that
plugin links): ~35 MB of the bundle for what soundfile already decodes. Here the file is
decoded in a worker thread to 16-bit PCM in the output device's format, held in a QBuffer
and pulled by a QAudioSink. Play, pause, seek and the position (``position_changed``, ms)
work on that buffer. Without an output device, ``load`` says so in ``problem``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject, QTimer, Signal

from ..views.messages import failure
from .tasks import Tasks

if TYPE_CHECKING:
    from PySide6.QtMultimedia import QAudioSink


LOOP_SHORTEST_MS = 250
"""A loop shorter than this is no loop (a click on the waveform, not a region)."""


class Pcm:
    """Interleaved 16-bit PCM ready for the device: bytes, rate, channels."""

    def __init__(self, data: bytes, rate: int, channels: int):
        self.data, self.rate, self.channels = data, rate, channels

    @property
    def frame_bytes(self) -> int:
        return 2 * self.channels

    @property
    def duration_ms(self) -> int:
        return int(len(self.data) // self.frame_bytes * 1000 / self.rate)


def decode(
    path: str, rate: int | None = None, channels: int | None = None, *, match_levels: bool = False
) -> Pcm:
    """The file as 16-bit PCM, resampled to ``rate`` and mixed to ``channels`` when given;
    with ``match_levels``, brought to a common listening loudness (so two takes compared by
    ear differ in music, not in level: louder sounds "better").

    Resampling is linear interpolation: enough for listening back to a take (the file on
    disk is untouched). Raises ``RuntimeError`` (soundfile's) for a file it cannot read.
    """
    import numpy as np
    import soundfile as sf

    data, native = sf.read(path, dtype="float32", always_2d=True)
    if match_levels and len(data):
        from ..export.loudness import listening_gain

        data = data * np.float32(listening_gain(data, native))
    rate = rate or native
    if rate != native and len(data):
        n_out = max(1, int(round(len(data) * rate / native)))
        t_out = np.arange(n_out, dtype=np.float64) * (native / rate)
        t_in = np.arange(len(data), dtype=np.float64)
        data = np.stack(
            [np.interp(t_out, t_in, data[:, c]) for c in range(data.shape[1])], axis=1
        ).astype(np.float32)
    channels = channels or data.shape[1]
    if channels != data.shape[1]:
        mono = data.mean(axis=1, keepdims=True)
        data = np.repeat(mono, channels, axis=1) if channels > 1 else mono
    pcm = (np.clip(data, -1.0, 1.0) * 32767.0).astype("<i2")
    return Pcm(pcm.tobytes(), rate, channels)


def output_device():
    """The default output device, or None when there is none."""
    from PySide6.QtMultimedia import QMediaDevices

    device = QMediaDevices.defaultAudioOutput()
    return None if device.isNull() else device


def device_format(device, rate: int, channels: int):
    """A 16-bit format the device takes: the file's own if it can, else the device's rate
    and channel count (the decoder then resamples or mixes)."""
    from PySide6.QtMultimedia import QAudioFormat

    fmt = QAudioFormat()
    fmt.setSampleRate(rate)
    fmt.setChannelCount(channels)
    fmt.setSampleFormat(QAudioFormat.SampleFormat.Int16)
    if device is None or device.isFormatSupported(fmt):
        return fmt
    preferred = device.preferredFormat()
    fmt.setSampleRate(preferred.sampleRate() or 48000)
    fmt.setChannelCount(preferred.channelCount() or 2)
    return fmt


class Player(QObject):
    """One song at a time. ``load(path)`` then ``play()``; signals carry the news."""

    position_changed = Signal(int)  # ms
    state_changed = Signal(str)  # "loading", "playing", "paused", "stopped"
    loaded = Signal(str)  # path, ready to play
    failed = Signal(str)  # a sentence for the user

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.problem = ""
        self.path: str | None = None
        self.pcm: Pcm | None = None
        self.state = "stopped"
        self._sink: QAudioSink | None = None
        self._buffer: QBuffer | None = None
        self._bytes = QByteArray()
        self._base_ms = 0
        self._play_when_loaded = False
        self._seek_when_loaded = 0
        self.tasks = Tasks()
        self._closed = False
        self.match_levels = False  # decode at a common loudness (A/B listening)
        self.loop: tuple[int, int] | None = None  # (start, end) ms played over and over
        self._timer = QTimer(self)
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._tick)

    # -- state ------------------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)
            if state == "playing":
                self._timer.start()
            else:
                self._timer.stop()

    @property
    def duration_ms(self) -> int:
        return self.pcm.duration_ms if self.pcm is not None else 0

    def position_ms(self) -> int:
        if self._sink is None or self.pcm is None:
            return self._base_ms
        played = self._base_ms + self._sink.processedUSecs() // 1000
        return int(min(played, self.duration_ms))

    # -- loading ----------------------------------------------------------------------------
    def load(self, path: str, *, play: bool = False, at_ms: int = 0) -> bool:
        """Decode ``path`` off the GUI thread (then play it from ``at_ms`` when ``play``);
        False (and ``problem``) without a device."""
        self.stop()
        device = output_device()
        if device is None:
            self.problem = failure("play", "there is no audio output device")
            return False
        self.problem = ""
        self.path, self.pcm = path, None
        self._play_when_loaded = play
        self._seek_when_loaded = at_ms
        self._set_state("loading")
        import soundfile as sf

        try:
            info = sf.info(path)
        except Exception as exc:  # noqa: BLE001 — soundfile raises several kinds
            self.problem = failure(f"read {path}", str(exc))
            self._set_state("stopped")
            return False
        fmt = device_format(device, info.samplerate, info.channels)
        rate, channels = fmt.sampleRate(), fmt.channelCount()
        self.tasks.start(
            "decode",
            asyncio.to_thread(decode, path, rate, channels, match_levels=self.match_levels),
            on_done=lambda pcm: self._on_decoded(path, pcm),
            on_error=lambda text: self._on_decoded(path, failure(f"play {path}", text)),
        )
        return True

    def _on_decoded(self, path: str, result) -> None:
        if path != self.path or self._closed:
            return
        if isinstance(result, str):
            self.problem = result
            self._set_state("stopped")
            self.failed.emit(result)
            return
        self.pcm = result
        self._bytes = QByteArray(result.data)
        self._buffer = QBuffer(self)
        self._buffer.setData(self._bytes)
        self._buffer.open(QIODevice.OpenModeFlag.ReadOnly)
        self._base_ms = 0
        self._set_state("stopped")
        self.loaded.emit(path)
        if self._seek_when_loaded:
            at, self._seek_when_loaded = self._seek_when_loaded, 0
            self.seek(at)
        if self._play_when_loaded:
            self.play()

    # -- transport --------------------------------------------------------------------------
    def _make_sink(self, pcm: Pcm) -> QAudioSink:
        from PySide6.QtMultimedia import QAudioFormat, QAudioSink

        fmt = QAudioFormat()
        fmt.setSampleRate(pcm.rate)
        fmt.setChannelCount(pcm.channels)
        fmt.setSampleFormat(QAudioFormat.SampleFormat.Int16)
        device = output_device()
        sink = QAudioSink(device, fmt, self) if device is not None else QAudioSink(fmt, self)
        sink.stateChanged.connect(self._sink_state)
        return sink

    def play(self) -> None:
        if self.pcm is None or self._buffer is None:
            self._play_when_loaded = True
            return
        if self.state == "paused" and self._sink is not None:
            self._sink.resume()
            self._set_state("playing")
            return
        if self.state == "playing":
            return
        if self._buffer.pos() >= self._buffer.size():  # played to the end: from the top
            self._buffer.seek(0)
            self._base_ms = 0
        self._start_sink()

    def _start_sink(self) -> None:
        if self.pcm is None or self._buffer is None:
            return
        if self._sink is not None:
            self._drop_sink()
        self._sink = self._make_sink(self.pcm)
        self._sink.start(self._buffer)
        self._set_state("playing")

    def pause(self) -> None:
        if self.state == "playing" and self._sink is not None:
            self._sink.suspend()
            self._set_state("paused")

    def toggle(self) -> None:
        self.pause() if self.state == "playing" else self.play()

    def seek(self, ms: int) -> None:
        if self.pcm is None or self._buffer is None:
            return
        ms = max(0, min(int(ms), self.duration_ms))
        frame = int(ms * self.pcm.rate / 1000)
        playing = self.state == "playing"
        self._drop_sink()
        self._buffer.seek(frame * self.pcm.frame_bytes)
        self._base_ms = ms
        if playing:
            self._start_sink()
        else:
            self._set_state("paused" if ms else "stopped")
        self.position_changed.emit(ms)

    def stop(self) -> None:
        """Stop and rewind (the decoded song stays loaded)."""
        self._play_when_loaded = False
        self._drop_sink()
        if self._buffer is not None:
            self._buffer.seek(0)
        self._base_ms = 0
        if self.state != "loading" or self.pcm is not None:
            self._set_state("stopped")

    def _drop_sink(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            if self._buffer is not None and self.pcm is not None:
                self._base_ms = self.position_ms_of(sink)
            sink.stateChanged.disconnect(self._sink_state)
            sink.stop()
            sink.deleteLater()

    def position_ms_of(self, sink) -> int:
        return int(min(self._base_ms + sink.processedUSecs() // 1000, self.duration_ms))

    def _sink_state(self, state) -> None:
        from PySide6.QtMultimedia import QtAudio

        if self._sink is None or self._buffer is None:
            return
        if state == QtAudio.State.IdleState and self._buffer.atEnd() and self.loop is not None:
            self.seek(self.loop[0])  # a loop that runs to the song's end starts over
            self._start_sink()
        elif state == QtAudio.State.IdleState and self._buffer.atEnd():
            self._drop_sink()
            self._base_ms = 0
            self._buffer.seek(0)
            self._set_state("stopped")
            self.position_changed.emit(self.duration_ms)
        elif state == QtAudio.State.StoppedState and self._sink.error() != QtAudio.Error.NoError:
            self.problem = failure("go on playing", self._sink.error().name)
            self._drop_sink()
            self._set_state("stopped")
            self.failed.emit(self.problem)

    def set_loop(self, start_ms: int | None, end_ms: int | None = None) -> None:
        """Play ``start_ms``…``end_ms`` over and over (None: no loop); a playing song outside
        the loop jumps into it."""
        if start_ms is None or end_ms is None or end_ms - start_ms < LOOP_SHORTEST_MS:
            self.loop = None
            return
        self.loop = (max(0, int(start_ms)), int(end_ms))
        if self.state == "playing" and not self.loop[0] <= self.position_ms() < self.loop[1]:
            self.seek(self.loop[0])

    def _tick(self) -> None:
        at = self.position_ms()
        if self.loop is not None and at >= self.loop[1]:
            self.seek(self.loop[0])
            return
        self.position_changed.emit(at)

    def shutdown(self) -> None:
        """Stop the sound and join the decoder thread (page or app going away)."""
        self._closed = True
        self._timer.stop()
        self._drop_sink()
        self.tasks.cancel_all()
