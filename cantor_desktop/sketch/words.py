"""The Sketch LM's words: a caption and lyrics from a short idea (``inspire``), and a tidy
caption and lyrics (``format``).

Inspire reads the idea's genre, instruments, mood and subject words: the caption names a
genre (the idea's, else one its mood suggests), the instruments that genre plays in the
Sketch (or the ones the idea names), two mood words and the voice; the lyrics are a verse,
a chorus, a second verse, the chorus, a bridge and the chorus again, written from line
patterns around the idea's subject words (deterministic for a seed). They are plain and
rhyme little — a first draft to edit, like any LM's.

Format keeps the user's words and fixes their shape: caption tags separated by ", ", each
once, trimmed; lyrics with every section tag in brackets and spelt one way ("verse 2:",
"(CHORUS)", "[pre chorus]" → "[Verse 2]", "[Chorus]", "[Pre-Chorus]"), lines trimmed and
capitalised, one blank line before each section and none elsewhere; untagged stanzas get
tags (a stanza sung twice is the chorus).
"""

from __future__ import annotations

import random
import re

from . import music
from .request import INSTRUMENTAL, is_instrumental
from .style import GENRES, INSTRUMENT_WORDS, genre_of, style_for

INSTRUMENT_NAMES = {
    "piano": "piano",
    "epiano": "electric piano",
    "organ": "organ",
    "bells": "bells",
    "guitar": "acoustic guitar",
    "eguitar": "electric guitar",
    "strings": "strings",
    "pad": "warm pads",
    "synth": "synth lead",
    "arp": "arpeggiated synth",
    "brass": "brass",
    "choir": "choir",
    "flute": "flute",
}
MOODS = [
    (
        r"\bsad|lonely|tears?|cry|lost|goodbye|heartbreak|grief|miss",
        "ballad",
        ("melancholic", "emotional"),
    ),
    (r"\bnight|city|neon|drive|midnight|retro", "synthwave", ("nostalgic", "dreamy")),
    (r"summer|sun|beach|party|dance|happy|joy", "pop", ("uplifting", "bright")),
    (r"rain|coffee|study|morning|sleepy|cozy", "lofi", ("mellow", "cozy")),
    (r"road|home|river|mountain|country|dust", "folk", ("warm", "heartfelt")),
    (r"fight|rise|hero|battle|storm|fire|power", "trailer", ("epic", "powerful")),
    (r"love|kiss|heart|together|forever", "soul", ("romantic", "smooth")),
]
STOP = set(
    """a an the and or but of in on at to for from with without about into over under
song songs music track tune beat about some this that these those my your our their its
his her is are was were be been being it i you we they me us them make write made like
really very just more most less few lot lots want need sad happy lonely dark bright slow
fast upbeat chill calm angry epic dreamy sweet soft loud heavy gentle mellow moody quiet
little big old new good bad beautiful""".split()
)
GENRE_CAPTION = {
    "trailer": "epic cinematic orchestral",
    "orchestral": "orchestral",
    "trap": "trap",
    "lofi": "lo-fi hip hop",
    "hiphop": "hip hop",
    "synthwave": "synthwave",
    "edm": "electronic dance",
    "ambient": "ambient",
    "rock": "indie rock",
    "jazz": "jazz",
    "soul": "neo soul",
    "folk": "folk",
    "ballad": "piano ballad",
    "waltz": "waltz",
    "reggae": "reggae",
    "pop": "pop",
}

VERSE = [
    "I keep the {a} close when the {b} is gone",
    "Walking through the {a} with nothing but a {b}",
    "Every little {a} remembers your name",
    "We were chasing {a} under a {b} sky",
    "Counting all the hours till the {a} comes home",
    "There's a {a} in the window and a {b} at the door",
    "I wrote your name in the {a} and the {b}",
    "Holding on to {a} like it's all I know",
    "The {a} is calling and I can't stay still",
    "Maybe the {a} will carry us through",
]
CHORUS = [
    "Oh {a}, take me home tonight",
    "We are the {a}, we are the {b}",
    "Hold on to the {a}, don't let it go",
    "Sing it loud until the {a} comes back",
    "All I need is the {a} and you",
    "Light up the {a}, light up the {b}",
]
BRIDGE = [
    "And if the {a} should fall apart",
    "I'll find the {b} in the dark",
    "Say the word and I'll be there",
    "Nothing left but {a} and air",
]
FALLBACK = [
    "light",
    "night",
    "road",
    "heart",
    "sky",
    "river",
    "home",
    "fire",
    "rain",
    "morning",
    "echo",
    "shadow",
    "dream",
    "ocean",
    "city",
    "summer",
]

TAG_NAMES = {
    "intro": "Intro",
    "verse": "Verse",
    "pre": "Pre-Chorus",
    "chorus": "Chorus",
    "bridge": "Bridge",
    "solo": "Solo",
    "breakdown": "Breakdown",
    "outro": "Outro",
}


def subject_words(idea: str) -> list[str]:
    """The idea's own words worth singing about (not genre, instrument or filler words)."""
    words = []
    for w in re.findall(r"[A-Za-z']{3,}", idea):
        low = w.lower().strip("'")
        if low in STOP or genre_of(low) is not None:
            continue
        if any(re.search(p, low) for p, _ in INSTRUMENT_WORDS):
            continue
        if low not in words:
            words.append(low)
    return words


def inspire(idea: str, rng: random.Random) -> tuple[str, str]:
    """(caption, lyrics) from a short idea."""
    genre = genre_of(idea)
    moods: tuple[str, ...] = ()
    for pattern, mood_genre, mood_words in MOODS:
        if re.search(pattern, idea, re.IGNORECASE):
            moods = mood_words
            if genre is None:
                genre = next(g for g in GENRES if g.name == mood_genre)
            break
    if genre is None:
        name = rng.choice(("pop", "folk", "soul"))  # chosen once, not once per genre
        genre = next(g for g in GENRES if g.name == name)
    if not moods:
        moods = rng.choice([("warm", "hopeful"), ("dreamy", "gentle"), ("driving", "bold")])
    style = style_for(f"{GENRE_CAPTION.get(genre.name, genre.name)}, {idea}", rng.randrange(9))
    named = [INSTRUMENT_NAMES[i] for i in style.instruments if i in INSTRUMENT_NAMES]
    rhythm = []
    if style.drums != "none":
        rhythm.append("drums")
    if style.bass != "none":
        rhythm.append({"808": "808 bass", "upright": "upright bass"}.get(style.bass, "bass"))
    voice = rng.choice(["female vocals", "male vocals"])
    caption = ", ".join(
        [GENRE_CAPTION.get(genre.name, genre.name), *named[:3], *rhythm, *moods, voice]
    )
    return caption, write_lyrics(subject_words(idea), rng)


def write_lyrics(subjects: list[str], rng: random.Random) -> str:
    pool = subjects or []
    pool = pool + [w for w in FALLBACK if w not in pool]
    main = subjects[:2] if subjects else rng.sample(FALLBACK, 2)

    def line(pattern: str, prefer: list[str]) -> str:
        a = rng.choice(prefer)
        b = rng.choice([w for w in pool if w != a] or pool)
        text = pattern.format(a=a, b=b)
        return text[0].upper() + text[1:]

    def verse() -> list[str]:
        return [line(p, pool[:6]) for p in rng.sample(VERSE, 4)]

    chorus = [line(p, main) for p in rng.sample(CHORUS, 4)]
    bridge = [line(p, pool[:6]) for p in rng.sample(BRIDGE, 2)]
    blocks = [
        ("[Verse 1]", verse()),
        ("[Chorus]", chorus),
        ("[Verse 2]", verse()),
        ("[Chorus]", chorus),
        ("[Bridge]", bridge),
        ("[Chorus]", chorus),
    ]
    return "\n\n".join("\n".join([tag, *lines]) for tag, lines in blocks)


# ---------------------------------------------------------------- format


def tidy_caption(caption: str) -> str:
    """Tags separated by ", ", trimmed, each once (the first spelling kept)."""
    seen, out = set(), []
    for tag in re.split(r"[,;\n]+", caption or ""):
        tag = re.sub(r"\s+", " ", tag).strip(" .")
        if tag and tag.lower() not in seen:
            seen.add(tag.lower())
            out.append(tag)
    return ", ".join(out)


_TAG_LINE = re.compile(r"^\s*[\[(]?\s*([A-Za-z][A-Za-z\- ]*?)\s*(\d*)\s*[\])]?\s*:?\s*$")


# tidying also knows "Pre 1", "Instrumental" and "Middle 8" on a line alone
_BARE_NAMES = music.BARE_SECTION_NAMES | {"pre", "instrumental", "middle-8"}


def _tag(raw: str) -> str | None:
    """ "[Verse 2]" for a line that is only a section tag ("verse 2:", "(CHORUS)"), else
    None."""
    m = _TAG_LINE.match(raw)
    if not m:
        return None
    text = m.group(1).strip().lower()
    bare = re.sub(r"[\s\-]+", "-", text)
    marked = raw.strip()[:1] in "[(" or raw.rstrip().endswith(":")
    if not marked and bare not in _BARE_NAMES:
        return None
    kind = music.section_kind(text)
    if kind is None:
        return None
    number = f" {m.group(2)}" if m.group(2) else ""
    return f"[{TAG_NAMES[kind]}{number}]"


def tidy_lyrics(lyrics: str) -> str:
    if is_instrumental(lyrics):
        return INSTRUMENTAL if lyrics.strip() else ""
    lines: list[tuple[bool, str]] = []  # (is a tag, text)
    for raw in lyrics.splitlines():
        tag = _tag(raw)
        if tag is not None:
            lines.append((True, tag))
            continue
        text = re.sub(r"\s+", " ", raw).strip()
        lines.append((False, text[:1].upper() + text[1:]))
    if not any(is_tag for is_tag, _ in lines):  # tag the stanzas
        blocks, current = [], []
        for _, text in lines + [(False, "")]:
            if text:
                current.append(text)
            elif current:
                blocks.append(current)
                current = []
        keys = [" ".join(b).lower() for b in blocks]
        verses = 0
        lines = []
        for b, key in zip(blocks, keys):
            if keys.count(key) > 1:
                lines.append((True, "[Chorus]"))
            else:
                verses += 1
                lines.append((True, f"[Verse {verses}]"))
            lines += [(False, text) for text in b]
    out: list[str] = []
    for is_tag, text in lines:
        if not text:
            continue  # blank lines only between sections
        if is_tag and out:
            out.append("")
        out.append(text)
    return "\n".join(out)
