"""The self-test, unfrozen: the same code the frozen build runs with --self-test (a real node
child, the sketch engine, two songs, the main window offscreen), plus its audio checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from cantor_desktop.bundle.selftest import SelfTestError, check_audio

ROOT = Path(__file__).resolve().parent.parent


def test_self_test_passes_unfrozen_with_its_output_in_a_file(tmp_path):
    """Its output goes to a file, as ``packaging/build.sh`` sends it, in a locale whose
    encoding has no "→" (Windows encodes a file in its ANSI code page, cp1252; this is the
    C locale's ASCII): it passes, and the log is UTF-8."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIOENC"))}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    log = tmp_path / "selftest.log"
    with open(log, "wb") as out_file:
        r = subprocess.run(
            [sys.executable, "-m", "cantor_desktop.bundle.frozen_main", "--self-test"],
            stdout=out_file,
            stderr=subprocess.STDOUT,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
    out = log.read_bytes().decode("utf-8")
    assert r.returncode == 0, out
    assert "node started: " in out and " → http://127.0.0.1:" in out
    assert "instrumental song: 10.00 s" in out
    assert "lyrics song: 12.00 s" in out
    assert "playback (soundfile + QAudioSink): 10.00 s decoded" in out
    assert "keyring backend" in out
    assert "main window painted offscreen" in out
    assert "cantor self-test passed" in out


def test_frozen_main_runs_as_a_script_as_pyinstaller_runs_it():
    """PyInstaller runs frozen_main.py as ``__main__``, outside its package: a relative
    import there ended every frozen start (the Windows lane found it)."""
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cantor_desktop" / "bundle" / "frozen_main.py"),
            "--mode",
            "cli",
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cantor "), r.stdout


def _wav(path: Path, seconds: float, amplitude: float, rate: int = 48000) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    sf.write(
        path, (amplitude * np.sin(2 * np.pi * 220 * t)).astype("float32"), rate, subtype="PCM_16"
    )
    return path


def test_check_audio_accepts_a_real_song_length_wav(tmp_path):
    assert check_audio(_wav(tmp_path / "ok.wav", 10.0, 0.3), 10).startswith("10.00 s")


@pytest.mark.parametrize(
    "seconds, amplitude, why",
    [
        (10.0, 0.0, "silent"),
        (8.0, 0.3, "8.00 s long, asked 10 s"),
    ],
)
def test_check_audio_refuses(tmp_path, seconds, amplitude, why):
    with pytest.raises(SelfTestError, match=why):
        check_audio(_wav(tmp_path / "bad.wav", seconds, amplitude), 10)


def test_check_audio_refuses_what_is_not_a_wav(tmp_path):
    path = tmp_path / "x.wav"
    path.write_bytes(b"ID3\x04" + b"\x00" * 200)
    with pytest.raises(SelfTestError, match="not a WAV"):
        check_audio(path, 10)
    path.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunk")
    with pytest.raises(SelfTestError, match="cannot be decoded"):
        check_audio(path, 10)


def test_self_test_fails_with_the_reason_when_a_song_is_late():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "cantor_desktop.bundle.frozen_main",
            "--self-test",
            "--timeout",
            "0.001",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 1
    assert "FAIL  self-test: a song took longer than 0 s" in r.stdout
    assert "cantor self-test FAILED" in r.stdout
    kept = [
        line.split(" in ", 1)[1]
        for line in r.stdout.splitlines()
        if line.startswith("self-test files kept in ")
    ]
    assert kept and Path(kept[0]).is_dir()
    import shutil

    shutil.rmtree(kept[0])
