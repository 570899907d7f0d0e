"""Music theory for the sketch engine: keys, scales, chord progressions, lyric syllables."""

from __future__ import annotations

import re

from ..song import musical_keys

MAJOR = (0, 2, 4, 5, 7, 9, 11)
MINOR = (0, 2, 3, 5, 7, 8, 10)
# progressions as scale degrees (0-based), one chord per bar
PROGRESSIONS = {
    "major": [(0, 4, 5, 3), (0, 5, 3, 4), (5, 3, 0, 4), (0, 3, 4, 3), (0, 3, 5, 4)],
    "minor": [(0, 5, 2, 6), (0, 3, 5, 4), (0, 6, 5, 6), (0, 3, 0, 4), (0, 5, 3, 4)],
}

# a key named in free text: a capital note (or one after "key"), an accidental, a mode
_KEY_IN_TEXT = re.compile(
    r"(?<![\w#♯♭])([A-G])\s*(#|♯|b|♭|\s+sharp|\s+flat|-sharp|-flat)?\s*"
    r"(major|minor|maj\b|min\b|m\b)",
    re.IGNORECASE,
)


def key_name(tonic: int, minor: bool) -> str:
    """The key as musicians spell it ("Eb minor", "F# major"): one spelling each."""
    return musical_keys.Key(tonic % 12, minor).name


def parse_key(text: str) -> tuple[int, bool] | None:
    """A key in any spelling ("F# minor", "Bb major", "E♭m", "Am", "C") -> (tonic pitch
    class, is_minor)."""
    key = musical_keys.parse(text)
    return (key.tonic, key.minor) if key else None


def find_key(caption: str) -> tuple[int, bool] | None:
    """A key named in free text ("a ballad in A minor", "in E♭m"), or None."""
    for m in _KEY_IN_TEXT.finditer(caption or ""):
        letter, acc, mode = m.group(1), m.group(2), m.group(3).lower()
        if mode == "m" and letter.islower():
            continue
        if letter.islower() and mode in ("maj", "min"):
            continue
        # "a minor" is a key only with a capital letter or an explicit "key"
        if letter.islower() and "key" not in caption[max(0, m.start() - 12) : m.start()].lower():
            continue
        key = musical_keys.parse(f"{letter}{(acc or '').strip()} {mode}")
        if key is not None:
            return key.tonic, key.minor
    return None


def scale(minor: bool) -> tuple[int, ...]:
    return MINOR if minor else MAJOR


def chord_pitches(tonic: int, minor: bool, degree: int, base_octave_midi: int) -> list[int]:
    """The triad on a scale degree as MIDI notes starting near ``base_octave_midi``."""
    sc = scale(minor)
    notes = []
    for step in (0, 2, 4):
        d = degree + step
        notes.append(base_octave_midi + tonic + sc[d % 7] + 12 * (d // 7))
    return notes


# ---------------------------------------------------------------- lyrics

_TAG = re.compile(r"\[[^\]]*\]|\([^)]*\)")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_VOWELS = re.compile(r"[aeiouyàáâãäåæèéêëìíîïòóôõöøùúûüýÿœаеёиоуыэюяіїєαεηιουω]+", re.IGNORECASE)


def word_syllables(word: str) -> int:
    cjk = len(_CJK.findall(word))
    if cjk:
        return cjk
    w = word.lower()
    n = len(_VOWELS.findall(w))
    if n > 1 and w.endswith("e") and not w.endswith(("le", "ee", "ie", "ye")):
        n -= 1  # a silent final e: "love", "time"
    return max(1, n)


_VOWEL_CLASSES = {
    "a": "aàáâãäåæаяα",
    "e": "eèéêëеёэєεη",
    "i": "iìíîïyýÿиыіїι",
    "o": "oòóôõöøœоοω",
    "u": "uùúûüуюυ",
}
_VOWEL_OF = {ch: cls for cls, chars in _VOWEL_CLASSES.items() for ch in chars}


def syllable_vowels(word: str) -> list[str]:
    """The vowel sound ("a", "e", "i", "o", "u") of each syllable of a word, from its
    spelling; one entry per syllable of :func:`word_syllables`."""
    n = word_syllables(word)
    if _CJK.search(word):
        return ["a"] * n
    out = []
    for group in _VOWELS.findall(word.lower())[:n]:
        core = group.lstrip("y") or group  # "you": the y is a consonant
        out.append(_VOWEL_OF.get(core[0], "a"))
    return out + ["a"] * (n - len(out))


def line_vowels(text: str) -> list[str]:
    """One vowel per sung syllable of a lyric line (structure tags skipped)."""
    out = []
    for token in _WORD.findall(_TAG.sub(" ", text)):
        if _CJK.search(token):
            out.extend(["a"] * len(_CJK.findall(token)))
        else:
            out.extend(syllable_vowels(token))
    return out


# a structure tag's words -> its kind; the first pattern that matches wins ("pre-chorus"
# before "chorus", "post-chorus" is more chorus)
SECTION_KINDS: list[tuple[str, str]] = [
    (r"\bpre[\s_-]*chorus|\bprechorus|\bpre\b|\bbuild[\s-]*up|\bbuild\b|\blift\b|\bclimb", "pre"),
    (r"\bintro|\bopening|\bprelude", "intro"),
    (r"\boutro|\bending\b|\bend\b|\bcoda\b|\bfade[\s-]*out|\bfinale?\b|\bclosing", "outro"),
    (r"\bbridge|\bmiddle[\s-]*(?:8|eight)", "bridge"),
    (r"\bchorus|\bhook|\brefrain|\bdrop\b|\bpost[\s-]*chorus", "chorus"),
    (r"\bverse|\bstrophe|\bcouplet|\brap\b", "verse"),
    (r"\bbreak[\s-]*down|\bbreak\b|\bstop", "breakdown"),
    (r"\bsolo|\binstrumental|\binterlude|\briff|\bjam", "solo"),
]
SECTION_NAMES = ("intro", "verse", "pre", "chorus", "bridge", "solo", "breakdown", "outro")


def section_kind(tag: str) -> str | None:
    """The kind of a structure tag's text ("Verse 2", "Pre-Chorus", "hook", "Middle 8")
    as one of :data:`SECTION_NAMES`, or None when it names no section."""
    low = (tag or "").strip().lower()
    for pattern, kind in SECTION_KINDS:
        if re.search(pattern, low):
            return kind
    return None


_SECTION = re.compile(r"^\s*\[([^\]]*)\]")
# a line that is only a tag: "(Chorus)", "Verse 1:", "CHORUS"
_BARE_TAG = re.compile(r"^\s*(?:\(([^)]*)\)|([A-Za-z][A-Za-z0-9 \-]{0,20}):?)\s*$")


def _line_tag(raw: str) -> str | None:
    """The section a lyric line opens: a [tag] at its start, or a line holding nothing but a
    section name ("(Chorus)", "Verse 1:", "CHORUS")."""
    m = _SECTION.match(raw)
    if m:
        return section_kind(m.group(1)) or "verse"
    m = _BARE_TAG.match(raw)
    if not m:
        return None
    text = m.group(1) if m.group(1) is not None else m.group(2)
    marked = m.group(1) is not None or raw.rstrip().endswith(":")
    bare = re.sub(r"[\s\d]+$", "", text.strip().lower()) in BARE_SECTION_NAMES
    return section_kind(text) if marked or bare else None


BARE_SECTION_NAMES = {
    "intro",
    "verse",
    "pre-chorus",
    "prechorus",
    "chorus",
    "hook",
    "refrain",
    "bridge",
    "interlude",
    "solo",
    "breakdown",
    "outro",
}
"""Section names that make a tag of a line holding nothing else, without brackets or a
colon ("CHORUS", "Verse 2")."""


def lyric_blocks(lyrics: str) -> list[tuple[str, list[tuple[str, list[int]]]]]:
    """The lyrics as sections: (kind, [(line text, syllables per word), …]) in order. A tag
    opens a section (a tag with no sung line under it is an instrumental section of that
    kind); untagged lyrics are split into stanzas at blank lines, a stanza sung again being
    the chorus and the others verses. Kinds are :data:`SECTION_NAMES`."""
    blocks: list[tuple[str, list]] = []
    tagged = False
    current: tuple[str, list] | None = None
    stanza_break = False
    for raw in (lyrics or "").splitlines():
        kind = _line_tag(raw)
        if kind is not None:
            tagged = True
            current = (kind, [])
            blocks.append(current)
            rest = _TAG.sub(" ", _SECTION.sub("", raw, count=1)) if _SECTION.match(raw) else ""
            raw = rest
            if not raw.strip():
                continue
        text = _TAG.sub(" ", raw).strip()
        words = []
        for token in _WORD.findall(text):
            if _CJK.search(token):
                words.extend([1] * len(_CJK.findall(token)))
            else:
                words.append(word_syllables(token))
        if not words:
            if not raw.strip():
                stanza_break = True
            continue
        if current is None or (stanza_break and not tagged):
            current = ("verse", [])
            blocks.append(current)
        stanza_break = False
        current[1].append((text, words))
    if not tagged:
        texts = [" ".join(t.lower() for t, _ in lines) for _, lines in blocks]
        blocks = [
            ("chorus" if texts.count(texts[i]) > 1 else "verse", lines)
            for i, (_, lines) in enumerate(blocks)
        ]
    return blocks


def lyric_phrases(lyrics: str) -> list[tuple[str, str, list[int]]]:
    """Sung lines as (section kind, text, syllables per word); tags are not sung."""
    return [(kind, text, words) for kind, lines in lyric_blocks(lyrics) for text, words in lines]


def lyric_lines(lyrics: str) -> list[list[int]]:
    """Sung lines, each a list of syllable counts per word; structure tags are skipped."""
    return [words for _, _, words in lyric_phrases(lyrics)]


def count_syllables(lyrics: str) -> int:
    return sum(sum(line) for line in lyric_lines(lyrics))
