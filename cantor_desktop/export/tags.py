"""What an exported file says about its song, written where each format keeps it.

- WAV: an ``acid`` chunk (tempo, root note, beats, meter — what DAWs read to set a clip's
  tempo and key) and a ``LIST``/``INFO`` chunk (INAM title, ICMT caption · seed · model,
  ISFT software, ICRD date, IKEY key words), both before the audio data; plus an ``id3 ``
  chunk through mutagen (TBPM, TKEY, …) for players and DJ software that read ID3 in WAV.
- FLAC: Vorbis comments (TITLE, BPM, KEY, INITIALKEY, COMMENT, DESCRIPTION, LYRICS, DATE,
  ENCODER, CANTOR_SEED, CANTOR_MODEL, CANTOR_CAPTION, CANTOR_SONG_ID, …) through mutagen.
- MP3 and AIFF: ID3v2.3 frames through mutagen (TIT2, TBPM, TKEY, COMM, USLT, TDRC, TSSE,
  TXXX:SEED/MODEL/CAPTION/KEY/SONG_ID …; in AIFF the ``ID3 `` chunk).

:class:`SongMeta` is read from a song's sidecar (or the node's song JSON); the writers take
it and a finished file.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..song import musical_keys
from ..song.lyrics import is_instrumental
from ..song.naming import slug

SOFTWARE = "Cantor Desktop"


@dataclass
class SongMeta:
    """Everything an export writes about a song (any field may be unknown)."""

    title: str = ""
    caption: str = ""
    lyrics: str = ""  # empty for an instrumental
    bpm: float | None = None
    key: str | None = None  # "A minor"
    time_signature: int | None = None
    seed: int | None = None
    model: str = ""
    take: int = 1
    takes: int = 1
    song_id: str = ""
    created: float | None = None  # epoch seconds
    bpm_source: str | None = None  # "asked" | "lm" | "measured"
    key_source: str | None = None

    @classmethod
    def from_sidecar(cls, data: Mapping[str, Any]) -> "SongMeta":
        """A song's sidecar (``cantor_song`` JSON beside its audio)."""
        request = _mapping(data.get("request"))
        lm = _mapping(data.get("lm_metadata"))
        model = data.get("model")
        model_name = model.get("name") if isinstance(model, Mapping) else model
        timings = _mapping(data.get("timings"))
        meta = cls(
            title=str(data.get("title") or ""),
            caption=str(request.get("caption") or ""),
            lyrics=_lyrics(request.get("lyrics")),
            seed=_int(data.get("seed")),
            model=str(model_name or request.get("model") or ""),
            take=_int(data.get("take")) or 1,
            takes=_int(data.get("takes")) or 1,
            song_id=str(data.get("id") or ""),
            created=_float(timings.get("queued_at")),
            time_signature=_int(data.get("time_signature"))
            or _int(request.get("time_signature"))
            or _int(lm.get("time_signature")),
        )
        meta._tempo_key(data, request, lm)
        return meta

    @classmethod
    def from_song(
        cls, song: Mapping[str, Any], take: int = 1, sidecar: Mapping[str, Any] | None = None
    ) -> "SongMeta":
        """The node's song JSON (``GET /v1/songs/{id}``) for one take, completed by that
        take's sidecar when it can be read (the LM's values live only there)."""
        files = [f for f in song.get("takes") or song.get("files") or [] if isinstance(f, Mapping)]
        entry = next((f for f in files if _int(f.get("n", f.get("take"))) == take), {})
        request = _mapping(song.get("request"))
        base = dict(sidecar or {})
        base.setdefault("id", song.get("id"))
        base.setdefault("request", request)
        base.setdefault("take", take)
        base.setdefault("takes", len(files) or 1)
        base.setdefault("seed", entry.get("seed"))
        engine = _mapping(song.get("engine"))
        base.setdefault("model", engine.get("model") or request.get("model"))
        base.setdefault("timings", {"queued_at": song.get("created")})
        for name in ("bpm", "key", "time_signature", "facts_from"):
            if entry.get(name) and not base.get(name):
                base[name] = entry[name]
        if song.get("title") and not base.get("title"):
            base["title"] = song["title"]
        return cls.from_sidecar(base)

    @classmethod
    def beside(cls, audio: Path) -> "SongMeta | None":
        """The sidecar next to an audio file (same name, .json), when it is a song's."""
        try:
            data = json.loads(audio.with_suffix(".json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, Mapping) or "cantor_song" not in data:
            return None
        return cls.from_sidecar(data)

    def _tempo_key(
        self, data: Mapping[str, Any], request: Mapping[str, Any], lm: Mapping[str, Any]
    ) -> None:
        """The sidecar's own tempo and key (recorded at saving, with ``facts_from``), else
        the request's, else the LM's; still unknown ones are measured by the export."""
        facts = _mapping(data.get("facts_from"))
        for name in ("bpm", "key"):
            for where, source in ((data, facts.get(name)), (request, "asked"), (lm, "lm")):
                value = where.get(name)
                if value:
                    if name == "key":  # an old sidecar's "D# minor" is E♭ minor's "Eb minor"
                        value = musical_keys.spell(value) or value
                    setattr(self, name, float(value) if name == "bpm" else str(value))
                    setattr(self, f"{name}_source", source)
                    break

    # -- how the fields read ------------------------------------------------------------------
    @property
    def bpm_text(self) -> str | None:
        if not self.bpm:
            return None
        return (
            str(int(round(self.bpm)))
            if abs(self.bpm - round(self.bpm)) < 0.05
            else f"{self.bpm:.1f}"
        )

    @property
    def key_short(self) -> str | None:
        """The tag form ("Ebm", "F#m"): ID3 TKEY's own notation, in the key's usual
        spelling whatever the sidecar wrote (an old one may say "D# minor")."""
        return musical_keys.short(self.key)

    @property
    def display_title(self) -> str:
        if self.title:
            return self.title
        words = self.caption.split()
        text = " ".join(words[:8])
        return text if len(words) <= 8 else text + "…"

    @property
    def date(self) -> str | None:
        return time.strftime("%Y-%m-%d", time.localtime(self.created)) if self.created else None

    def comment(self) -> str:
        parts = [self.caption.strip()] if self.caption.strip() else []
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.model:
            parts.append(f"model {self.model}")
        if self.takes > 1:
            parts.append(f"take {self.take} of {self.takes}")
        return " · ".join(parts)

    def name_fields(self) -> dict[str, Any]:
        words = slug(self.caption) if self.caption else None
        return {
            "title": self.title or words,
            "bpm": self.bpm_text,
            "key": musical_keys.file_text(self.key),  # "Ebm", "Fsharpm": no # in a file name
            "n": self.take,
            "take": self.take,
            "seed": self.seed,
            "model": self.model,
            "date": self.date,
            "caption": words,
            "id": self.song_id,
        }


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a JSON object), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _lyrics(value: Any) -> str:
    return "" if not isinstance(value, str) or is_instrumental(value) else value.strip()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# -- WAV: acid and LIST/INFO chunks ---------------------------------------------------------------

ACID_ONE_SHOT, ACID_ROOT_SET, ACID_STRETCH, ACID_DISK_BASED = 0x01, 0x02, 0x04, 0x08
ACID_ROOT_BASE = 48  # ACID's root notes: 48 = C … 59 = B


def acid_chunk(meta: SongMeta, duration: float) -> bytes | None:
    """24 bytes (as libsndfile reads them): flags, root note, two unused fields, beats,
    meter denominator, meter numerator, tempo."""
    if not meta.bpm:
        return None
    flags = ACID_STRETCH | ACID_DISK_BASED
    root = 0
    key = musical_keys.parse(meta.key)
    if key is not None:
        flags |= ACID_ROOT_SET
        root = ACID_ROOT_BASE + key.tonic
    beats = max(1, int(round(duration * meta.bpm / 60.0)))
    body = struct.pack(
        "<IHHfIHHf", flags, root, 0x8000, 0.0, beats, 4, meta.time_signature or 4, float(meta.bpm)
    )
    return b"acid" + struct.pack("<I", len(body)) + body


def info_chunk(meta: SongMeta) -> bytes:
    """LIST/INFO: UTF-8 text, each NUL-terminated and padded to an even length."""
    fields = [
        ("INAM", meta.display_title),
        ("ICMT", meta.comment()),
        ("ISFT", SOFTWARE),
        ("ICRD", meta.date or ""),
        (
            "IKEY",
            "; ".join(x for x in (meta.key, f"{meta.bpm_text} BPM" if meta.bpm_text else "") if x),
        ),
    ]
    body = b"INFO"
    for cid, text in fields:
        if not text:
            continue
        data = text.encode("utf-8") + b"\0"
        body += (
            cid.encode() + struct.pack("<I", len(data)) + data + (b"\0" if len(data) & 1 else b"")
        )
    return b"LIST" + struct.pack("<I", len(body)) + body


def insert_before_data(wav: bytes, chunks: list[bytes]) -> bytes:
    """A RIFF/WAVE file with ``chunks`` placed just before its ``data`` chunk (readers that
    stop at the audio still see them); the RIFF size is updated."""
    if wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    pos = 12
    while pos + 8 <= len(wav):
        cid = wav[pos : pos + 4]
        (length,) = struct.unpack_from("<I", wav, pos + 4)
        if cid == b"data":
            extra = b"".join(chunks)
            out = bytearray(wav[:pos] + extra + wav[pos:])
            struct.pack_into("<I", out, 4, len(out) - 8)
            return bytes(out)
        pos += 8 + length + (length & 1)
    raise ValueError("the WAV file has no data chunk")


# -- mutagen ------------------------------------------------------------------------------------


def _id3_frames(meta: SongMeta) -> list:
    from mutagen import id3

    frames: list[id3.Frame] = [
        id3.TIT2(encoding=3, text=meta.display_title),
        id3.TSSE(encoding=3, text=SOFTWARE),
    ]
    if meta.bpm:
        frames.append(id3.TBPM(encoding=3, text=str(int(round(meta.bpm)))))
    if meta.key_short:
        frames.append(id3.TKEY(encoding=3, text=meta.key_short))
    if meta.comment():
        frames.append(id3.COMM(encoding=3, lang="eng", desc="", text=meta.comment()))
    if meta.lyrics:
        frames.append(id3.USLT(encoding=3, lang="eng", desc="", text=meta.lyrics))
    if meta.date:
        frames.append(id3.TDRC(encoding=3, text=meta.date))
    extra = {
        "CAPTION": meta.caption,
        "KEY": meta.key,
        "SEED": meta.seed,
        "MODEL": meta.model,
        "SONG_ID": meta.song_id,
        "TAKE": f"{meta.take}/{meta.takes}",
        "BPM_SOURCE": meta.bpm_source,
        "KEY_SOURCE": meta.key_source,
    }
    for desc, value in extra.items():
        if value not in (None, ""):
            frames.append(id3.TXXX(encoding=3, desc=desc, text=str(value)))
    return frames


def write_id3(path: Path, meta: SongMeta, kind: str) -> None:
    """ID3v2.3 tags into an MP3 (at its start), an AIFF (``ID3 `` chunk) or a WAV (``id3 ``
    chunk)."""
    if kind == "mp3":
        from mutagen.id3 import ID3

        tags = ID3()
        for frame in _id3_frames(meta):
            tags.add(frame)
        tags.save(str(path), v2_version=3)
        return
    from mutagen.aiff import AIFF
    from mutagen.wave import WAVE

    audio = AIFF(str(path)) if kind == "aiff" else WAVE(str(path))
    if audio.tags is None:
        audio.add_tags()
    id3_tags: Any = audio.tags  # (mutagen declares it None until add_tags)
    for frame in _id3_frames(meta):
        id3_tags.add(frame)
    audio.save(v2_version=3)


def vorbis_comments(meta: SongMeta) -> dict[str, str]:
    tags = {
        "TITLE": meta.display_title,
        "ENCODER": SOFTWARE,
        "COMMENT": meta.comment(),
        "DESCRIPTION": meta.caption,
        "BPM": meta.bpm_text,
        "KEY": meta.key_short,
        "INITIALKEY": meta.key_short,
        "LYRICS": meta.lyrics,
        "DATE": meta.date,
        "CANTOR_KEY": meta.key,
        "CANTOR_SEED": None if meta.seed is None else str(meta.seed),
        "CANTOR_MODEL": meta.model,
        "CANTOR_CAPTION": meta.caption,
        "CANTOR_SONG_ID": meta.song_id,
        "CANTOR_TAKE": f"{meta.take}/{meta.takes}",
        "CANTOR_BPM_SOURCE": meta.bpm_source,
        "CANTOR_KEY_SOURCE": meta.key_source,
    }
    return {k: v for k, v in tags.items() if v}


def write_flac(path: Path, meta: SongMeta) -> None:
    from mutagen.flac import FLAC

    audio = FLAC(str(path))
    if audio.tags is None:
        audio.add_tags()
    for key, value in vorbis_comments(meta).items():
        audio[key] = value
    audio.save()
