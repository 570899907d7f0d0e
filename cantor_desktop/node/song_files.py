"""Writing a finished song: the audio file in the requested format plus a sidecar JSON.

File names are for people: ``2026-11-30_1412_warm-lofi-piano-rain_seed1234.wav`` (date and
time, the first words of the caption, the seed; ``_take2`` for the second take of a batch).
The engine's WAV is written as it came for wav16/24/32; flac and mp3 are encoded here with
soundfile. Every file is written atomically, so no half file is ever taken for a whole one.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..song import musical_keys
from ..song import take_check
from ..song.analysis import tempo_key
from ..files import write_atomic
from ..song.naming import slug
from . import take_files

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sidecar")
EXTENSIONS = {"wav16": ".wav", "wav24": ".wav", "wav32": ".wav", "flac": ".flac", "mp3": ".mp3"}
CONTENT_TYPES = {".wav": "audio/wav", ".flac": "audio/flac", ".mp3": "audio/mpeg"}
WAV_SUBTYPES = {"wav16": "PCM_16", "wav24": "PCM_24", "wav32": "FLOAT"}
MAX_SIDECAR_BYTES = 4 * 2**20


def base_name(caption: str, seed: int | None, when: float, take: int | None = None) -> str:
    stamp = time.strftime("%Y-%m-%d_%H%M", time.localtime(when))
    name = f"{stamp}_{slug(caption)}"
    if seed is not None and seed >= 0:
        name += f"_seed{seed}"
    if take is not None:
        name += f"_take{take}"
    return name


def unique_path(folder: Path, stem: str, ext: str) -> Path:
    """A free name for a take (``stem-2`` … when taken), reserved: its sidecar is created
    empty here (``O_EXCL``), so another writer of the same folder — a member of a pool
    sharing ``songs.dir`` finishing a song of the same name in the same minute — never
    picks it too and replaces this take. The empty sidecar names no song (nothing deletes
    a take by it) and is replaced by the real one."""
    n = 1
    while True:
        path = folder / (f"{stem}{ext}" if n == 1 else f"{stem}-{n}{ext}")
        n += 1
        if path.exists():
            continue
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            os.close(os.open(path.with_suffix(".json"), flags, 0o666))
        except FileExistsError:
            continue
        return path


def _unreserve(path: Path) -> None:
    """A name reserved by :func:`unique_path` for a take that was not written."""
    sidecar = path.with_suffix(".json")
    try:
        if sidecar.stat().st_size == 0:
            sidecar.unlink()
    except OSError:
        pass


def _is_wav(data: bytes) -> bool:
    return len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def wav_header(data: bytes) -> dict[str, Any] | None:
    """Format, bits, rate, channels and duration of a RIFF/WAVE file, from its chunks (no
    audio library: a WAV song the engine already wrote as asked needs no numpy)."""
    if not _is_wav(data):
        return None
    pos, fmt, size = 12, None, None
    while pos + 8 <= len(data):
        cid = data[pos : pos + 4]
        (length,) = struct.unpack_from("<I", data, pos + 4)
        body = pos + 8
        if cid == b"fmt " and length >= 16:
            tag, channels, rate, _bps, _align, bits = struct.unpack_from("<HHIIHH", data, body)
            if tag == 0xFFFE and length >= 26:
                tag = struct.unpack_from("<H", data, body + 24)[0]
            fmt = (tag, channels, rate, bits)
        elif cid == b"data":
            size = min(length, len(data) - body)
            break
        pos = body + length + (length & 1)
    if fmt is None or size is None or not fmt[1] or not fmt[2] or not fmt[3]:
        return None
    tag, channels, rate, bits = fmt
    frames = size // (channels * bits // 8)
    return {
        "tag": tag,
        "bits": bits,
        "sample_rate": rate,
        "channels": channels,
        "duration": round(frames / rate, 3),
    }


_WAV_KIND = {"wav16": (1, 16), "wav24": (1, 24), "wav32": (3, 32)}


def encode(audio: bytes, fmt: str) -> bytes:
    """The engine's audio bytes → bytes of the requested format."""
    if fmt.startswith("wav"):
        head = wav_header(audio)
        if head is not None and (head["tag"], head["bits"]) == _WAV_KIND[fmt]:
            return audio  # as the engine gave it
    import soundfile as sf

    data, rate = sf.read(io.BytesIO(audio), dtype="float32", always_2d=True)
    out = io.BytesIO()
    if fmt == "flac":
        sf.write(out, data, rate, format="FLAC", subtype="PCM_24")
    elif fmt == "mp3":
        sf.write(out, data, rate, format="MP3", subtype="MPEG_LAYER_III")
    else:
        sf.write(out, data, rate, format="WAV", subtype=WAV_SUBTYPES[fmt])
    return out.getvalue()


def _readable(path: Path) -> None:
    """Songs are the user's files: the usual permissions, not a temp file's 0600."""
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(path, 0o666 & ~umask)
    except OSError:
        pass


def audio_info(data: bytes) -> dict[str, Any]:
    head = wav_header(data)
    if head is not None:
        return {k: head[k] for k in ("sample_rate", "channels", "duration")}
    import soundfile as sf

    try:
        info = sf.info(io.BytesIO(data))
    except Exception:
        return {}
    return {
        "sample_rate": info.samplerate,
        "channels": info.channels,
        "duration": round(info.duration, 3),
    }


def lm_metadata(enriched: dict[str, Any]) -> dict[str, Any]:
    """What the language model filled in, from one request of the engine's ``/lm`` result,
    in the song request's own names (None where the LM left a field unset)."""

    def number(value, kind):
        try:
            value = kind(value)
        except (TypeError, ValueError):
            return None
        return value if value > 0 else None

    ts = str(enriched.get("timesignature") or "").strip()
    return {
        "bpm": number(enriched.get("bpm"), int),
        # in its usual spelling: ACE-Step's LM may write "D# minor" for E♭ minor
        "key": _spelt_key(str(enriched.get("keyscale") or "").strip()) or None,
        "time_signature": int(ts) if ts.isdigit() and int(ts) > 0 else None,
        "duration": number(enriched.get("duration"), float),
        "language": str(enriched.get("vocal_language") or "").strip() or None,
        "caption": str(enriched.get("caption") or "").strip() or None,
        # the 5 Hz codes the DiT rendered: "same song, new render" sends them back
        "audio_codes": str(enriched.get("audio_codes") or "").strip() or None,
    }


def _spelt_key(key: str) -> str:
    return musical_keys.spell(key) or key


def lm_metadata_per_take(
    enriched: list[dict[str, Any]] | None, takes: int
) -> list[dict[str, Any] | None]:
    """The LM's metadata for each take: the /lm array has one request per LM sample, each
    rendered as ``synth_batch_size`` takes, in order. None for every take without /lm."""
    if not enriched:
        return [None] * takes
    per_take: list[dict[str, Any] | None] = []
    for req in enriched:
        try:
            count = max(1, int(req.get("synth_batch_size") or 1))
        except (TypeError, ValueError):
            count = 1
        per_take.extend([lm_metadata(req)] * count)
    return [per_take[min(i, len(per_take) - 1)] for i in range(takes)]


def write_takes(
    folder: Path,
    *,
    song_id: str,
    request: dict[str, Any],
    fmt: str,
    audios: list[bytes],
    seeds: list[int | None],
    meta: dict[str, Any],
    when: float | None = None,
    lm_metadata: list[dict[str, Any] | None] | None = None,
    source_facts: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Write every take and its sidecar; returns one entry per take for the song record.

    ``lm_metadata``: per take, what the LM filled in (bpm, key, time signature, duration,
    language, caption), recorded next to the request's own values; None without /lm.
    ``source_facts``: the tempo, key and time signature of the source an edit keeps them
    from (not measured again)."""
    folder.mkdir(parents=True, exist_ok=True)
    take_files.remember_folder(folder)
    when = when or time.time()
    ext = EXTENSIONS[fmt]
    files = []
    many = len(audios) > 1
    for index, audio in enumerate(audios):
        seed = seeds[index] if index < len(seeds) else None
        take = index + 1 if many else None
        encoded = encode(audio, fmt)
        path = unique_path(folder, base_name(request.get("caption", ""), seed, when, take), ext)
        try:
            info = audio_info(encoded)
            lm = lm_metadata[index] if lm_metadata and index < len(lm_metadata) else None
            # tempo and key: asked, else the LM's, else measured from the audio (with source)
            music = tempo_key(request, lm, audio, source=source_facts)
            # what was asked or chosen, checked against what the take measures
            music["check"] = take_check.measure(music, audio, task=request.get("task"))
            sidecar = {
                "cantor_song": 1,
                "id": song_id,
                "take": index + 1,
                "takes": len(audios),
                "audio": {"file": path.name, "format": fmt, **info},
                "request": request,
                "lm_metadata": lm,
                "seed": seed,
                **music,
                **meta,
            }
            # audio and sidecar are written (each atomically, with fsync) side by side
            side = _POOL.submit(
                write_atomic,
                path.with_suffix(".json"),
                json.dumps(sidecar, indent=2, ensure_ascii=False).encode("utf-8"),
            )
            write_atomic(path, encoded)
            side.result()
            for done in (path, path.with_suffix(".json")):
                _readable(done)
        except BaseException:
            _unreserve(path)
            raise
        files.append(
            {
                "take": index + 1,
                "audio": str(path),
                "sidecar": str(path.with_suffix(".json")),
                "format": fmt,
                "seed": seed,
                "bytes": len(encoded),
                **info,
                **music,
            }
        )
    return files


def delete_takes(song_id: str, takes: list[Any]) -> dict[str, list[str]]:
    """Delete a song's audio files and sidecars: only files this node wrote for this song.
    A take's audio must be a file of a songs folder (:mod:`.take_files`), and its sidecar
    — the file beside it with ``.json``, whatever the record says — must still name this
    song and this audio file (the user may have moved the files, a newer song may have been
    written under the same name, a record from a pool may name any path); otherwise
    nothing of it is deleted and its paths are listed as kept.
    Returns ``{"deleted": [...], "kept": [...]}`` (paths)."""
    deleted: list[str] = []
    kept: list[str] = []
    for take in takes:
        try:
            audio = take_files.checked(take.audio)
        except take_files.OutsideSongs:
            kept.append(str(take.audio))
            continue
        sidecar = audio.with_suffix(".json")
        try:
            with take_files.open_take(sidecar) as fh:
                meta = json.loads(fh.read(MAX_SIDECAR_BYTES).decode("utf-8"))
            named = meta.get("audio") if isinstance(meta, dict) else None
            ours = (
                isinstance(meta, dict)
                and meta.get("id") == song_id
                and isinstance(named, dict)
                and named.get("file") == audio.name
            )
        except (OSError, ValueError, take_files.OutsideSongs):
            ours = False
        if not ours:
            kept.extend(str(p) for p in (audio, sidecar) if p.exists())
            continue
        for path in (audio, sidecar):  # the sidecar last: it proves whose files they are
            try:
                path.unlink()
                deleted.append(str(path))
            except FileNotFoundError:
                pass
            except OSError:
                kept.append(str(path))
    return {"deleted": deleted, "kept": kept}
