"""Export a song's audio as a file a DAW understands (no Qt; safe to run on a worker thread):
:func:`export_file` with :class:`ExportOptions` (format, rate, loudness and true peak, name
pattern) and :class:`SongMeta` (what the tags say); the file is written as ``NAME.part`` and
renamed when whole, never over an existing one. The formats, the API and how each step is
done: docs/export.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import CantorError
from ..song.naming import DEFAULT_PATTERN, pattern_problem, render, safe_name
from .tags import SongMeta

__all__ = [
    "ExportOptions",
    "ExportResult",
    "ExportError",
    "ExportCancelled",
    "SongMeta",
    "export_file",
    "FORMATS",
    "RATES",
    "parse_loudness",
    "parse_peak",
    "DEFAULT_PATTERN",
    "safe_name",
]

FORMATS = {
    # name: (soundfile format, subtype, extension, what a person reads)
    "wav24": ("WAV", "PCM_24", ".wav", "WAV 24-bit"),
    "wav32": ("WAV", "FLOAT", ".wav", "WAV 32-bit float"),
    "flac": ("FLAC", "PCM_24", ".flac", "FLAC 24-bit"),
    "aiff": ("AIFF", "PCM_24", ".aiff", "AIFF 24-bit"),
    "mp3": ("MP3", "MPEG_LAYER_III", ".mp3", "MP3 320 kbps"),
}
RATES = (48000, 44100)
LOUDNESS_PRESETS = {"off": None, "streaming": -14.0, "-14": -14.0, "-16": -16.0}
LOUDNESS_RANGE = (-40.0, -5.0)  # LUFS
PEAK_RANGE = (-9.0, 0.0)  # dBTP
MP3_ROUNDS = 3  # re-encodes when the codec's overshoot passes the ceiling


class ExportError(CantorError, ValueError):
    """An option or an input is not usable; ``field`` names it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ExportCancelled(Exception):
    """The caller's ``cancel`` said stop; nothing was left behind."""


def _number(field: str, value: Any, lo: float, hi: float, unit: str) -> float:
    if isinstance(value, bool):
        raise ExportError(field, f"must be a number, not {value!r}")
    try:
        number = (
            float(str(value).strip().replace("\u2212", "-"))
            if isinstance(value, str)
            else float(value)
        )
    except (TypeError, ValueError):
        raise ExportError(
            field, f"must be a number from {lo:g} to {hi:g} {unit}, not {value!r}"
        ) from None
    if not math.isfinite(number) or not lo <= number <= hi:
        raise ExportError(field, f"must be from {lo:g} to {hi:g} {unit}, not {value!r}")
    return number


def parse_loudness(value: Any) -> float | None:
    """ "off" (None), "streaming"/"-14", "-16", or a target from −40 to −5 LUFS."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in LOUDNESS_PRESETS:
        return LOUDNESS_PRESETS[value.strip().lower()]
    if isinstance(value, str) and value.strip().lower().endswith("lufs"):
        value = value.strip()[:-4]
    try:
        return _number("loudness", value, *LOUDNESS_RANGE, "LUFS")
    except ExportError as exc:
        raise ExportError("loudness", f'{exc.message}; or "off"') from None


def parse_peak(value: Any) -> float:
    if isinstance(value, str) and value.strip().lower().endswith("dbtp"):
        value = value.strip()[:-4]
    return _number("peak", value, *PEAK_RANGE, "dBTP")


def loudness_text(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


@dataclass(frozen=True)
class ExportOptions:
    format: str = "wav24"
    rate: int = 48000
    loudness: float | None = None  # LUFS target; None = off
    peak: float = -1.0  # dBTP ceiling (with a loudness target)
    pattern: str = DEFAULT_PATTERN

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.format not in FORMATS:
            raise ExportError(
                "format", f"{self.format!r} is not a format; use one of {', '.join(FORMATS)}"
            )
        if isinstance(self.rate, bool) or self.rate not in RATES:
            raise ExportError("rate", f"{self.rate!r} is not a sample rate; use 48000 or 44100")
        if self.loudness is not None:
            _number("loudness", self.loudness, *LOUDNESS_RANGE, "LUFS")
        _number("peak", self.peak, *PEAK_RANGE, "dBTP")
        problem = pattern_problem(self.pattern)
        if problem:
            raise ExportError("pattern", problem)

    @classmethod
    def parse(
        cls,
        *,
        format: Any = None,
        rate: Any = None,
        loudness: Any = "keep",
        peak: Any = None,
        pattern: Any = None,
        base: "ExportOptions | None" = None,
    ) -> "ExportOptions":
        """Options from loose values (command line, node.toml text, a dialog); what is not
        given stays as in ``base``. Raises ExportError naming the first bad field."""
        base = base or cls()
        fields: dict[str, Any] = {}
        if format is not None:
            fields["format"] = str(format).strip().lower()
        if rate is not None:
            text = str(rate).strip().lower().replace(" ", "")
            for suffix in ("khz", "k", "hz"):
                if text.endswith(suffix):
                    text = text[: -len(suffix)]
                    break
            try:
                number = float(text)
            except ValueError:
                raise ExportError(
                    "rate", f"{rate!r} is not a sample rate; use 48000 or 44100"
                ) from None
            if number in (44.1, 48.0):
                number *= 1000
            fields["rate"] = int(number) if number.is_integer() else number
        if loudness != "keep":
            fields["loudness"] = parse_loudness(loudness)
        if peak is not None:
            fields["peak"] = parse_peak(peak)
        if pattern is not None:
            fields["pattern"] = str(pattern)
        return dataclasses.replace(base, **fields)

    def with_changes(self, **fields: Any) -> "ExportOptions":
        return dataclasses.replace(self, **fields)

    @classmethod
    def from_config(cls, cfg) -> "ExportOptions":
        """The choices remembered in node.toml ([export]); a value that became invalid
        falls back to the default for that field."""
        out = cls()
        for name, parse in (
            ("format", lambda v: {"format": v}),
            ("rate", lambda v: {"rate": v}),
            ("loudness", lambda v: {"loudness": v}),
            ("peak", lambda v: {"peak": v}),
            ("pattern", lambda v: {"pattern": v}),
        ):
            try:
                out = cls.parse(base=out, **parse(cfg.get(f"export.{name}")))
            except ExportError:
                pass
        return out

    def config_changes(self) -> dict[str, Any]:
        """The node.toml keys that remember these choices (for ``config.update``)."""
        return {
            "export.format": self.format,
            "export.rate": self.rate,
            "export.loudness": loudness_text(self.loudness),
            "export.peak": f"{self.peak:g}",
            "export.pattern": self.pattern,
        }

    @property
    def extension(self) -> str:
        return FORMATS[self.format][2]

    def describe(self) -> str:
        what = f"{FORMATS[self.format][3]}, {self.rate / 1000:g} kHz"
        if self.loudness is not None:
            what += f", {self.loudness:g} LUFS, peaks ≤ {self.peak:g} dBTP"
        return what


@dataclass
class ExportResult:
    path: Path
    source: Path
    format: str
    rate: int
    frames: int
    duration: float
    loudness: float | None  # LUFS of the output (measured)
    true_peak: float | None  # dBTP of the output (measured)
    source_loudness: float | None
    gain_db: float
    limited_db: float
    bpm: float | None
    key: str | None
    bytes: int
    seconds: float  # wall time of the export

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["path"], data["source"] = str(self.path), str(self.source)
        for name in ("loudness", "true_peak", "source_loudness"):
            value = data[name]
            data[name] = None if value is None or not math.isfinite(value) else round(value, 2)
        return data


Progress = Callable[[float, str], None]

# how much of the work each stage is (for one overall fraction)
_STAGES = {
    "reading": (0.0, 0.05),
    "resampling": (0.05, 0.2),
    "loudness": (0.2, 0.65),
    "encoding": (0.65, 0.95),
    "tagging": (0.95, 1.0),
}


class _Reporter:
    def __init__(self, progress: Progress | None, cancel: Callable[[], bool] | None):
        self.progress, self.cancel = progress, cancel

    def check(self) -> None:
        if self.cancel is not None and self.cancel():
            raise ExportCancelled("the export was cancelled")

    def __call__(self, stage: str, fraction: float = 0.0) -> None:
        self.check()
        if self.progress is not None:
            lo, hi = _STAGES.get(stage, (1.0, 1.0))
            self.progress(lo + (hi - lo) * min(max(fraction, 0.0), 1.0), stage)


def output_name(meta: SongMeta | None, options: ExportOptions, source: Path) -> str:
    """The file name (with extension) the pattern gives for this song."""
    if meta is None:
        meta = SongMeta(title=source.stem)
    return render(options.pattern, meta.name_fields()) + options.extension


def _free_path(folder: Path, name: str) -> Path:
    path = folder / name
    stem, ext = os.path.splitext(name)
    n = 2
    while path.exists() or path.with_name(path.name + ".part").exists():
        path = folder / f"{stem}-{n}{ext}"
        n += 1
    return path


def export_file(
    source: str | Path,
    out_dir: str | Path,
    options: ExportOptions,
    *,
    meta: SongMeta | None = None,
    name: str | None = None,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
) -> ExportResult:
    """Export one audio file (WAV, FLAC, MP3, AIFF… anything soundfile reads) to
    ``out_dir``; see the module docstring. ``meta`` defaults to the sidecar beside the file
    (tempo and key measured when unknown); ``name`` overrides the pattern (an extension is
    added). Raises ExportError (bad input, a folder that cannot be written),
    ExportCancelled, or OSError."""
    import soundfile as sf

    started = time.perf_counter()
    report = _Reporter(progress, cancel)
    options.validate()
    source = Path(source)
    out_dir = Path(out_dir)
    if not source.is_file():
        raise ExportError("source", f"{source} is not a file")
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError("output", f"{out_dir} is a file, not a folder")
    if meta is None:
        meta = SongMeta.beside(source) or SongMeta(title=source.stem)
    else:
        meta = dataclasses.replace(meta)

    report("reading")
    try:
        audio, rate = sf.read(str(source), dtype="float32", always_2d=True)
    except Exception as exc:
        raise ExportError("source", f"{source} cannot be read as audio: {exc}") from None
    if not len(audio):
        raise ExportError("source", f"{source} has no audio")
    if audio.shape[1] > 2:
        raise ExportError(
            "source", f"{source} has {audio.shape[1]} channels; only mono and stereo are exported"
        )
    report("reading", 1.0)

    if not meta.bpm or not meta.key:
        from ..song import analysis

        measured = analysis.tempo_key({"bpm": meta.bpm, "key": meta.key}, None, audio, rate)
        for field in ("bpm", "key"):
            if not getattr(meta, field) and measured[field]:
                setattr(meta, field, measured[field])
                setattr(meta, f"{field}_source", "measured")
    report("resampling")
    if rate != options.rate:
        audio = _resample(audio, rate, options.rate, report)
    rate = options.rate
    report("resampling", 1.0)

    source_loudness = loudness = tp = None
    gain_db = limited_db = 0.0
    if options.loudness is not None:
        from . import loudness as lu

        done = lu.normalise(
            audio,
            rate,
            options.loudness,
            options.peak,
            check=report.check,
            progress=lambda f: report("loudness", f),
        )
        audio, source_loudness, loudness = done.audio, done.measured, done.loudness
        tp, gain_db, limited_db = done.true_peak, done.gain_db, done.limited_db
    report("loudness", 1.0)

    out_dir.mkdir(parents=True, exist_ok=True)
    final = _free_path(
        out_dir,
        (safe_name(name) + options.extension) if name else output_name(meta, options, source),
    )
    if final.resolve() == source.resolve():  # cannot happen (never overwrite)
        raise ExportError("output", f"{final} is the source file")
    part = final.with_name(final.name + ".part")
    try:
        audio, loudness, tp = _write(part, audio, rate, options, meta, report, loudness, tp)
        report("tagging")
        _tag(part, options.format, meta, audio)
        report("tagging", 1.0)
        with open(part, "rb+") as fh:
            os.fsync(fh.fileno())
        while final.exists():  # someone took the name meanwhile
            final = _free_path(out_dir, final.name)
        os.replace(part, final)
    except BaseException:
        try:
            part.unlink()
        except OSError:
            pass
        raise
    if progress is not None:
        progress(1.0, "done")
    return ExportResult(
        path=final,
        source=source,
        format=options.format,
        rate=rate,
        frames=len(audio),
        duration=round(len(audio) / rate, 3),
        loudness=loudness,
        true_peak=tp,
        source_loudness=source_loudness,
        gain_db=round(gain_db, 2),
        limited_db=round(limited_db, 2),
        bpm=meta.bpm,
        key=meta.key,
        bytes=final.stat().st_size,
        seconds=round(time.perf_counter() - started, 3),
    )


def _resample(audio, rate: int, to: int, report: _Reporter):
    import numpy as np
    import soxr

    stream = soxr.ResampleStream(rate, to, audio.shape[1], dtype="float32", quality="VHQ")
    step = rate * 10
    parts = []
    for start in range(0, len(audio), step):
        report("resampling", start / len(audio))
        parts.append(
            stream.resample_chunk(
                np.ascontiguousarray(audio[start : start + step]), last=start + step >= len(audio)
            )
        )
    return np.concatenate(parts) if parts else audio


def _write(
    part: Path,
    audio,
    rate: int,
    options: ExportOptions,
    meta: SongMeta,
    report: _Reporter,
    loudness,
    tp,
):
    """Encode to ``part``; for MP3 with a ceiling, decode it back and, if the codec's
    overshoot passed the ceiling, encode again a little lower."""
    import numpy as np

    for _round in range(MP3_ROUNDS if options.format == "mp3" else 1):
        _encode(part, audio, rate, options, meta, report)
        if options.format != "mp3" or options.loudness is None:
            break
        import soundfile as sf

        from . import loudness as lu

        decoded, _ = sf.read(str(part), dtype="float32", always_2d=True)
        decoded_tp = lu.true_peak(decoded, rate, report.check)
        if decoded_tp <= options.peak:
            tp = max(tp if tp is not None else decoded_tp, decoded_tp)
            break
        trim = options.peak - decoded_tp - 0.05
        audio = audio * np.float32(lu.gain(trim))
        loudness = (loudness or 0.0) + trim
        tp = (tp or 0.0) + trim
    return audio, loudness, tp


def _encode(
    part: Path, audio, rate: int, options: ExportOptions, meta: SongMeta, report: _Reporter
) -> None:
    import io

    import soundfile as sf

    from . import tags

    fmt, subtype, _ext, _what = FORMATS[options.format]
    buffer = io.BytesIO() if options.format.startswith("wav") else None
    target = buffer if buffer is not None else str(part)
    kwargs: dict[str, Any] = {}
    if options.format == "mp3":
        kwargs = {"compression_level": 0.0, "bitrate_mode": "CONSTANT"}  # 320 kbps
    step = rate * 5
    with sf.SoundFile(
        target, "w", samplerate=rate, channels=audio.shape[1], format=fmt, subtype=subtype, **kwargs
    ) as out:
        for start in range(0, len(audio), step):
            report("encoding", 0.9 * start / len(audio))
            out.write(audio[start : start + step])
    if buffer is not None:
        data = buffer.getvalue()
        extra = [c for c in (tags.acid_chunk(meta, len(audio) / rate), tags.info_chunk(meta)) if c]
        data = tags.insert_before_data(data, extra)
        with open(part, "wb") as fh:
            view = memoryview(data)
            for start in range(0, len(view), 1 << 24):
                report("encoding", 0.9 + 0.1 * start / len(view))
                fh.write(view[start : start + (1 << 24)])
    report("encoding", 1.0)


def _tag(part: Path, fmt: str, meta: SongMeta, audio) -> None:
    from . import tags

    if fmt == "flac":
        tags.write_flac(part, meta)
    elif fmt == "mp3":
        tags.write_id3(part, meta, "mp3")
    elif fmt == "aiff":
        tags.write_id3(part, meta, "aiff")
    else:
        tags.write_id3(part, meta, "wav")


def describe_formats() -> list[dict[str, Any]]:
    """The choices, for a dialog: format names with what a person reads, rates, presets."""
    return [{"format": k, "label": v[3], "extension": v[2]} for k, v in FORMATS.items()]
