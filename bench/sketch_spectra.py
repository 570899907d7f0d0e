"""Listen by numbers: where a Sketch song's energy sits, caption by caption.

Renders instrumental Sketch songs for a few captions (the engine's own request → song → render
path, in-process) and prints each one's share of energy per frequency band, from a numpy
FFT of the mono mix. Run it on two checkouts to compare engines:

    .venv/bin/python bench/sketch_spectra.py [--duration 30] [--seed 1] [CAPTION ...]
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/sketch_spectra.py

Only the public render API that every Sketch version has is used (``song_from_request``,
``Renderer(song, steps)``, ``step``, ``finish``), so the same script measures the old engine.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from cantor_desktop.sketch import render  # noqa: E402
from cantor_desktop.sketch.engine import song_from_request  # noqa: E402
from cantor_desktop.sketch.request import normalise  # noqa: E402

CAPTIONS = [
    "lo-fi piano",
    "dreamy synthwave",
    "epic orchestral trailer",
    "solo piano",
    "808 trap",
    "rain ambient",
]
# band edges in Hz: sub, bass, low mids, mids, presence, air
EDGES = [0, 60, 250, 1000, 4000, 8000, 24000]


def band_shares(audio: np.ndarray, sr: int = render.SR, edges=EDGES) -> np.ndarray:
    """Each band's share of the total energy (sums to 1), from one FFT of the mono mix."""
    mono = audio.mean(axis=1) if audio.ndim == 2 else audio
    spec = np.abs(np.fft.rfft(mono.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(mono), 1 / sr)
    idx = np.searchsorted(freqs, edges[1:-1])
    bands = np.add.reduceat(spec, np.concatenate([[0], idx]))
    return bands / max(spec.sum(), 1e-30)


OCTAVES = [20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480]


def render_caption(caption: str, duration: float, seed: int, **fixed) -> np.ndarray:
    req = normalise(
        {
            "caption": caption,
            "lyrics": "[Instrumental]",
            "duration": duration,
            "seed": seed,
            "output_format": "wav32",
            **fixed,
        }
    )
    r = render.Renderer(song_from_request(req, seed), 8)
    for k in range(8):
        r.step(k)
    return r.finish()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captions", nargs="*", default=CAPTIONS)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    names = [f"{lo}-{hi}" if hi < 24000 else f">{lo}" for lo, hi in zip(EDGES, EDGES[1:])]
    names[0] = "<60"
    print(
        f"energy share per band (Hz), instrumental, {args.duration:.0f} s, seed {args.seed}; "
        f"engine {os.path.dirname(render.__file__)}"
    )
    print(f"{'caption':<26}" + "".join(f"{n:>10}" for n in names) + f"{'250-4k':>9}")
    for caption in args.captions:
        shares = band_shares(render_caption(caption, args.duration, args.seed))
        mid = shares[2] + shares[3]
        print(
            f"{caption:<26}" + "".join(f"{100 * s:>9.1f}%" for s in shares) + f"{100 * mid:>8.1f}%"
        )
    # how alike two captions sound: cosine similarity of the energy in ten octave bands, at
    # one tempo and key (100 bpm, A minor) so only what the caption chooses can differ
    vecs = {
        c: band_shares(
            render_caption(c, args.duration, args.seed, bpm=100, keyscale="A minor"), edges=OCTAVES
        )
        for c in args.captions
    }
    print("\ncosine similarity of octave-band energy (100 bpm, A minor; 1.00 = the same spectrum)")
    print(f"{'':<26}" + "".join(f"{c[:12]:>14}" for c in args.captions))
    for a in args.captions:
        row = [
            vecs[a] @ vecs[b] / (np.linalg.norm(vecs[a]) * np.linalg.norm(vecs[b]))
            for b in args.captions
        ]
        print(f"{a:<26}" + "".join(f"{v:>14.2f}" for v in row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
