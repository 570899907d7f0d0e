"""The arrangement: which instrument plays what, section by section, as note events.

:func:`plan` turns a song (tempo, metre, key, length, caption, lyrics, seed) into a
:class:`Plan`: its sections (:mod:`form`), a chord per bar, and every note of every part as
an :class:`Event` — the audio is rendered from these alone (render.py). Sections differ in
what plays (instruments enter with the section's energy), how (drum groove, bass and comping
patterns), where (chord and melody register) and on which chords (verse, chorus, bridge and
pre-chorus each have their own progression). Every choice comes from a generator seeded by
the song's seed and what is being chosen, so the plan is the same on every run, and each
part's events are the same whichever parts are rendered.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field

from . import form, music
from .instruments import SR
from .style import PART_OF, Style, style_for

# chord progressions as scale degrees (0-based), one chord per bar
BRIDGE = {
    "major": [(5, 3, 0, 4), (3, 4, 5, 4), (1, 4, 0, 5)],
    "minor": [(5, 6, 0, 4), (3, 6, 2, 4), (5, 3, 6, 4)],
}
PRE = {
    "major": [(3, 4, 3, 4), (3, 5, 3, 4), (1, 3, 1, 4)],
    "minor": [(3, 5, 6, 4), (3, 6, 3, 4), (3, 4, 5, 6)],
}
# where each instrument's melody sits: the MIDI note its tonic is placed at or above
LEAD_LOW = {
    "piano": 62,
    "epiano": 62,
    "synth": 64,
    "strings": 62,
    "brass": 58,
    "flute": 70,
    "bells": 72,
    "guitar": 57,
    "eguitar": 59,
    "organ": 60,
    "pad": 60,
    "arp": 64,
    "choir": 60,
}
# melody register per section, in scale degrees above the verse
Hits = list[tuple[float, float]]  # a drum's (slot, velocity) in a bar

LIFT = {
    "intro": 0,
    "verse": 0,
    "pre": 2,
    "chorus": 4,
    "bridge": 1,
    "solo": 7,
    "breakdown": 0,
    "outro": 0,
}
# melody note lengths (in half beats) and their weights per section
RHYTHM = {
    "verse": ([1, 2, 3, 4], [3, 5, 2, 2]),
    "pre": ([1, 2, 4], [2, 5, 2]),
    "chorus": ([1, 2, 3, 4, 6], [1, 4, 2, 3, 1]),
    "bridge": ([2, 4, 6], [3, 3, 2]),
    "solo": ([1, 2, 3], [6, 4, 1]),
    "intro": ([2, 4], [1, 1]),
    "outro": ([2, 4, 6], [2, 2, 1]),
    "breakdown": ([2, 4], [1, 1]),
}
# voices each instrument name plays with
BASS_VOICE = {
    "synth": "bass",
    "electric": "ebass",
    "upright": "ebass",
    "808": "808",
    "sub": "sub",
    "lowstrings": "lowstrings",
}


@dataclass(order=True)
class Event:
    start: int  # sample index
    part: str = field(compare=False)  # the stem it renders into (style.PART_OF …)
    key: tuple = field(compare=False)  # what to synthesise (instruments.Voices)
    gain: float = field(compare=False, default=1.0)

    @property
    def voice(self) -> str:
        return self.key[0] if self.key[0] != "drum" else self.key[2]


@dataclass
class Plan:
    events: list[Event]
    total: int  # samples
    sections: list[form.Section]
    degrees: list[int]  # the chord's scale degree, per bar
    chords: list[tuple[int, ...]]  # the chord's MIDI notes (C3…C5), per bar
    style: Style
    lines: list[form.Line]  # sung lines (empty for an instrumental)

    @property
    def parts(self) -> list[str]:
        return sorted({e.part for e in self.events})


def _rng(song, what: str) -> random.Random:
    return random.Random(zlib.crc32(f"{song.arrangement_seed}\0{what}".encode()))


class Arranger:
    def __init__(self, song):
        self.song = song
        self.style = style_for(song.caption, song.arrangement_seed)
        self.half = song.beat_seconds / 2
        self.slots = song.beats_per_bar * 2
        self.bar_s = song.bar_seconds
        self.bars = max(1, math.ceil(song.duration / self.bar_s - 1e-9))
        self.total = int(round(song.duration * SR))
        self.sc = music.scale(song.minor)
        self.mode = "minor" if song.minor else "major"
        self.events: list[Event] = []
        self.kicks: set[int] = set()  # where a kick (or a taiko) lands
        self.melody_seed = (
            song.melody_seed if song.melody_seed is not None else song.arrangement_seed
        )

    # ------------------------------------------------------------ helpers

    def at(self, bar: int, slot: float = 0.0) -> int:
        return round((bar * self.bar_s + slot * self.half) * SR)

    def length(self, slots: float, legato: float = 0.95) -> int:
        return max(64, int(slots * self.half * legato * SR))

    def add(self, start: int, part: str, key: tuple, gain: float = 1.0) -> None:
        """An event; its gain scaled by how full its section is played (a chorus is
        louder than a verse)."""
        if 0 <= start < self.total:
            bar = min(self.bars - 1, max(0, int(start / (self.bar_s * SR) + 1e-9)))
            self.events.append(Event(start, part, key, gain * self.loudness[bar]))

    def pcs(self, degree: int) -> list[int]:
        """The pitch classes of the chord on a scale degree, root first."""
        steps = (0, 2, 4, 6) if self.style.sevenths else (0, 2, 4)
        return [(self.song.tonic + self.sc[(degree + s) % 7]) % 12 for s in steps]

    @staticmethod
    def voicing(pcs: list[int], low: int) -> tuple[int, ...]:
        """Each pitch class once, in the octave from ``low`` up (a close voicing)."""
        return tuple(sorted(low + (pc - low) % 12 for pc in pcs))

    @staticmethod
    def place(pc: int, low: int) -> int:
        return low + (pc - low) % 12

    # ------------------------------------------------------------ the plan

    def run(self) -> Plan:
        song = self.song
        lines: list[form.Line] = []
        if song.lyrics:
            sections, lines = form.from_lyrics(
                song.lyrics, self.bars, self.bar_s, self.slots, song.duration
            )
        elif song.sections is not None:
            sections = form.fitted(song.sections, self.bars)
        else:
            sections = form.generated(self.bars, song.arrangement_seed)
        self.sections = sections
        self.loudness = [1.0] * self.bars
        for s in sections:
            for b in range(s.start, min(s.end, self.bars)):
                self.loudness[b] = 0.4 + 0.6 * s.energy
        self.degrees = self._progressions(sections)
        self.sung = {
            s.start
            for s in sections
            if any(s.start * self.bar_s - 1e-6 <= ln.start < s.end * self.bar_s for ln in lines)
        }
        for i, s in enumerate(sections):
            nxt = sections[i + 1] if i + 1 < len(sections) else None
            self._drums(s, nxt)
            self._bass(s)
            for k, inst in enumerate(self.style.chords):
                self._comp(s, inst, k)
            self._lead(s)
            self._effects(s, nxt)
        self._textures()
        self._vocals(lines)
        events = sorted(self.events)
        chords = [tuple(music.chord_pitches(song.tonic, song.minor, d, 48)) for d in self.degrees]
        return Plan(events, self.total, sections, self.degrees, chords, self.style, lines)

    def _progressions(self, sections: list[form.Section]) -> list[int]:
        rng = _rng(self.song, "chords")
        # verses and choruses start home, so every phrase says which key it is in (vi-IV-I-V
        # alone is the relative minor's i-VI-III-VII, note for note); the bridge may not
        home = [p for p in music.PROGRESSIONS[self.mode] if p[0] == 0]
        verse = rng.choice(home)
        chorus = rng.choice([p for p in home if p != verse])
        by_kind = {
            "verse": verse,
            "chorus": chorus,
            "intro": chorus,
            "outro": chorus,
            "solo": verse,
            "breakdown": chorus,
            "bridge": rng.choice(BRIDGE[self.mode]),
            "pre": rng.choice(PRE[self.mode]),
        }
        degrees = []
        for s in sections:
            prog = by_kind[s.kind]
            if s.kind == "pre":  # count back from the end: it lands on its last chord
                degrees += [prog[(j - s.bars) % len(prog)] for j in range(s.bars)]
            else:
                degrees += [prog[j % len(prog)] for j in range(s.bars)]
        degrees = (degrees + [0] * self.bars)[: self.bars]
        if self.bars > 2:
            degrees[-1] = 0  # the song ends home
        for bar, degree in enumerate((self.song.degrees or ())[: self.bars]):
            if degree is not None:  # chords given (an edit keeps its source's)
                degrees[bar] = int(degree)
        return degrees

    # ------------------------------------------------------------ drums

    def _drum_level(self, s: form.Section) -> str:
        if self.style.drums == "none" or s.kind in ("breakdown",):
            return "none"
        if s.kind == "bridge":
            return "half"
        if s.kind in ("intro", "outro"):
            return "light"
        e = s.energy
        return "light" if e < 0.5 else ("groove" if e < 0.85 else "full")

    def _groove(self, level: str, rng: random.Random) -> dict[str, list[tuple[float, float]]]:
        """One bar of hits (half-beat slot, velocity) per drum for the kit and level. From
        135 bpm in 4/4 every beat gets a kick and the backbeat is lighter: a fast song keeps
        its pulse on the beat instead of sounding half as fast."""
        g = self._pattern(level, rng)
        kit = self.style.drums
        if (
            self.song.beats_per_bar == 4
            and self.song.bpm >= 135
            and level != "half"
            and kit not in ("trap", "orchestral", "jazz")
        ):
            kicks = dict(g.get("kick", []))
            for p in (0, 2, 4, 6):
                kicks.setdefault(p, 0.85)
            g["kick"] = sorted(kicks.items())
            for back in ("snare", "clap"):
                if back in g:
                    g[back] = [(p, v * 0.6) for p, v in g[back]]
            g["hat"] = [(p, 0.8 if p % 2 == 0 else 0.6) for p in range(8)]
        return g

    def _pattern(self, level: str, rng: random.Random) -> dict[str, list[tuple[float, float]]]:
        kit, slots, b = self.style.drums, self.slots, self.song.beats_per_bar
        snare = {"trap": "clap", "electronic": "clap"}.get(kit, "snare")
        kick = "taiko" if kit == "orchestral" else "kick"
        eighths: Hits = [(i, 0.8 if i % 2 == 0 else 0.55) for i in range(slots)]
        quarters: Hits = [(i, 0.7) for i in range(0, slots, 2)]
        g: dict[str, Hits]
        if b != 4:  # 2/4, 3/4, 6/8: simple and clear
            back = {2: [2], 3: [2, 4], 6: [6]}[b]
            kicks: Hits = [(0, 0.85), (8, 0.7)] if b == 6 and level == "full" else [(0, 0.85)]
            g = {
                kick: kicks,
                "hat": quarters if level == "light" else eighths,
            }
            g[snare] = [(p, 1.0 if level != "light" else 0.85) for p in back]
            if kit == "orchestral":
                g = {"taiko": [(0, 1.0)], "taikohi": [(p, 0.6) for p in back]}
            return g
        if level == "half":
            g = {kick: [(0, 1.0)], snare: [(4, 0.9)], "hat": quarters}
            if kit == "jazz":
                g = {"kick": [(0, 0.7)], "snare": [(4, 0.6)], "ride": quarters}
            if kit == "orchestral":
                g = {"taiko": [(0, 1.0), (4, 0.7)]}
            return g
        if kit == "orchestral":
            if level == "light":
                return {"taiko": [(0, 1.0)]}
            g = {"taiko": [(0, 1.0), (3, 0.7), (4, 0.9)], "taikohi": [(6, 0.6), (7, 0.7)]}
            if level == "full":
                g["taiko"] += [(6, 0.8)]
                g["taikohi"] = [(2, 0.6), (5, 0.6), (7, 0.8)]
            return g
        if kit == "jazz":
            g = {
                "ride": quarters + [(3, 0.45), (7, 0.45)],
                "hat": [(2, 0.4), (6, 0.4)],
                "kick": [(0, 0.6)],
            }
            if level != "light":
                g["snare"] = [(2, 0.5), (6, 0.5)]
            return g
        if kit == "electronic":
            g = {
                "kick": [(0, 1.0), (2, 0.95), (4, 1.0), (6, 0.95)],
                "hat": [(1, 0.7), (3, 0.7), (5, 0.7), (7, 0.7)],
            }
            if level == "light":
                return {
                    "kick": [(0, 1.0), (4, 1.0)],
                    "hat": g["hat"],
                    "clap": [(2, 0.75), (6, 0.8)],
                }
            g["clap"] = [(2, 0.9), (6, 0.9)]
            if level == "full":
                g["hat"] = eighths
                g["openhat"] = [(3, 0.5), (7, 0.5)]
            return g
        if kit == "trap":
            g = {"kick": [(0, 1.0)], "hat": [(i, 0.6 if i % 2 else 0.75) for i in range(slots)]}
            if level == "light":
                g["clap"] = [(4, 0.85)]
                return g
            g["kick"] += [(p, 0.9) for p in rng.choice([[3], [5], [3, 7], [5, 7]])]
            g["clap"] = [(4, 1.0)]
            if level == "full":  # sixteenths, softly
                g["hat"] = [(i / 2, 0.55 if i % 2 else 0.7) for i in range(2 * slots)]
            return g
        # acoustic, rock, soft, lofi, synthwave: a backbeat
        g = {"kick": [(0, 1.0), (4, 0.9)], "hat": eighths}
        if level == "light":  # kick, a softer backbeat, quarter hats
            g["hat"] = quarters if kit != "rock" else eighths
            g["snare"] = [(2, 0.75), (6, 0.8)]
            return g
        extra = rng.choice([[], [3], [5], [5, 7] if kit == "rock" else [3]])
        g["kick"] += [(p, 0.75) for p in extra]
        g["snare"] = [(2, 0.95), (6, 1.0)]
        if level == "full":
            if kit in ("rock", "acoustic"):
                g["openhat"] = [(7, 0.5)]
            if kit == "synthwave" or self.song.bpm >= 115:
                g["kick"] = sorted(set(g["kick"]) | {(2, 0.8), (6, 0.8)})
        return g

    def _drums(self, s: form.Section, nxt: form.Section | None) -> None:
        kit = self.style.drums
        if kit == "none":
            return
        rng = _rng(self.song, f"drums{s.kind}{s.number}")
        level = self._drum_level(s)
        groove = self._groove(level, rng) if level != "none" else {}
        first = s.start
        if s.kind == "intro":  # drums come in halfway
            first = s.start + s.bars // 2 if s.bars >= 2 else s.end
        last = s.end
        if s.kind == "outro":
            last = s.start + max(1, s.bars // 2)
            if s.end >= self.bars:
                last = min(last, self.bars - 1)  # the last bar: one hit, below
        big = nxt is not None and nxt.energy > s.energy + 0.1
        for bar in range(first, min(last, self.bars)):
            hits = {k: list(v) for k, v in groove.items()}
            final_bar = bar == s.end - 1
            if final_bar and big and level != "none":
                self._fill(hits, s.kind == "pre")
            for drum, pattern in hits.items():
                for slot, vel in pattern:
                    gain = vel * (0.9 + 0.1 * rng.random())
                    self._hit(self.at(bar, slot), drum, gain)
            if bar == s.start and s.kind in ("chorus", "solo") and level in ("groove", "full"):
                self._hit(self.at(bar), "crash", 0.9)
        if s.kind == "outro" and s.end >= self.bars and self.bars > 1:  # one last hit
            self._hit(self.at(self.bars - 1), "taiko" if kit == "orchestral" else "kick", 0.9)
            self._hit(self.at(self.bars - 1), "crash", 0.5)

    def _fill(self, hits: dict, build: bool) -> None:
        kit, slots = self.style.drums, self.slots
        snare = "taikohi" if kit == "orchestral" else ("clap" if kit == "trap" else "snare")
        if build:  # a snare roll rising into the chorus
            hits[snare] = [(i, 0.4 + 0.6 * i / max(1, slots - 1)) for i in range(slots)]
            return
        tail = range(slots - 2, slots)
        hits[snare] = sorted(set(hits.get(snare, [])) | {(i, 0.85) for i in tail})
        if kit in ("acoustic", "rock", "soft"):
            hits["tom"] = [(slots - 4, 0.8), (slots - 3, 0.7)]

    def _hit(self, start: int, drum: str, gain: float) -> None:
        kit = self.style.drums
        if drum in ("kick", "taiko"):
            self.kicks.add(start)
        part = "percussion" if drum in ("taiko", "taikohi", "timpani", "shaker") else "drums"
        tonic = self.song.tonic
        key: tuple
        if drum == "taikohi":  # big drums and kicks tuned to the key
            key = ("drum", kit, "taiko", 1, self.place(tonic + 7, 38))
        elif drum == "taiko":
            key = ("drum", kit, "taiko", 0, self.place(tonic, 31))
        elif drum == "kick":
            key = ("drum", kit, "kick", self.place(tonic, 28))
        elif drum == "tom":
            key = ("drum", kit, "tom", self.place(tonic + 7, 43))
        else:
            key = ("drum", kit, drum)
        self.add(start, part, key, gain)

    # ------------------------------------------------------------ bass

    def _bass(self, s: form.Section) -> None:
        """The bass line: longer notes when the section is quiet, a pattern in the middle,
        driving eighths when it is loud (synthwave from the verse on); an 808 follows the
        kick; an upright walks in jazz; a note that starts with a kick ducks under it."""
        kind = self.style.bass
        if kind == "none":
            return
        voice = BASS_VOICE[kind]
        if s.kind in ("intro", "breakdown") and kind not in ("sub", "lowstrings"):
            return
        rng = _rng(self.song, f"bass{s.kind}{s.number}")
        slots, e, genre = self.slots, s.energy, self.style.genre
        low = {"808": 29, "sub": 31}.get(kind, 36)
        walking = kind == "upright" and genre == "jazz" and e >= 0.5 and slots == 8
        eighths = False
        if s.kind == "outro" or (kind in ("sub", "lowstrings") and e < 0.7):
            steps = [(0, slots)]
        elif walking:
            steps = [(p, 2) for p in range(0, slots, 2)]  # walking quarters
        elif kind == "lowstrings":
            steps = [(p, 1) for p in range(slots)]  # driving eighths
        elif e < 0.5:
            steps = [(p, min(4, slots - p)) for p in range(0, slots, 4)]
        elif (e >= 0.85 and genre in ("synthwave", "edm", "rock", "pop")) or genre == "synthwave":
            steps, eighths = [(p, 1) for p in range(slots)], True
        elif slots == 8:
            steps = rng.choice(
                [
                    [(0, 2), (2, 2), (4, 2), (6, 2)],
                    [(0, 3), (3, 1), (4, 2), (6, 2)],
                    [(0, 3), (3, 3), (6, 2)],
                ]
            )
        else:
            steps = [(p, 2) for p in range(0, slots, 2)]
        for bar in range(s.start, min(s.end, self.bars)):
            deg = self.degrees[bar]
            root = self.place(self.pcs(deg)[0], low)
            nxt_root = self.place(self.pcs(self.degrees[min(bar + 1, self.bars - 1)])[0], low)
            if bar == self.bars - 1:
                self.add(
                    self.at(bar),
                    "bass",
                    self._bass_key(voice, root, slots, 0.98, self.at(bar) in self.kicks),
                    1.0,
                )
                continue
            if kind == "808" and s.kind != "outro":  # a long note from each kick
                hits = [p for p in range(slots) if self.at(bar, p) in self.kicks] or [0]
                steps = [
                    (p, (hits[i + 1] if i + 1 < len(hits) else slots) - p)
                    for i, p in enumerate(hits)
                ]
            for i, (pos, dur) in enumerate(steps):
                note = root
                if walking and i > 0:
                    chord = [self.place(pc, low) for pc in self.pcs(deg)]
                    note = chord[i % len(chord)] if i < 3 else nxt_root + rng.choice([-1, 1, 2])
                    note = self._in_scale(note)
                elif eighths and i % 2 == 1 and genre in ("synthwave", "edm"):
                    note = root + 12  # octave eighths
                elif i == len(steps) - 1 and len(steps) > 2 and rng.random() < 0.4:
                    note = root + 7  # a fifth into the next bar
                vel = (0.85 + 0.15 * rng.random()) * (1.0 if i == 0 else 0.9)
                start = self.at(bar, pos)
                self.add(
                    start, "bass", self._bass_key(voice, note, dur, 0.9, start in self.kicks), vel
                )

    def _bass_key(self, voice: str, note: int, slots: float, legato: float, ducked: bool) -> tuple:
        n = self.length(slots, legato)
        if voice == "ebass":
            return ("ebass", note, n, self.style.bass == "upright", ducked)
        if voice == "808":
            return ("808", note, max(n, int(0.3 * SR)))
        if voice in ("bass", "sub"):
            return (voice, note, n, ducked)
        return (voice, note, n)

    def _in_scale(self, note: int) -> int:
        pcs = {(self.song.tonic + s) % 12 for s in self.sc}
        while note % 12 not in pcs:
            note -= 1
        return note

    # ------------------------------------------------------------ chords

    def _entry(self, k: int) -> float:
        return (0.0, 0.5, 0.8, 0.9)[min(k, 3)]

    def _comp(self, s: form.Section, inst: str, k: int) -> None:
        """The chords of one instrument through a section (if it plays in it)."""
        e = s.energy
        if e < self._entry(k) and not (k == 1 and s.kind == "breakdown"):
            return
        if s.kind == "breakdown" and k == 0 and len(self.style.chords) > 1:
            return  # the breakdown: the second colour alone
        if s.kind == "intro" and k > 0 and s.bars < 4:
            return
        part = PART_OF[inst]
        rng = _rng(self.song, f"comp{inst}{s.kind}")
        slots = self.slots
        up = {"chorus": 4, "pre": 2, "bridge": -3, "solo": 2}.get(s.kind, 0)
        fn = getattr(self, "_comp_" + inst, None) or self._comp_sustain
        for bar in range(s.start, min(s.end, self.bars)):
            pcs = self.pcs(self.degrees[bar])
            final = bar == self.bars - 1
            for pos, key, gain in fn(inst, pcs, e, up, slots, final, rng, s):
                self.add(self.at(bar, pos), part, key, gain * (0.7 + 0.3 * e))

    def _comp_sustain(self, inst, pcs, e, up, slots, final, rng, s):
        """Strings, pads, choir, organ: the chord held through the bar."""
        low = {"strings": 55, "pad": 55, "choir": 57, "organ": 55}.get(inst, 55) + up
        if self.style.genre in ("trailer", "orchestral") and inst == "strings":
            low += 7  # the violins on top
        notes = self.voicing(pcs, low)
        if e >= 0.85 and inst in ("strings", "pad", "choir"):
            notes = notes + (notes[0] + 12,)  # a wider chorus voicing
        n = self.length(slots * (2 if final else 1), 1.0)
        if inst == "strings":
            out = [(0, ("strings", notes, n, 0.25), 1.0)]
            if e >= 0.7 and self.style.genre in ("trailer", "orchestral") and not final:
                low_notes = (self.place(pcs[0], 48), self.place(pcs[0], 48) + 12)
                out += [
                    (p, ("strings", low_notes, self.length(1, 0.5), 0.005), 0.55 if p % 2 else 0.7)
                    for p in range(slots)
                ]  # an ostinato
            return out
        if inst == "pad":
            if self.style.bass == "none":  # the pad holds the low end
                notes = (self.place(pcs[0], 43),) + notes
            return [(0, ("pad", notes, n, self.style.genre in ("synthwave", "edm", "trap")), 1.0)]
        if inst == "choir":
            return [(0, ("choir", notes, n, "a" if e >= 0.5 else "u"), 1.0)]
        return [(0, ("organ", notes, n), 1.0)]

    def _comp_brass(self, inst, pcs, e, up, slots, final, rng, s):
        notes = self.voicing(pcs, 53 + up)
        if e >= 0.85 and not final and slots == 8:  # stabs
            return [
                (0, ("brass", notes, self.length(3, 0.9), True), 1.0),
                (3, ("brass", notes, self.length(1, 0.8), True), 0.8),
                (6, ("brass", notes, self.length(2, 0.8), True), 0.85),
            ]
        return [(0, ("brass", notes, self.length(slots * (2 if final else 1), 1.0), False), 0.9)]

    def _keys(self, inst, pcs, e, up, slots, final, rng, s, low=60):
        """Piano-like comping: held chords when quiet, broken chords in the middle, a chord
        on every beat when it is loud; a left hand when there is no bass."""
        notes = self.voicing(pcs, low + up)
        out = []
        if self.style.bass == "none":  # the left hand
            root = self.place(pcs[0], 36 + (7 if e < 0.5 else 0))
            lh = (root, root + 12) if e >= 0.5 else (root,)
            out.append((0, (inst, lh, self.length(slots, 1.0)), 0.8))
        if final:
            return out + [(0, (inst, notes, self.length(slots * 2, 1.0)), 0.9)]
        if e < 0.5 or s.kind in ("intro", "outro"):
            out.append((0, (inst, notes, self.length(slots, 1.0)), 0.8))
        elif e < 0.8 and slots >= 6:
            order = list(notes) + [notes[0] + 12]
            pattern = rng.choice([[0, 1, 2, 3, 2, 1, 2, 3], [0, 2, 1, 3, 0, 2, 1, 3]])
            for p in range(slots):
                m = order[pattern[p % len(pattern)] % len(order)]
                out.append((p, (inst, (m,), self.length(2, 1.0)), 0.7 if p % 2 else 0.8))
        else:
            for p in range(0, slots, 2):
                out.append((p, (inst, notes, self.length(2, 0.9)), 0.9 if p == 0 else 0.75))
        return out

    def _comp_piano(self, *a):
        return self._keys(*a, low=57)

    def _comp_epiano(self, inst, pcs, e, up, slots, final, rng, s):
        notes = self.voicing(pcs, 55 + up)
        if final or e < 0.6 or slots != 8:
            return [(0, ("epiano", notes, self.length(slots * (2 if final else 1), 1.0)), 0.8)]
        return [
            (0, ("epiano", notes, self.length(3, 0.9)), 0.85),
            (3, ("epiano", notes, self.length(3, 0.9)), 0.7),
            (6, ("epiano", notes, self.length(2, 0.9)), 0.75),
        ]

    def _comp_bells(self, inst, pcs, e, up, slots, final, rng, s):
        notes = self.voicing(pcs, 72 + up)
        step = 2 if e >= 0.5 else 4
        return [
            (p, ("bells", (notes[(p // step) % len(notes)],), self.length(step, 1.0)), 0.6)
            for p in range(0, slots, step)
        ]

    def _comp_arp(self, inst, pcs, e, up, slots, final, rng, s):
        notes = list(self.voicing(pcs, 60 + up))
        order = notes + [notes[0] + 12] + notes[1:][::-1]
        if final:
            return [(0, ("arp", notes[0], self.length(slots, 1.0)), 0.8)]
        return [
            (p, ("arp", order[p % len(order)], self.length(1, 0.9)), 0.8 if p % 2 else 0.9)
            for p in range(slots)
        ]

    def _guitar_chord(self, pcs) -> tuple[int, ...]:
        root = self.place(pcs[0], 45)
        notes = [root]
        for step in (7, 12, 16 if (pcs[1] - pcs[0]) % 12 == 4 else 15, 19, 24):
            if root + step <= 71:
                notes.append(root + step)
        return tuple(notes)

    def _comp_guitar(self, inst, pcs, e, up, slots, final, rng, s):
        notes = self._guitar_chord(pcs)
        if final:
            return [(0, ("guitar", notes, self.length(slots * 2, 1.0), "down"), 0.9)]
        if e < 0.5:  # picked: one string per half beat
            order = [0, 2, 1, 3, 2, 4, 3, 5]
            return [
                (p, ("pluck", notes[order[p % len(order)] % len(notes)], self.length(3, 1.0)), 0.8)
                for p in range(slots)
            ]
        strokes = {
            8: [(0, "down"), (2, "down"), (3, "up"), (5, "up"), (6, "down"), (7, "up")],
            6: [(0, "down"), (2, "down"), (3, "up"), (4, "down"), (5, "up")],
            4: [(0, "down"), (2, "down"), (3, "up")],
        }.get(slots, [(0, "down")])
        return [
            (p, ("guitar", notes, self.length(2, 1.0), d), 1.0 if p == 0 else 0.8)
            for p, d in strokes
        ]

    def _comp_eguitar(self, inst, pcs, e, up, slots, final, rng, s):
        root = self.place(pcs[0], 40)
        power = (root, root + 7, root + 12)
        if final:
            return [(0, ("eguitar", power, self.length(slots * 2, 1.0), False), 1.0)]
        if e < 0.6:
            return [(p, ("eguitar", power, self.length(1, 0.8), True), 0.8) for p in range(slots)]
        return [
            (p, ("eguitar", power, self.length(1, 0.95), False), 0.95 if p % 2 == 0 else 0.8)
            for p in range(slots)
        ]

    def _comp_synth(self, inst, pcs, e, up, slots, final, rng, s):
        return self._comp_sustain("pad", pcs, e, up, slots, final, rng, s)

    def _comp_flute(self, inst, pcs, e, up, slots, final, rng, s):
        notes = self.voicing(pcs, 72 + up)
        return [(0, ("flute", notes[-1], self.length(slots * (2 if final else 1), 0.95)), 0.7)]

    # ------------------------------------------------------------ melody

    def _lead(self, s: form.Section) -> None:
        """The melody of an instrumental section (with lyrics: only where no line is sung).
        A motif per kind of section (every chorus sings the same tune), in four-bar phrases
        (motif, answer, motif moved with the chords, cadence), strong beats on chord tones."""
        if s.kind in ("intro", "breakdown") or s.start in self.sung:
            return
        if self.song.lyrics and s.kind == "outro":
            return
        inst = self.style.lead
        if s.kind == "solo":  # a solo: another instrument if there is one
            inst = next(
                (
                    c
                    for c in self.style.chords
                    if c != inst and c in LEAD_LOW and c not in ("pad", "choir", "organ", "arp")
                ),
                inst,
            )
        part = PART_OF.get(inst, "synth")
        slots = self.slots
        motif_rng = random.Random(zlib.crc32(f"{self.melody_seed}\0motif\0{s.kind}".encode()))
        lengths, weights = RHYTHM[s.kind]
        ra = self._rhythm(motif_rng, lengths, weights)
        rb = self._rhythm(motif_rng, lengths, weights)
        walk = [motif_rng.choice([0, 2, 4])]
        for _ in range(len(ra) + len(rb)):
            walk.append(max(-2, min(9, walk[-1] + motif_rng.choice([-2, -1, -1, 1, 1, 2, 0]))))
        da, db = walk[: len(ra)], walk[len(ra) : len(ra) + len(rb)]
        end_rng = random.Random(zlib.crc32(f"{self.melody_seed}\0end\0{s.kind}{s.number}".encode()))
        lift = LIFT[s.kind]
        base = self.place(self.song.tonic, LEAD_LOW.get(inst, 62))
        root_deg = [self.degrees[b] for b in range(s.start, min(s.end, self.bars))]
        notes: list[tuple[int, int, int, int]] = []  # bar, slot, length (half beats), degree
        bars = len(root_deg)
        for p0 in range(0, bars, 4):
            phrase = min(4, bars - p0)
            last_phrase = p0 + phrase >= bars
            shape = [("a", ra, da), ("b", rb, db), ("a2", ra, da), ("end", None, None)][:phrase]
            if phrase < 4:
                shape[-1] = ("end", None, None)
            for j, (what, rhythm, degs) in enumerate(shape):
                bar = p0 + j
                if what == "end":
                    cad = (
                        end_rng.choice([[(0, slots)], [(0, 2), (2, slots - 2)]])
                        if slots >= 4
                        else [(0, slots)]
                    )
                    prev = notes[-1][3] if notes else 0
                    target = self._chord_degree(
                        root_deg[bar], prev, tonic=last_phrase, root=last_phrase
                    )
                    if len(cad) == 2:
                        notes.append((bar, cad[0][0], cad[0][1], target + end_rng.choice([-1, 1])))
                    notes.append((bar, cad[-1][0], cad[-1][1], target))
                    continue
                shift = root_deg[bar] - root_deg[p0] if what == "a2" else 0
                assert rhythm is not None and degs is not None  # only "end" has none (types)
                for (slot, dur), step in zip(rhythm, degs):
                    deg = step + shift
                    if slot == 0 or (slots == 8 and slot == 4):
                        deg = self._chord_degree(root_deg[bar], deg)
                    notes.append((bar, slot, dur, deg))
        legato = {"strings": 0.98, "brass": 0.9, "flute": 0.95, "synth": 0.92}.get(inst, 0.9)
        gain = 0.7 + 0.3 * s.energy
        for bar, slot, dur, deg in notes:
            d = max(-4, min(12, deg + lift))
            midi = base + self.sc[d % 7] + 12 * (d // 7)
            n = self.length(dur, legato)
            self.add(
                self.at(s.start + bar, slot),
                part,
                self._lead_key(inst, midi, n),
                gain * (1.0 if slot == 0 else 0.85),
            )

    def _rhythm(self, rng, lengths, weights) -> list[tuple[int, int]]:
        """Onsets and lengths (half beats) filling one bar, starting on its first beat."""
        out, pos = [], 0
        while pos < self.slots:
            dur = min(rng.choices(lengths, weights)[0], self.slots - pos)
            out.append((pos, dur))
            pos += dur
        return out

    def _chord_degree(
        self, chord_deg: int, near: int, tonic: bool = False, root: bool = False
    ) -> int:
        """The chord tone (a scale degree) nearest ``near``: the root alone when ``root``."""
        tones = [chord_deg] if root else [chord_deg, chord_deg + 2, chord_deg + 4]
        cands = [t + 7 * k for t in tones for k in (-2, -1, 0, 1, 2)]
        return min(cands, key=lambda c: (abs(c - near), c))

    def _lead_key(self, inst: str, midi: int, n: int) -> tuple:
        if inst in ("piano", "epiano", "bells", "organ"):
            return (inst, (midi,), n)
        if inst == "strings":
            return ("strings", (midi,), n, 0.06)
        if inst == "brass":
            return ("brass", (midi,), n, False)
        if inst == "guitar":
            return ("pluck", midi, n)
        if inst == "eguitar":
            return ("leadguitar", midi, n)
        if inst == "choir":
            return ("choir", (midi,), n, "a")
        if inst in ("flute", "arp"):
            return (inst, midi, n)
        return ("synth", midi, n)

    # ------------------------------------------------------------ sung lines

    def _vocals(self, lines: list[form.Line]) -> None:
        """One sung note per syllable. The same line sung again gets the same contour; a
        chorus sits a fifth higher than a verse; lines end on the chord's root. With "no
        vocals" in the caption the lead instrument plays those notes instead."""
        if not lines:
            return
        sc = self.sc
        base = 55 + (self.song.tonic - 7) % 12  # the tonic between G3 and F#4
        for line in lines:
            rng = random.Random(zlib.crc32(f"{self.melody_seed}\0{line.text.lower()}".encode()))
            lift = 4 if line.kind == "chorus" else (2 if line.kind == "pre" else 0)
            degree = rng.choice([0, 2, 4])
            t = line.start
            n_syl = sum(line.words)
            vowels = music.line_vowels(line.text)
            for i in range(n_syl):
                bar = min(self.bars - 1, int(t / self.bar_s))
                chord = music.chord_pitches(self.song.tonic, self.song.minor, self.degrees[bar], 48)
                chord = sorted(p if p < 67 else p - 12 for p in chord)
                rising = i < n_syl / 2
                step = rng.choice([-1, 0, 1, 1, 2] if rising else [-2, -1, -1, 0, 1])
                degree = max(-3, min(7, degree + step))
                sung = degree + lift
                midi = base + sc[sung % 7] + 12 * (sung // 7)
                last = i == n_syl - 1
                if i % 2 == 0 or last:  # strong positions land on a chord tone
                    root = (self.song.tonic + sc[self.degrees[bar]]) % 12
                    tones = (
                        [36 + root + 12 * k for k in range(5)]
                        if last
                        else [c + 12 * k for c in chord for k in (-1, 0, 1, 2)]
                    )
                    midi = min(tones, key=lambda c: (abs(c - midi), c))
                    degree = _nearest_degree(midi - base, sc) - lift
                length = line.slot * (2 if last else 1) * 0.92
                vowel = vowels[i] if i < len(vowels) else "a"
                gain = 0.85 + 0.15 * rng.random()
                if self.style.vocals:
                    self.add(
                        round(t * SR), "vocals", ("voice", midi, int(length * SR), vowel), gain
                    )
                else:  # "no vocals": the lead instrument plays the tune the words would sing
                    inst = self.style.lead
                    note = midi + (12 if LEAD_LOW.get(inst, 62) >= 67 else 0)
                    self.add(
                        round(t * SR),
                        PART_OF.get(inst, "synth"),
                        self._lead_key(inst, note, int(length * SR)),
                        0.8 * gain,
                    )
                t += line.slot

    # ------------------------------------------------------------ effects, textures

    def _effects(self, s: form.Section, nxt: form.Section | None) -> None:
        genre = self.style.genre
        if self.style.alone:  # an instrument alone: no swells, no hits
            return
        if (
            nxt is not None
            and nxt.kind == "chorus"
            and s.kind != "chorus"
            and genre in ("trailer", "edm", "synthwave", "pop", "trap")
            and s.bars >= 1
        ):
            n = int(min(self.bar_s, 4.0) * SR)
            self.add(self.at(nxt.start) - n, "fx", ("swell", n), 0.8)
        if self.style.hits and s.kind in ("chorus", "solo"):
            for bar in range(s.start, min(s.end, self.bars), 2):
                pcs = self.pcs(self.degrees[bar])[:3]
                notes = self.voicing(pcs, 52) + self.voicing(pcs, 64)
                self.add(self.at(bar), "fx", ("hit", notes, int(1.2 * SR)), 0.9)
            self.add(
                self.at(s.start),
                "fx",
                ("boom", int(2.5 * SR), self.place(self.song.tonic, 24)),
                1.0,
            )
            if self.style.drums == "orchestral":
                timp = self.place(self.song.tonic, 38)
                self.add(
                    self.at(s.start), "percussion", ("drum", "orchestral", "timpani", timp), 0.9
                )

    def _textures(self) -> None:
        if not self.style.textures:
            return
        seg_bars = max(1, round(4.0 / self.bar_s))  # about four seconds a stretch
        xfade = int(0.05 * SR)
        energy = [0.0] * self.bars
        for s in self.sections:
            for b in range(s.start, min(s.end, self.bars)):
                energy[b] = s.energy
        n = self.at(seg_bars) + xfade
        named = self.style.genre in ("ambient",) or len(self.style.textures) > 1
        for name in self.style.textures:
            # a texture the caption asks for (or an ambient one) is part of the music; the
            # lo-fi vinyl is a backdrop
            lift = 2.2 if named or name not in ("vinyl",) else 1.0
            for i, bar in enumerate(range(0, self.bars, seg_bars)):
                self.add(
                    self.at(bar),
                    "fx",
                    ("texture", name, n, i % 3, xfade),
                    lift * (1.0 if energy[bar] < 0.5 else 0.6),
                )


def _nearest_degree(semis: int, sc: tuple[int, ...]) -> int:
    octave, pc = divmod(semis, 12)
    best = min(range(7), key=lambda d: abs(sc[d] - pc))
    return best + 7 * octave


def plan(song) -> Plan:
    """The arrangement of a song (a render.Song): sections, chords and every note event."""
    return Arranger(song).run()
