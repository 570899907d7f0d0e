"""POST /v1/uploads on a real node: audio to edit or learn from is kept with its facts;
anything else is refused with the reason and nothing is kept."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
import soundfile as sf

from support.node import Node, write_config


@pytest.fixture
def home(cantor_home):
    write_config(cantor_home)
    return cantor_home


def audio(fmt: str, seconds: float = 2.0, rate: int = 48000, subtype: str | None = None) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 330 * t)).astype("float32")
    out = io.BytesIO()
    sf.write(out, np.stack([tone, tone], axis=1), rate, format=fmt, subtype=subtype)
    return out.getvalue()


def test_audio_is_kept_with_its_facts_and_everything_else_is_refused(home, tmp_path):
    good = {
        "song.wav": audio("WAV"),
        "song.flac": audio("FLAC"),
        "song.mp3": audio("MP3"),
        "song.aiff": audio("AIFF"),
        "song.ogg": audio("OGG"),
    }
    wav = audio("WAV", seconds=3.0)
    bad = {
        "not audio": b"hello, this is text" * 100,
        "a program renamed .wav": open("/bin/ls", "rb").read(),
        "truncated": wav[: len(wav) // 2],
        "eleven minutes": audio("WAV", seconds=660, rate=8000, subtype="PCM_16"),
        "empty": b"",
    }

    async def main():
        node = await Node(home).start()
        try:
            kept, refused = {}, {}
            async with node.client() as c:
                for name, data in good.items():
                    path = tmp_path / name
                    path.write_bytes(data)
                    kept[name] = await c.upload(path)
            async with node.http(timeout=60) as http:
                for label, data in bad.items():
                    r = await http.post(
                        "/v1/uploads",
                        content=data,
                        params={"name": label},
                        headers={"Content-Type": "audio/wav"},
                    )
                    refused[label] = (r.status_code, r.json()["error"])
                as_json = await http.post("/v1/uploads", json={"audio": "no"})
                again = await http.get(f"/v1/uploads/{kept['song.flac']['id']}")
                gone = await http.delete(f"/v1/uploads/{kept['song.ogg']['id']}")
                missing = await http.get(f"/v1/uploads/{kept['song.ogg']['id']}")
            return kept, refused, as_json, again.json(), gone.status_code, missing.status_code
        finally:
            await node.stop()

    kept, refused, as_json, again, gone, missing = asyncio.run(main())
    for name, record in kept.items():
        assert record["format"] == name.rsplit(".", 1)[1].upper().replace("AIFF", "AIFF")
        assert abs(record["duration"] - 2.0) < 0.1 and record["channels"] == 2
        assert record["name"] == name
    assert again["id"] == kept["song.flac"]["id"] and gone == 200 and missing == 404
    for label, (status, error) in refused.items():
        assert status == 422 and error["field"] == "body", (label, error)
    assert "minutes" in refused["eleven minutes"][1]["message"]
    assert (
        "cut short" in refused["truncated"][1]["message"]
        or "decoded" in refused["truncated"][1]["message"]
    )
    assert as_json.status_code == 415  # uploads take audio, not JSON
    stored = sorted(p.name for p in (home / "state" / "uploads").iterdir())
    expected = sorted(
        f"{r['id']}{ext}"
        for n, r in kept.items()
        if n != "song.ogg"
        for ext in ("." + n.rsplit(".", 1)[1], ".json")
    )
    assert stored == expected  # nothing of what was refused


def test_an_upload_past_its_cap_is_refused_while_it_streams(home):
    from cantor_desktop.node.uploads import MAX_BYTES

    async def main():
        node = await Node(home).start()
        try:
            async with node.http(timeout=120) as http:

                async def body():
                    chunk = b"\0" * 2**20
                    for _ in range(MAX_BYTES // 2**20 + 8):
                        yield chunk

                r = await http.post(
                    "/v1/uploads",
                    content=body(),
                    headers={"Content-Type": "application/octet-stream"},
                )
                return r.status_code
        finally:
            await node.stop()

    assert asyncio.run(main()) == 413
    assert not list((home / "state" / "uploads").glob("*"))


def test_an_upload_reads_its_file_off_the_event_loop(home, tmp_path, monkeypatch):
    """The app uploads from its GUI thread's loop: the file is read in a worker thread (a
    large file on a slow disk must not freeze the window), sent with its length, and its
    progress reported."""
    import threading

    from cantor_desktop.client import nodeclient

    readers, progress = [], []

    class Recorded(io.FileIO):
        def read(self, size=-1):
            readers.append(threading.current_thread() is threading.main_thread())
            return super().read(size)

    monkeypatch.setattr(nodeclient, "open", lambda p, mode: Recorded(p, "r"), raising=False)
    path = tmp_path / "take.wav"
    path.write_bytes(audio("WAV", seconds=12.0))

    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                return await c.upload(
                    path, on_progress=lambda sent, total: progress.append((sent, total))
                )
        finally:
            await node.stop()

    record = asyncio.run(main())
    assert record["name"] == "take.wav" and abs(record["duration"] - 12.0) < 0.1
    assert readers and not any(readers)  # never on the loop's thread
    size = path.stat().st_size
    assert progress[-1] == (size, size) and len(progress) == -(-size // (1 << 20))


def _wav(path, channels: int, frames: int, subtype: str = "PCM_U8"):
    data = np.zeros((frames, channels), dtype="float32")
    data[:, 0] = 0.25 * np.sin(np.arange(frames) / 10)
    sf.write(str(path), data, 48000, format="WAV", subtype=subtype)
    return path


def test_many_channels_are_refused_and_decoding_is_bounded_whatever_the_channels(tmp_path):
    """More than MAX_CHANNELS is refused before decoding, and each block holds at most
    DECODE_BYTES (a 1,024-channel 8-bit upload decoded 65,536 frames at a time as float32
    would be 256 MB a block)."""
    import tracemalloc

    from cantor_desktop.node import uploads

    wide = _wav(tmp_path / "wide.wav", 1024, 200)
    with pytest.raises(uploads.UploadError, match="1024 channels; at most 8"):
        uploads.examine(wide)
    eight = _wav(tmp_path / "eight.wav", 8, 48000 * 30)  # 11 MiB of 8-bit audio
    tracemalloc.start()
    try:
        facts = uploads.examine(eight)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facts["channels"] == 8 and abs(facts["duration"] - 30) < 0.01
    assert peak < 3 * uploads.DECODE_BYTES, peak  # a block, and the one before it
