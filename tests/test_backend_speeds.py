"""What each backend measured in this machine's songs (install/speeds.py), and the seconds
per diffusion step a song's engine log gives (node/song_progress.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from cantor_desktop.install import speeds
from cantor_desktop.node.song_progress import ProgressWatcher


def test_a_steps_figure_is_brought_to_a_minute_of_audio_and_the_median_kept():
    speeds.record("acestep", "cpu", "turbo", 0.5, 30.0)  # 1.0 s a step for a minute
    speeds.record("acestep", "cpu", "turbo", 2.0, 60.0)  # 2.0
    speeds.record("acestep", "cpu", "base", 6.0, 120.0)  # 3.0
    found = speeds.summary("acestep", "cpu")
    assert found is not None
    assert (found.seconds_per_step, found.songs, found.models) == (2.0, 3, ("turbo", "base"))
    assert speeds.summary("acestep", "vulkan") is None
    for _ in range(speeds.KEPT + 5):
        speeds.record("acestep", "cpu", "turbo", 1.0, 60.0)
    assert speeds.summary("acestep", "cpu").songs == speeds.KEPT  # the newest only


def test_a_gpu_backend_slower_than_the_cpu_is_named_so():
    speeds.record("acestep", "cpu", "turbo", 0.5, 60.0)
    speeds.record("acestep", "vulkan", "turbo", 0.55, 60.0)  # within the margin: not slower
    assert speeds.slower_than_cpu("acestep", "vulkan") is None
    speeds.record("acestep", "vulkan", "turbo", 9.0, 60.0)
    speeds.record("acestep", "vulkan", "turbo", 9.5, 60.0)
    mine, cpu = speeds.slower_than_cpu("acestep", "vulkan")
    assert mine.seconds_per_step > cpu.seconds_per_step * speeds.SLOWER_BY
    assert speeds.slower_than_cpu("acestep", "cpu") is None


def test_nonsense_is_not_recorded():
    speeds.record("acestep", "cpu", "turbo", 0.0, 60.0)
    speeds.record("acestep", "cpu", "turbo", 1.0, 0.0)
    assert speeds.summary("acestep", "cpu") is None


def test_the_watcher_times_the_dits_steps_take_by_take(monkeypatch):
    clock = iter([10.0, 11.0, 12.0, 13.0, 20.0, 20.5, 21.0])
    monkeypatch.setattr("cantor_desktop.node.song_progress.time.monotonic", lambda: next(clock))
    song = SimpleNamespace(state="running", stage="synth", progress=0.0)
    queue = SimpleNamespace(set_stage=lambda *a: None, set_progress=lambda *a: None)
    watcher = ProgressWatcher(queue, song, asyncio.new_event_loop())  # type: ignore[arg-type]
    lines = [
        "[DiT] Step 1/4",
        "[DiT] Step 2/4",
        "[DiT] Step 3/4",
        "[DiT] Step 4/4",  # take 1: 1 s a step
        "[DiT] Step 1/3",  # take 2 starts again (7 s later: not a step)
        "[DiT] Step 2/3",
        "[DiT] Step 3/3",  # 0.5 s a step
    ]
    for line in lines:
        watcher._apply(SimpleNamespace(line=line))
    assert watcher.seconds_per_step() == pytest.approx((3 * 1.0 + 2 * 0.5) / 5)
    fresh = ProgressWatcher(queue, song, asyncio.new_event_loop())  # type: ignore[arg-type]
    assert fresh.seconds_per_step() is None
