"""What a caption asks the Sketch to play: a genre's palette and the instruments it names.

:func:`style_for` reads a caption ("lo-fi piano with rain", "epic orchestral trailer",
"808 trap", "solo piano", "dreamy synthwave, no drums") into a :class:`Style`: the drum kit,
the bass, the instruments that play chords, the one that plays the melody, and textures.
Instruments the caption names replace the genre's own melodic instruments; the genre keeps
its drums, bass and textures unless the caption says otherwise ("solo piano", "no drums",
"without bass", "no vocals" — :mod:`.caption` reads those wherever they sit).

The genre is the first of :data:`GENRES` the caption names by a genre word; words that
only set a mood ("cinematic", "epic", "romantic", "calm", "acoustic" …) choose a genre only
when no genre word is there ("an epic rock anthem" is rock), and do not make a band: "solo
piano … intimate, cinematic" is a piano alone. A caption naming no genre gets the pop
palette, varied by the seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from . import caption as caption_words

# instrument -> the ace-server track (stem) it renders into
PART_OF = {
    "piano": "keyboard",
    "epiano": "keyboard",
    "organ": "keyboard",
    "bells": "keyboard",
    "guitar": "guitar",
    "eguitar": "guitar",
    "strings": "strings",
    "pad": "synth",
    "synth": "synth",
    "arp": "synth",
    "brass": "brass",
    "choir": "backing_vocals",
    "flute": "woodwinds",
}
MELODIC = tuple(PART_OF)
# instruments that can carry a melody (a pad, choir, arpeggio or organ accompanies)
LEADS = ("piano", "epiano", "bells", "guitar", "eguitar", "strings", "brass", "synth", "flute")

# what caption words name: caption.py (kept importable from here for the LM's words)
INSTRUMENT_WORDS, TEXTURE_WORDS, BASS_WORDS = (
    caption_words.INSTRUMENT_WORDS,
    caption_words.TEXTURE_WORDS,
    caption_words.BASS_WORDS,
)
# words of a genre's pattern that set a mood but name no band
MOOD_WORDS = re.compile(
    r"epic|cinematic|heroic|battle|romantic|sentimental|calm|sleep|meditat|catchy|anthem|"
    r"radio|acoustic|soundtrack|film score|lullaby|love song|drone|soundscape|new age|spa",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Genre:
    name: str
    pattern: str
    drums: str  # kit, or "none"
    bass: str  # bass voice, or "none"
    chords: tuple[str, ...]  # melodic instruments by when they enter (first: always)
    lead: str  # the melody's instrument
    textures: tuple[str, ...] = ()
    sevenths: bool = False  # chords with sevenths (jazz, lo-fi, neo-soul)
    hits: bool = False  # orchestral hits and booms on the big downbeats


# the first genre whose pattern is found in the caption wins
GENRES: list[Genre] = [
    Genre(
        "trailer",
        r"trailer|epic|cinematic|heroic|battle|orchestral hits?",
        "orchestral",
        "lowstrings",
        ("strings", "brass", "choir"),
        "brass",
        hits=True,
    ),
    Genre(
        "orchestral",
        r"orchestra|symphon|classical|film score|soundtrack|string quartet",
        "orchestral",
        "lowstrings",
        ("strings", "brass", "flute"),
        "strings",
    ),
    Genre("trap", r"\btrap\b|\bdrill\b|\b808s?\b", "trap", "808", ("pad", "bells"), "bells"),
    Genre(
        "lofi",
        r"lo-?fi|chill[\s-]?hop|chill beat|study beat",
        "lofi",
        "electric",
        ("epiano", "pad"),
        "epiano",
        ("vinyl",),
        sevenths=True,
    ),
    Genre(
        "hiphop",
        r"hip[\s-]?hop|boom[\s-]?bap|\brap\b",
        "lofi",
        "electric",
        ("piano", "strings"),
        "piano",
        ("vinyl",),
        sevenths=True,
    ),
    Genre(
        "synthwave",
        r"synthwave|retrowave|outrun|80s|eighties|vaporwave|darkwave",
        "synthwave",
        "synth",
        ("arp", "pad"),
        "synth",
    ),
    Genre(
        "edm",
        r"\bedm\b|house|techno|trance|electro|dance|club|dubstep|rave|drum\s*(?:and|&|n'?)"
        r"\s*bass|\bdnb\b|jungle|future bass",
        "electronic",
        "synth",
        ("pad", "arp"),
        "synth",
    ),
    Genre(
        "ambient",
        r"ambient|meditat|\bspa\b|sleep|calm|drone|new age|soundscape",
        "none",
        "none",
        ("pad", "bells"),
        "bells",
    ),
    Genre(
        "rock",
        r"\brock\b|metal|punk|grunge|\bindie\b|alt(?:ernative)?\b",
        "rock",
        "electric",
        ("eguitar", "organ"),
        "eguitar",
    ),
    Genre(
        "jazz",
        r"\bjazz|swing|bebop|lounge|\bbossa|samba|neo[\s-]?soul",
        "jazz",
        "upright",
        ("piano", "brass"),
        "piano",
        sevenths=True,
    ),
    Genre(
        "soul",
        r"\bsoul\b|r&b|\brnb\b|funk|gospel|motown|disco",
        "acoustic",
        "electric",
        ("epiano", "brass", "strings"),
        "epiano",
        sevenths=True,
    ),
    Genre(
        "folk",
        r"\bfolk|country|bluegrass|americana|campfire|acoustic|singer[\s-]?songwriter",
        "acoustic",
        "electric",
        ("guitar", "strings"),
        "guitar",
    ),
    Genre(
        "ballad",
        r"ballad|lullaby|love song|sentimental|romantic",
        "soft",
        "electric",
        ("piano", "strings"),
        "piano",
    ),
    Genre("waltz", r"\bwaltz|minuet", "soft", "upright", ("strings", "piano"), "strings"),
    Genre(
        "reggae",
        r"reggae|\bska\b|\bdub\b|dancehall|reggaeton|latin",
        "acoustic",
        "electric",
        ("guitar", "organ"),
        "synth",
    ),
    Genre(
        "pop",
        r"\bpop\b|k-?pop|radio|catchy|anthem",
        "electronic",
        "synth",
        ("piano", "pad", "strings"),
        "synth",
    ),
]
# seeded palettes for a caption that names neither genre nor instrument
DEFAULT_GENRES = ("pop", "ballad", "folk", "synthwave", "soul")

# one of a family is enough: a named piano is not joined by the genre's electric piano
_FAMILY = {
    "piano": "keys",
    "epiano": "keys",
    "organ": "keys",
    "guitar": "guitar",
    "eguitar": "guitar",
}


@dataclass(frozen=True)
class Style:
    genre: str
    drums: str  # kit name or "none"
    bass: str  # bass voice or "none"
    chords: tuple[str, ...]  # chord instruments, in order of entry
    lead: str  # melody instrument
    textures: tuple[str, ...]
    sevenths: bool
    hits: bool
    alone: bool = False  # the named instruments play alone: no band, no swells or hits
    vocals: bool = True  # False: "no vocals" — a sung line is played by the lead instead

    @property
    def instruments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.lead, *self.chords)))


def genre_match(caption: str) -> tuple[Genre | None, bool]:
    """(the caption's genre, named by a genre word?): the first genre named by a genre
    word, else the first named by a mood word only (see the module doc)."""
    by_mood = None
    for genre in GENRES:
        words = [m.group(0) for m in re.finditer(genre.pattern, caption, re.IGNORECASE)]
        if any(not MOOD_WORDS.fullmatch(w.strip()) for w in words):
            return genre, True
        if words and by_mood is None:
            by_mood = genre
    return by_mood, False


def genre_of(caption: str) -> Genre | None:
    return genre_match(caption)[0]


def _genre(name: str) -> Genre:
    return next(g for g in GENRES if g.name == name)


def style_for(caption: str, seed: int = 0) -> Style:
    """The style a caption asks for (deterministic for a caption and a seed)."""
    caption = caption or ""
    rng = random.Random(f"style\0{seed}")
    reading = caption_words.read(caption)
    refused = reading.refused
    named = list(reading.instruments)
    if "eguitar" in named and "guitar" in named:
        named.remove("guitar")
    if (
        "epiano" in named
        and "piano" in named
        and not re.search(r"(?<!electric )piano", caption, re.IGNORECASE)
    ):
        named.remove("piano")
    genre, genre_named = genre_match(caption)
    if (
        genre is not None
        and genre.name == "rock"
        and "guitar" in named
        and not re.search(r"acoustic", caption, re.IGNORECASE)
    ):
        named[named.index("guitar")] = "eguitar"  # a rock guitar is electric
    # alone: said so ("solo piano", "just pads", "cello only"), or "solo" in a caption
    # that names no band ("piano solo, cinematic"; not "a rock song with a guitar solo")
    ensemble = reading.ensemble or genre_named
    alone = bool(named) and (reading.alone or (reading.solo_word and not ensemble))
    if alone and reading.strong_instruments:  # "dreamy solo piano": no pad behind it
        strong = set(reading.strong_instruments) | {"eguitar"}
        named = [n for n in named if n in strong]
    if genre is None:
        # "piano and strings": a gentle acoustic default
        genre = _genre("ballad") if named else _genre(rng.choice(DEFAULT_GENRES))
    drums, bass = genre.drums, genre.bass
    textures = list(genre.textures)
    for t in reading.textures:
        if t not in textures:
            textures.append(t)
    chords, lead = [c for c in genre.chords if c not in refused], genre.lead
    if named:
        chords = list(named)
        lead = next((n for n in named if n in LEADS), genre.lead)
        # a genre's colour stays behind a named instrument, entering later ("lo-fi piano":
        # the piano leads and comps, the lo-fi pad comes in for the choruses)
        if not alone:
            taken = {_FAMILY.get(n, n) for n in named}
            for extra in genre.chords:
                if extra in refused:
                    continue
                if _FAMILY.get(extra, extra) not in taken and len(chords) < 3:
                    chords.append(extra)
                    taken.add(_FAMILY.get(extra, extra))
    if alone:
        lead = lead if lead in named else named[0]
        drums, bass, textures = "none", "none", list(reading.textures)
    if reading.bass:
        bass = reading.bass
        if bass == "808" and drums in ("none", "electronic", "acoustic", "soft") and not alone:
            drums = "trap"
    elif reading.bass == "" and bass == "none":  # "with a bass": the genre had none
        bass = "electric"
    if reading.drums and drums == "none":
        drums = "electronic" if genre.name in ("ambient", "synthwave") else "acoustic"
    if "drums" in refused:
        drums = "none"
    if "bass" in refused:
        bass = "none"
    vocals = "vocals" not in refused
    if not vocals and "choir" not in named:
        refused = refused | {"choir"}  # "no vocals": no choir either, unless asked for
    chords = [c for c in chords if c not in refused]
    textures = [t for t in textures if t not in refused]
    if lead in refused:  # "hip hop beat, no piano": another instrument takes the tune
        lead = next(
            (c for c in chords if c in LEADS),
            chords[0] if chords else next((c for c in LEADS if c not in refused), lead),
        )
    if not chords:
        chords = [lead]
    return Style(
        genre=genre.name,
        drums=drums,
        bass=bass,
        chords=tuple(chords),
        lead=lead,
        textures=tuple(textures),
        sevenths=genre.sevenths,
        hits=genre.hits and not alone,
        alone=alone,
        vocals=vocals,
    )
