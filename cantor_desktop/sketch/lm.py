"""The sketch's "language model": fill what a caption implies, the way ACE-Step's LM does.

Deterministic for a seed: explicit values in the request win, then what the caption says
("128 bpm", "A minor", "waltz"), then genre and tempo words, then a seeded choice.
"""

from __future__ import annotations

import math
import random
import re

from . import music, words
from .request import is_instrumental, sparse, time_signature

# (pattern, bpm, time signature or None); the first match in the caption wins
GENRES: list[tuple[str, int, str | None]] = [
    (r"drum\s*(?:and|&|n'?)\s*bass|\bdnb\b|jungle", 174, "4"),
    (r"\bwaltz", 90, "3"),
    (r"\bmarch\b|\bpolka\b", 116, "2"),
    (r"\bjig\b|\bsiciliana\b|6/8", 100, "6"),
    (r"lo-?fi", 80, "4"),
    (r"dubstep", 140, "4"),
    (r"\btrap\b", 140, "4"),
    (r"hip[\s-]?hop|boom[\s-]?bap|\brap\b", 90, "4"),
    (r"deep house|tech house|\bhouse\b", 124, "4"),
    (r"techno", 130, "4"),
    (r"trance", 138, "4"),
    (r"\bedm\b|electro", 128, "4"),
    (r"\bdisco\b", 118, "4"),
    (r"\bfunk", 105, "4"),
    (r"reggaeton", 95, "4"),
    (r"reggae|\bdub\b", 75, "4"),
    (r"bossa\s*nova|samba", 130, "4"),
    (r"\bpunk", 170, "4"),
    (r"metal", 140, "4"),
    (r"\bjazz|swing", 120, "4"),
    (r"\bblues", 85, "4"),
    (r"\bsoul\b|r&b|\brnb\b", 95, "4"),
    (r"country|bluegrass", 110, "4"),
    (r"\bfolk", 100, "4"),
    (r"ambient|drone", 70, "4"),
    (r"ballad|lullaby", 70, "4"),
    (r"\brock\b", 120, "4"),
    (r"\bpop\b", 116, "4"),
]
TEMPO_WORDS: list[tuple[str, int]] = [
    (r"\blargo\b|very slow", 50),
    (r"\badagio\b", 70),
    (r"\bslow\b|laid[\s-]?back|chill", 75),
    (r"\bandante\b", 90),
    (r"mid[\s-]?tempo|\bmoderato\b", 105),
    (r"\ballegro\b", 130),
    (r"\bupbeat\b|energetic|\bfast\b|driving", 140),
    (r"\bpresto\b|very fast|frantic", 180),
]
TIME_SIGNATURES = [
    (r"\b3/4\b|three[\s-]four", "3"),
    (r"\b6/8\b|six[\s-]eight", "6"),
    (r"\b2/4\b|two[\s-]four", "2"),
    (r"\b4/4\b|four[\s-]four", "4"),
]
LANGUAGES = {
    "english": "en",
    "french": "fr",
    "spanish": "es",
    "german": "de",
    "italian": "it",
    "portuguese": "pt",
    "japanese": "ja",
    "korean": "ko",
    "chinese": "zh",
    "mandarin": "zh",
    "russian": "ru",
    "dutch": "nl",
}
MINOR_MOODS = r"\bsad|melanchol|\bdark|gloomy|haunting|minor|somber|moody|tragic"
_BPM = re.compile(r"(\d{2,3}(?:\.\d+)?)\s*-?\s*bpm\b", re.IGNORECASE)
_SECONDS = re.compile(r"(\d{1,3})\s*(?:s|sec|secs|seconds)\b", re.IGNORECASE)
_MINUTES = re.compile(r"(\d{1,2}(?:\.\d+)?)\s*(?:min|mins|minutes)\b", re.IGNORECASE)


def _search(table, text: str):
    for pattern, *rest in table:
        if re.search(pattern, text, re.IGNORECASE):
            return rest
    return None


def caption_bpm(caption: str) -> int | None:
    m = _BPM.search(caption)
    if m:
        return max(30, min(300, round(float(m.group(1)))))
    tempo = _search(TEMPO_WORDS, caption)
    genre = _search(GENRES, caption)
    if genre and tempo:  # "slow house": lean the genre's tempo towards the word
        return round((genre[0] * 2 + tempo[0]) / 3)
    if genre:
        return genre[0]
    if tempo:
        return tempo[0]
    return None


def caption_time_signature(caption: str) -> str | None:
    ts = _search(TIME_SIGNATURES, caption)
    if ts:
        return ts[0]
    genre = _search(GENRES, caption)
    return genre[1] if genre else None


def caption_language(caption: str, lyrics: str) -> str:
    low = caption.lower()
    for word, code in LANGUAGES.items():
        if word in low:
            return code
    if re.search(r"[\u3040-\u30ff]", lyrics):
        return "ja"
    if re.search(r"[\uac00-\ud7af]", lyrics):
        return "ko"
    if re.search(r"[\u4e00-\u9fff]", lyrics):
        return "zh"
    if re.search(r"[\u0400-\u04ff]", lyrics):
        return "ru"
    return "en"


def caption_duration(caption: str) -> float | None:
    m = _MINUTES.search(caption)
    if m:
        return float(m.group(1)) * 60
    m = _SECONDS.search(caption)
    if m:
        return float(m.group(1))
    return None


def song_duration(lyrics: str, bpm: int, ts: int, rng: random.Random) -> float:
    """Enough time to sing every line (an eighth note per syllable, bars rounded up), with
    an intro, gaps between lines and an outro."""
    lines = music.lyric_lines("" if is_instrumental(lyrics) else lyrics)
    bar = 60.0 / bpm * ts
    if not lines:
        return float(rng.choice((30, 45, 60, 90, 120)))
    bars = 2 + 2  # intro and outro
    for syllables in lines:
        bars += -(-sum(syllables) // (ts * 2)) + 1  # the line, then a bar's breath
    return float(bars * bar)


def enrich(req: dict, seed: int) -> dict:
    """One enriched request (full field set) for ``lm_mode`` generate/inspire/format.

    generate: the metadata and the audio codes of the song's plan (codes.py), made from
    ``seed`` (the LM's seed: the arrangement's); inspire: a caption and lyrics from the
    short idea in the caption (words.py), and the metadata, no codes; format: the caption
    and lyrics tidied, and the metadata, no codes (as ace-server's LM modes)."""
    rng = random.Random(seed)
    out = dict(req)
    caption = req["caption"]
    lyrics = req["lyrics"]
    locked = not req["use_cot_caption"]  # "lock my caption": never rewritten
    if req["lm_mode"] == "inspire":
        written_caption, written = words.inspire(caption, rng)
        if not locked:
            caption = out["caption"] = written_caption
        if not lyrics.strip():
            lyrics = out["lyrics"] = written
    elif req["lm_mode"] == "format":
        if not locked:
            caption = out["caption"] = words.tidy_caption(caption) or caption
        lyrics = out["lyrics"] = words.tidy_lyrics(lyrics)
    bpm = int(req["bpm"]) if req["bpm"] > 0 else caption_bpm(caption)
    if not bpm:
        bpm = rng.randrange(80, 141, 2)
    out["bpm"] = bpm
    ts = req["timesignature"] or caption_time_signature(caption) or "4"
    out["timesignature"] = ts
    key = music.parse_key(req["keyscale"]) or music.find_key(caption)
    if key is None:
        minor = bool(re.search(MINOR_MOODS, caption, re.IGNORECASE)) or rng.random() < 0.4
        key = (rng.randrange(12), minor)
    out["keyscale"] = music.key_name(*key)
    if req["duration"] > 0:
        out["duration"] = float(req["duration"])  # asked for: kept as is
    else:
        duration = caption_duration(caption) or song_duration(lyrics, bpm, time_signature(ts), rng)
        # up to the next tenth, so the song never loses the end of its last bar
        out["duration"] = float(max(10.0, min(600.0, math.ceil(duration * 10 - 1e-9) / 10)))
    if not is_instrumental(lyrics):
        out["vocal_language"] = req["vocal_language"] or caption_language(caption, lyrics)
    if req["lm_mode"] == "generate":
        out["audio_codes"] = plan_codes(out, seed)
    return out


def plan_codes(enriched: dict, seed: int) -> str:
    """The codes of the song the synth makes of ``enriched`` with the arrangement of
    ``seed`` (the same Song the synth builds: engine.song_from_request)."""
    from . import codes, render

    key = music.parse_key(enriched["keyscale"]) or (0, False)
    song = render.Song(
        bpm=max(30, min(300, int(enriched["bpm"]))),
        beats_per_bar=time_signature(enriched["timesignature"]),
        tonic=key[0],
        minor=key[1],
        duration=float(max(1.0, min(600.0, enriched["duration"]))),
        seed=seed,
        lyrics="" if is_instrumental(enriched["lyrics"]) else enriched["lyrics"],
        caption=enriched["caption"],
        plan_seed=seed,
    )
    return codes.encode(song, render.plan(song))


def run_lm(req: dict, seed: int) -> list[dict]:
    """The /lm result: ``lm_batch_size`` enriched requests (sparse), seeds seed, seed+1, …"""
    n = max(1, min(int(req["lm_batch_size"]), 9))
    return [sparse(enrich(req, seed + i)) for i in range(n)]
