"""What a caption asks the Sketch to play: a genre's palette and the instruments it names.

:func:`style_for` reads a caption ("lo-fi piano with rain", "epic orchestral trailer",
"808 trap", "solo piano", "dreamy synthwave, no drums") into a :class:`Style`: the drum kit,
the bass, the instruments that play chords, the one that plays the melody, and textures.
Instruments the caption names replace the genre's own melodic instruments; the genre keeps
its drums, bass and textures unless the caption says otherwise ("solo", "no drums").
A caption naming no genre gets the pop palette, varied by the seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

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

# what a caption word names (the first match for each instrument counts)
INSTRUMENT_WORDS: list[tuple[str, str]] = [
    (r"electric piano|e-?piano|rhodes|wurli", "epiano"),
    (r"piano|\bkeys\b|keyboard", "piano"),
    (r"\borgans?\b", "organ"),
    (r"\bbells?\b|glocken|celesta|music[\s-]?box|chimes?|vibraphone|marimba|kalimba", "bells"),
    (r"electric guitar|distort|overdrive|power[\s-]?chord|shred", "eguitar"),
    (r"guitar|\bacoustic|\bstrum|banjo|ukulele|mandolin", "guitar"),
    (r"strings?\b|violin|viola|cello|quartet", "strings"),
    (r"\bpads?\b|drone|atmospher|ethereal|dreamy|lush", "pad"),
    (r"brass|horns?\b|trumpet|trombone|tuba|\bsax", "brass"),
    (r"choir|choral|chant|\bvoices\b", "choir"),
    (r"\bsynth(?!wave|etic)|\blead\b|chiptune|8-?bit", "synth"),
    (r"arpeggi|\barp\b", "arp"),
    (r"flute|woodwind|clarinet|oboe|whistle|pan[\s-]?pipe|recorder", "flute"),
]
TEXTURE_WORDS: list[tuple[str, str]] = [
    (r"\brain|storm|thunder|drizzle", "rain"),
    (r"vinyl|crackl|record player|\bdusty", "vinyl"),
    (r"\bwind\b|windy|breeze", "wind"),
    (r"ocean|\bwaves?\b|\bsea\b|shore|beach", "waves"),
]
BASS_WORDS: list[tuple[str, str]] = [
    (r"\b808s?\b", "808"),
    (r"upright|double bass|contrabass|walking bass", "upright"),
    (r"slap|bass guitar|electric bass", "electric"),
    (r"sub[\s-]?bass|\bsub\b", "sub"),
    (r"synth[\s-]?bass|acid", "synth"),
]


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

# words that leave the named instruments alone ("solo" only where no genre is named: "a
# rock song with a guitar solo" keeps its band)
_ALONE = re.compile(
    r"\balone\b|\bonly\b|\bjust\b|unaccompanied|a cappella|by itself", re.IGNORECASE
)
_SOLO = re.compile(r"\bsolo\b", re.IGNORECASE)


def _negated(caption: str, what: str) -> bool:
    return bool(
        re.search(
            rf"\b(?:no|without|minus|zero|drop the)\s+(?:\w+\s+)?{what}|"
            rf"{what}[\s-]?less\b",
            caption,
            re.IGNORECASE,
        )
    )


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

    @property
    def instruments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.lead, *self.chords)))


def _named(caption: str, table) -> list[str]:
    """The instruments a caption names, in the order it names them."""
    found = []
    for pattern, name in table:
        m = re.search(pattern, caption, re.IGNORECASE)
        if m and name not in [n for _, n in found]:
            found.append((m.start(), name))
    return [name for _, name in sorted(found)]


def genre_of(caption: str) -> Genre | None:
    for genre in GENRES:
        if re.search(genre.pattern, caption, re.IGNORECASE):
            return genre
    return None


def style_for(caption: str, seed: int = 0) -> Style:
    """The style a caption asks for (deterministic for a caption and a seed)."""
    caption = caption or ""
    rng = random.Random(f"style\0{seed}")
    named = _named(caption, INSTRUMENT_WORDS)
    if "eguitar" in named and "guitar" in named:
        named.remove("guitar")
    if (
        "epiano" in named
        and "piano" in named
        and not re.search(r"(?<!electric )piano", caption, re.IGNORECASE)
    ):
        named.remove("piano")
    genre = genre_of(caption)
    if (
        genre is not None
        and genre.name == "rock"
        and "guitar" in named
        and not re.search(r"acoustic", caption, re.IGNORECASE)
    ):
        named[named.index("guitar")] = "eguitar"  # a rock guitar is electric
    solo = bool(named) and bool(_ALONE.search(caption) or (_SOLO.search(caption) and genre is None))
    if genre is None:
        if named:  # "piano and strings": a gentle acoustic default
            genre = next(g for g in GENRES if g.name == "ballad")
        else:
            pick = rng.choice(DEFAULT_GENRES)
            genre = next(g for g in GENRES if g.name == pick)
    drums, bass = genre.drums, genre.bass
    textures = list(genre.textures)
    for t in _named(caption, TEXTURE_WORDS):
        if t not in textures:
            textures.append(t)
    chords, lead = list(genre.chords), genre.lead
    if named:
        chords = list(named)
        lead = next((n for n in named if n in LEADS), genre.lead)
        # a genre's colour stays behind a named instrument, entering later ("lo-fi piano":
        # the piano leads and comps, the lo-fi pad comes in for the choruses)
        if not solo:
            taken = {_FAMILY.get(n, n) for n in named}
            for extra in genre.chords:
                if _FAMILY.get(extra, extra) not in taken and len(chords) < 3:
                    chords.append(extra)
                    taken.add(_FAMILY.get(extra, extra))
    if solo:
        lead = lead if lead in named else named[0]
        drums, bass, textures = (
            "none",
            "none",
            [t for t in textures if t in _named(caption, TEXTURE_WORDS)],
        )
    for pattern, name in BASS_WORDS:
        if re.search(pattern, caption, re.IGNORECASE):
            bass = name
            if name == "808" and drums in ("none", "electronic", "acoustic", "soft"):
                drums = "trap"
            break
    if (
        re.search(r"\bdrums?\b|\bbeat\b|percussion|\bgroove", caption, re.IGNORECASE)
        and drums == "none"
        and not _negated(caption, r"(?:drums?|beat|percussion)")
    ):
        drums = "electronic" if genre.name in ("ambient", "synthwave") else "acoustic"
    if _negated(caption, r"(?:drums?|beat|percussion)") or re.search(
        r"drumless|beatless|a cappella", caption, re.IGNORECASE
    ):
        drums = "none"
    if _negated(caption, r"bass"):
        bass = "none"
    for name in list(chords):
        if _negated(caption, name):
            chords.remove(name)
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
        hits=genre.hits,
    )
