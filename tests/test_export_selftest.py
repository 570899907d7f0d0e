"""The self-test's export step (cantor_desktop/bundle/selftest.py check_export, check_no_scipy): it
passes on a real Sketch song and names what is wrong when the export cannot meet its target.
The whole self-test, this step included, runs in tests/test_packaging_selftest.py and on
every frozen build (packaging/ci.sh)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from cantor_desktop.bundle.selftest import SONGS, SelfTestError, check_export

from test_export import sketch_audio

ROOT = Path(__file__).resolve().parent.parent


def test_the_export_step_passes_on_a_sketch_song(tmp_path):
    song = tmp_path / "instrumental.wav"
    sf.write(str(song), sketch_audio(duration=10.0), 48000, subtype="PCM_16")
    detail = check_export(song, tmp_path, SONGS[0][1])
    m = re.fullmatch(
        r"self-test_120bpm_Am_take1\.mp3, 4\.00 s, 44100 Hz, (\S+) LUFS, "
        r"(\S+) dBTP, TBPM 120, [\d.]+ s",
        detail,
    )
    assert m, detail
    assert abs(float(m[1]) + 14.0) <= 0.5 and float(m[2]) <= -1.0
    (mp3,) = (tmp_path / "export").glob("*.mp3")
    assert sf.info(str(mp3)).format == "MP3"


def test_the_export_step_names_what_is_wrong(tmp_path):
    """Silence cannot be brought to −14 LUFS: the step fails and says so."""
    song = tmp_path / "silent.wav"
    sf.write(str(song), np.zeros((48000 * 10, 2), np.float32), 48000, subtype="PCM_16")
    with pytest.raises(
        SelfTestError,
        match=r"self-test_120bpm_Am_take1\.mp3: -?inf LUFS, "
        r"asked -14",
    ):
        check_export(song, tmp_path, SONGS[0][1])


def test_no_scipy_check_sees_scipy_once_loaded():
    code = (
        "from cantor_desktop import export\n"
        "from cantor_desktop.bundle import selftest\n"
        "from cantor_desktop.export import loudness\n"
        "print(selftest.check_no_scipy())\n"
        "import scipy.signal\n"
        "try:\n"
        "    selftest.check_no_scipy()\n"
        "except selftest.SelfTestError as exc:\n"
        "    print('refused:', exc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.endswith("none of scipy")
    assert second.startswith("refused: scipy is loaded (scipy")
