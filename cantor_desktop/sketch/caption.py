"""What a caption says about the band, wherever it says it: the instruments asked for, the
ones refused, and whether the named ones play alone.

A caption is a tag list or a sentence of any length ("a slow, melancholic solo piano piece
with soft rain in the background, intimate, cinematic, building gently to a tender
ending"). :func:`read` finds every instrument, texture, bass, drum and voice word with its
place, then reads the words around each one:

- **refused**: after "no", "without", "minus", "not", "zero", "sans", "except", "drop",
  "skip" in the same clause ("no drums or bass", "without heavy drums and bass"), and a
  list that goes on after a comma when it ends with "or"/"nor" ("without drums, bass or
  vocals"); "drumless", "beatless", "bassless", "vocal-less". A clause ends at a comma,
  "but", "just", "only", "with", "plus", and "and a/an/the/some …" turns back to asking
  ("no drums and a soft bass").
- **alone**: "solo piano", "solo acoustic guitar" (solo right before the instrument);
  "just warm pads and a cello", "only bells", "nothing but strings", "piano only", "cello
  alone", "unaccompanied"; and — when the caption names no band (band words, drums or a
  bass it asks for: :attr:`Reading.ensemble`; or a genre word, which style.py knows) —
  "piano solo" or a "solo" anywhere. "A rock song with a guitar solo" keeps its band:
  there "solo" is a passage, not the line-up. "A cappella" refuses drums and bass.
- **weak** words name a sound by its mood ("dreamy", "lush", "ethereal", "atmospheric"
  → a pad): they count unless the caption names instruments to play alone.

``style.style_for`` turns a :class:`Reading` and the caption's genre into the band.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# instrument -> what a caption word names (the first match for each instrument counts)
INSTRUMENT_WORDS: list[tuple[str, str]] = [
    (r"electric piano|e-?piano|rhodes|wurli", "epiano"),
    (r"piano|\bkeys\b|keyboards?", "piano"),
    (r"\borgans?\b", "organ"),
    (r"\bbells?\b|glocken|celesta|music[\s-]?box|chimes?|vibraphone|marimba|kalimba", "bells"),
    (r"electric guitars?|distort\w*|overdrive|power[\s-]?chords?|shred\w*", "eguitar"),
    (
        (
            r"guitars?|\bacoustic\b(?!\s+(?:[\w-]+\s+)?(?:piano|bass|drums?|kit|set|version"
            r"|ballad))|\bstrum\w*|banjo|ukulele|mandolin"
        ),
        "guitar",
    ),
    (r"strings?\b|violins?|violas?|cellos?|\bquartet", "strings"),
    (r"\bpads?\b|\bdrones?\b|atmospher\w*|ethereal|dreamy|lush", "pad"),
    (r"brass|horns?\b|trumpets?|trombones?|tuba|\bsax\w*", "brass"),
    (r"choirs?|choral|chants?|\bvoices\b", "choir"),
    (r"\bsynth(?!wave|etic|[\s-]?bass)\w*|chiptune|8-?bit", "synth"),
    (r"arpeggi\w*|\barps?\b", "arp"),
    (r"flutes?|woodwinds?|clarinets?|oboes?|whistl\w*|pan[\s-]?pipes?|recorders?", "flute"),
]
TEXTURE_WORDS: list[tuple[str, str]] = [
    (r"\brain\w*|storm\w*|thunder|drizzl\w*", "rain"),
    (r"vinyl|crackl\w*|record player|\bdusty", "vinyl"),
    (r"\bwind\b|windy|breeze", "wind"),
    (r"ocean|\bwaves?\b|\bsea\b|shore|beach", "waves"),
]
BASS_WORDS: list[tuple[str, str]] = [
    (r"\b808s?\b", "808"),
    (r"upright bass|double bass|contrabass|walking bass", "upright"),
    (r"slap bass|bass guitar|electric bass", "electric"),
    (r"sub[\s-]?bass|\bsub\b", "sub"),
    (r"synth[\s-]?bass|acid bass|\bacid\b", "synth"),
    (r"\bbass(?:lines?)?\b", ""),  # a bass, of the genre's kind
]
DRUM_WORDS = r"\bdrums?\b|\bbeats?\b|percussion|\bgroove\b"  # a kit: "no hi-hats" keeps it
VOCAL_WORDS = r"\bvocals?\b|\bvoice\b|\bsinging\b|\bsingers?\b|\bsung\b|\blyrics\b"

WEAK = re.compile(r"atmospher\w*|ethereal|dreamy|lush|drones?", re.IGNORECASE)
# a refused word that names a family refuses every member ("no guitars": none of either)
FAMILIES: list[tuple[re.Pattern, tuple[str, ...]]] = [
    (re.compile(r"pianos?", re.IGNORECASE), ("piano", "epiano")),
    (re.compile(r"keys|keyboards?", re.IGNORECASE), ("piano", "epiano", "organ")),
    (re.compile(r"guitars?", re.IGNORECASE), ("guitar", "eguitar")),
    (re.compile(r"synth\w*", re.IGNORECASE), ("synth", "arp")),
]

NEGATOR = re.compile(
    r"\b(?:no|not|without|minus|zero|sans|except|drop(?:\s+the)?|skip(?:\s+the)?|"
    r"lose\s+the|leave\s+out(?:\s+the)?)\b",
    re.IGNORECASE,
)
# "drumless", "bass-less", "vocal-less", "beatless"; a cappella: voices, no band
LESS = re.compile(r"\b(drum|beat|bass|vocal|percussion)s?[\s-]?less\b", re.IGNORECASE)
A_CAPPELLA = re.compile(r"\ba[\s-]?cappella\b", re.IGNORECASE)
BOUNDARY = re.compile(
    r"[,;.!?:()\n]|\s[-–—]\s|\b(?:but|just|only|with|plus|while|then|over)\b", re.IGNORECASE
)
BACK_TO_ASKING = re.compile(r"\band\s+(?:a|an|the|some|lots\s+of|plenty\s+of)\b", re.IGNORECASE)
LIST_GLUE = re.compile(r"^[\s,&/]*(?:(?:or|nor|and)\b[\s,&/]*)*$", re.IGNORECASE)
LIST_GOES_ON = re.compile(r"^\s*(?:,\s*[\w\s-]*\b(?:or|nor)\b|(?:or|nor|and)\b)", re.IGNORECASE)
# "solo piano", "just warm pads", "nothing but strings": up to two describing words between
ALONE_BEFORE = re.compile(
    r"\b(?:solo|just|only|nothing\s+but|unaccompanied|lone)(?:\s+[\w'-]+){0,2}\s+$",
    re.IGNORECASE,
)
ALONE_AFTER = re.compile(r"^\s*(?:only|alone|by\s+(?:it|them)sel(?:f|ves))\b", re.IGNORECASE)
SOLO = re.compile(r"\bsolo\b", re.IGNORECASE)
BAND = re.compile(
    r"\b(?:band|trio|quartet|quintet|sextet|ensemble|orchestra\w*|combo|rhythm\s+section|"
    r"group)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    kind: str  # "instrument" | "texture" | "bass" | "drums" | "vocals"
    name: str  # the instrument, texture or bass voice ("" for a bass of the genre's kind)
    text: str
    refused: bool = False
    weak: bool = False


@dataclass(frozen=True)
class Reading:
    mentions: tuple[Mention, ...]
    alone: bool  # the named instruments play alone, whatever the genre (solo piano …)
    solo_word: bool  # "solo" said otherwise ("piano solo", "a solo piece"): alone unless
    # the caption names a band
    band: bool  # band words ("trio", "band", "orchestra")

    def asked(self, kind: str) -> list[Mention]:
        return [m for m in self.mentions if m.kind == kind and not m.refused]

    @property
    def instruments(self) -> tuple[str, ...]:
        """The instruments asked for, in the caption's order (each once)."""
        return tuple(dict.fromkeys(m.name for m in self.asked("instrument")))

    @property
    def strong_instruments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.name for m in self.asked("instrument") if not m.weak))

    @property
    def textures(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.name for m in self.asked("texture")))

    @property
    def bass(self) -> str | None:
        """The bass voice asked for ("808", "upright" …; "" for the genre's own), or None."""
        found = self.asked("bass")
        named = [m.name for m in found if m.name]
        return named[0] if named else ("" if found else None)

    @property
    def drums(self) -> bool:
        return bool(self.asked("drums"))

    @property
    def refused(self) -> frozenset[str]:
        """What the caption refuses: instruments (every member of a family it names),
        textures, "bass", "drums", "vocals"."""
        out: set[str] = set()
        for m in self.mentions:
            if not m.refused:
                continue
            if m.kind == "instrument":
                family = next((f for word, f in FAMILIES if word.fullmatch(m.text)), None)
                out.update(family or (m.name,))
            elif m.kind == "texture":
                out.add(m.name)
            else:
                out.add(m.kind)
        return frozenset(out)

    @property
    def ensemble(self) -> bool:
        """The caption names a band around its instruments: band words, or drums or a bass
        it asks for."""
        return self.band or self.drums or self.bass is not None


def _mentions(caption: str) -> list[Mention]:
    found: list[Mention] = []
    tables = [
        ("instrument", INSTRUMENT_WORDS),
        ("texture", TEXTURE_WORDS),
        ("bass", BASS_WORDS),
        ("drums", [(DRUM_WORDS, "drums")]),
        ("vocals", [(VOCAL_WORDS, "vocals")]),
    ]
    for kind, table in tables:
        for pattern, name in table:
            for m in re.finditer(pattern, caption, re.IGNORECASE):
                weak = kind == "instrument" and bool(WEAK.fullmatch(m.group(0)))
                found.append(Mention(m.start(), m.end(), kind, name, m.group(0), weak=weak))
    less_kind = {"drum": "drums", "beat": "drums", "percussion": "drums", "vocal": "vocals"}
    for less in LESS.finditer(caption):
        what = less_kind.get(less.group(1).lower(), "bass")
        found.append(Mention(less.start(), less.end(), what, "", less.group(0), refused=True))
    for cappella in A_CAPPELLA.finditer(caption):
        at, to, text = cappella.start(), cappella.end(), cappella.group(0)
        found.append(Mention(at, to, "drums", "drums", text, refused=True))
        found.append(Mention(at, to, "bass", "", text, refused=True))
    # where two overlap ("electric piano" and "piano", "synth bass" and "synth", "bass
    # guitar" and "guitar"), the longer one is what the caption says
    found.sort(key=lambda m: (m.start, -(m.end - m.start)))
    kept: list[Mention] = []
    for mention in found:
        last = kept[-1] if kept else None
        if (
            last
            and mention.start < last.end
            and (mention.start, mention.end) != (last.start, last.end)
        ):
            continue
        kept.append(mention)
    return kept


def _refusals(caption: str, mentions: list[Mention]) -> list[Mention]:
    """The mentions with ``refused`` set (see the module doc)."""
    out: list[Mention] = []
    goes_on = False  # the last one was refused in a list that may go on
    for m in mentions:
        refused = m.refused
        if not refused:
            # the clause this word is in: back to the last boundary before it
            cut = max((b.end() for b in BOUNDARY.finditer(caption, 0, m.start)), default=0)
            clause = caption[cut : m.start]
            negators = list(NEGATOR.finditer(clause))
            last = negators[-1] if negators else None
            if last is not None and not BACK_TO_ASKING.search(clause[last.end() :]):
                refused = True
            elif goes_on and out and LIST_GLUE.match(caption[out[-1].end : m.start]):
                refused = True  # "without drums, bass or vocals"
        out.append(Mention(m.start, m.end, m.kind, m.name, m.text, refused, m.weak))
        goes_on = refused and bool(LIST_GOES_ON.match(caption[m.end : m.end + 60]))
    return out


def _alone(caption: str, mentions: list[Mention]) -> bool:
    """Is an instrument said to play alone ("solo piano", "just pads", "cello only")?"""
    asked = [m for m in mentions if m.kind == "instrument" and not m.refused]
    for m in asked:
        if ALONE_BEFORE.search(caption[max(0, m.start - 60) : m.start]):
            return True
        if ALONE_AFTER.match(caption[m.end : m.end + 24]):
            return True
    return bool(asked) and bool(re.search(r"\bunaccompanied\b", caption, re.IGNORECASE))


def read(caption: str) -> Reading:
    """What ``caption`` asks of the band (see the module doc)."""
    caption = caption or ""
    mentions = _refusals(caption, _mentions(caption))
    asked = [m for m in mentions if m.kind == "instrument" and not m.refused]
    return Reading(
        tuple(mentions),
        _alone(caption, mentions),
        bool(asked) and bool(SOLO.search(caption)),
        bool(BAND.search(caption)),
    )
