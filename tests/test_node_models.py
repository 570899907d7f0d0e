"""ACE-Step models through the node: pull as SSE from a hub on 127.0.0.1, a song on the
family's engine naming the exact files, remove; an engine that cannot start; the pin kept.

The "ace-server" here is a user-supplied build (node.toml ``engines.acestep.path``): a script
that runs the sketch engine with ace-server's command line, so nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from cantor_desktop.system.selfexec import self_argv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.hub import ModelHub  # noqa: E402
from support.node import Node, collect, until_state  # noqa: E402

DIT = "acestep-v15-turbo-Q8_0.gguf"
DIT2 = "acestep-v15-sft-Q8_0.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def _config(home: Path, engine: Path, pin: str = "cpu") -> None:
    (home / "node.toml").write_text(
        f'[backends]\nacestep = "{pin}"\n\n[engines.acestep]\npath = "{engine}"\n\n'
        f'[models]\ndefault = "acestep-v15-turbo"\nlm = "0.6B"\n\n'
        f'[songs]\ndir = "{home / "songs"}"\nformat = "wav16"\n'
    )


@pytest.fixture
def hub():
    with ModelHub() as h:
        h.add_set(DIT, LM)
        h.add(DIT2)
        yield h


def test_pull_sing_on_the_exact_files_and_remove(cantor_home, tmp_path, hub):
    engine = _script(tmp_path / "ace-server", f'exec {shlex.join(self_argv("sketch-server"))} "$@"')
    _config(cantor_home, engine)

    async def main():
        node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
        try:
            async with node.client() as c:
                pulled = [item async for item in c.pull("acestep-v15-turbo")]
                pulled2 = [item async for item in c.pull("acestep-v15-sft")]
                models = (await c.models())["models"]
                sid = await c.submit_song(
                    {
                        "caption": "turbo test",
                        "duration": 10,
                        "lyrics": "[Verse]\nla la",
                        "model": "acestep-v15-sft",
                    }
                )
                events = await collect(c, sid)
                song = await c.song(sid)
                system = await c.system()
                removed = await c.delete_model("acestep-v15-sft")
                async with node.http() as http:
                    after = await http.post(
                        "/v1/songs", json={"caption": "x", "model": "acestep-v15-sft"}
                    )
                    unknown = await http.delete("/v1/models/acestep-v15-nope")
                    builtin = await http.delete("/v1/models/sketch")
                    bad_pull = await http.post("/v1/models/pull", json={"name": "not-a-model"})
                return (
                    pulled,
                    pulled2,
                    models,
                    events,
                    song,
                    system,
                    removed,
                    after,
                    unknown,
                    builtin,
                    bad_pull,
                )
        finally:
            await node.stop()

    (pulled, pulled2, models, events, song, system, removed, after, unknown, builtin, bad_pull) = (
        asyncio.run(main())
    )
    kinds = [e.type for e in pulled]  # typed PullEvents, rebuilt by the client
    assert "plan" in kinds and "progress" in kinds and kinds[-1] == "done", kinds
    assert kinds.count("done") == 1 and "failed" not in kinds  # one terminal event
    done = pulled[-1]
    assert done.engine_ready is True and done.engine_error is None
    assert done.backend == "cpu" and done.model == "acestep-v15-turbo-Q8_0"
    assert pulled2[-1].type == "done"
    names = {m["name"]: m for m in models}
    assert names["acestep-v15-turbo-Q8_0"]["state"] == "ready"
    assert names["acestep-v15-sft-Q8_0"]["state"] == "ready"

    assert song["state"] == "done", song
    assert [d["stage"] for e, d in events if e == "stage"] == ["lm", "synth", "saving"]
    sidecar = json.loads(Path(song["takes"][0]["sidecar"]).read_text())
    assert sidecar["engine_request"]["synth_model"] == DIT2  # not the first DiT by name
    assert sidecar["engine_request"]["lm_model"] == LM
    assert sidecar["model"]["files"]["dit"] == DIT2
    assert sidecar["backend"] == "cpu"
    assert song["engine"]["family"] == "acestep" and song["engine"]["backend"] == "cpu"
    (loaded,) = system["loaded"]
    assert loaded["engine"] == "acestep" and loaded["backend"] == "cpu"
    log = (cantor_home / "logs" / "engine-acestep.log").read_text()
    assert f"--models {cantor_home / 'models' / 'acestep'}" in log

    assert removed["removed"] == "acestep-v15-sft"
    assert after.status_code == 404 and after.json()["error"]["field"] == "model"
    assert "acestep-v15-turbo-Q8_0" in after.json()["error"]["installed"]
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "model_not_found"
    assert builtin.status_code == 400
    assert bad_pull.status_code == 404 and bad_pull.json()["error"]["field"] == "name"


def test_an_engine_that_cannot_start_fails_the_song_with_its_first_error_and_keeps_the_pin(
    cantor_home, tmp_path, hub
):
    engine = _script(
        tmp_path / "ace-server",
        'echo "[Server] Scanning models" >&2\n'
        'echo "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU" >&2\n'
        'echo "[Server] ERROR: second complaint" >&2\nexit 1',
    )
    _config(cantor_home, engine)

    async def main():
        node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
        try:
            async with node.client() as c:
                [item async for item in c.pull("acestep-v15-turbo")]
                sid = await c.submit_song({"caption": "x", "duration": 10})
                song = await until_state(c, sid, ("done", "failed"), 30)
                sketch = await c.submit_song({"caption": "x", "duration": 10, "model": "sketch"})
                sketch_song = await until_state(c, sketch, ("done", "failed"), 30)
                return song, sketch_song, await c.config()
        finally:
            await node.stop()

    song, sketch_song, cfg = asyncio.run(main())
    assert song["state"] == "failed"
    # the build was trial-loaded before the song: rejected, with the cause first, whole
    assert song["error"].startswith(
        "the cpu engine (pinned in node.toml) was rejected: "
        "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: "
        "CPU; [Server] ERROR: second complaint"
    )
    assert cfg["values"]["backends.acestep"] == "cpu"  # never switched
    assert sketch_song["state"] == "done"  # the other engine still works


def test_pull_through_the_node_without_an_engine_download_is_ready(cantor_home, tmp_path, hub):
    """The model files arrive and verify, the engine cannot be fetched: the stream ends with
    one ``done`` (engine_ready false and the reason), never ``error``; the model is ready."""
    from support.fake_builds import BuildServer, fake_machine, working_script

    root, bin_dir = fake_machine(
        tmp_path / "machine", nvidia_driver=None, render=False, vulkan_loader=False
    )
    (cantor_home / "node.toml").write_text(
        f'[models]\ndefault = "acestep-v15-turbo"\nlm = "0.6B"\n\n'
        f'[songs]\ndir = "{cantor_home / "songs"}"\n'
    )

    async def main(builds):
        env = {
            "HF_ENDPOINT": hub.base_url,
            "CANTOR_HW_ROOT": str(root),
            "CANTOR_HW_OS": "linux",
            "CANTOR_HW_ARCH": "x86_64",
            "CANTOR_MANIFEST_URL": builds.manifest_url,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        node = await Node(cantor_home, env=env).start()
        try:
            async with node.client() as c:
                pulled = [item async for item in c.pull("acestep-v15-turbo")]
                return pulled, (await c.models())["models"]
        finally:
            await node.stop()

    with BuildServer(tmp_path / "srv") as builds:
        entry = builds.add("cpu", builds.archive("cpu.tar.gz", working_script()))
        entry["url"] = builds.server.url("/builds/gone.tar.gz")  # not served: 404
        builds.publish()
        pulled, models = asyncio.run(main(builds))
    kinds = [e.type for e in pulled]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and "failed" not in kinds, kinds
    done = pulled[-1]
    assert done.engine_ready is False
    assert "could not fetch" in done.engine_error
    assert done.message.startswith("Model ready. No engine yet:")
    names = {m["name"]: m for m in models}
    assert names["acestep-v15-turbo-Q8_0"]["state"] == "ready"


def _immutable(path: Path, on: bool) -> bool:
    """chattr ±i: the way to make unlink fail on Linux, even for root (as a file an engine
    holds open fails on Windows). False where the file system or the user cannot."""
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    return done.returncode == 0


def test_removing_a_model_in_use_is_409_never_500(cantor_home, tmp_path, hub):
    engine = _script(tmp_path / "ace-server", f'exec {shlex.join(self_argv("sketch-server"))} "$@"')
    _config(cantor_home, engine)
    dit2 = cantor_home / "models" / "acestep" / DIT2

    async def main():
        node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
        try:
            async with node.client() as c:
                [item async for item in c.pull("acestep-v15-turbo")]
                [item async for item in c.pull("acestep-v15-sft")]
                sid = await c.submit_song(
                    {"caption": "long", "duration": 600, "model": "acestep-v15-turbo"}
                )
                await until_state(c, sid, ("running",), 30)
                async with node.http() as http:
                    busy = await http.delete("/v1/models/acestep-v15-turbo")
                    await c.cancel(sid)
                    await until_state(c, sid, ("cancelled",), 30)
                    freed = await http.delete("/v1/models/acestep-v15-turbo")
                    locked = held = None
                    if _immutable(dit2, True):
                        try:
                            held = await http.delete("/v1/models/acestep-v15-sft")
                        finally:
                            _immutable(dit2, False)
                        locked = await http.delete("/v1/models/acestep-v15-sft")
                return busy, freed, held, locked, sid
        finally:
            await node.stop()

    busy, freed, held, locked, sid = asyncio.run(main())
    assert busy.status_code == 409
    err = busy.json()["error"]
    assert err["type"] == "in_use" and err["songs"] == [sid] and "cancel it" in err["message"]
    assert freed.status_code == 200
    if held is None:
        pytest.skip("chattr +i is not available here; the running-song case was checked")
    assert held.status_code == 409, held.text  # a file that cannot go: in use, not 500
    assert held.json()["error"]["type"] == "in_use" and DIT2 in held.json()["error"]["message"]
    assert locked.status_code == 200


def test_a_model_pulled_while_the_engine_runs_is_used_after_a_restart(cantor_home, tmp_path, hub):
    """ace-server scans ``--models`` once, when it starts: the next song naming a model
    pulled since then restarts it between songs; a song on files it saw does not."""
    engine = _script(tmp_path / "ace-server", f'exec {shlex.join(self_argv("sketch-server"))} "$@"')
    _config(cantor_home, engine)

    async def main():
        node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
        try:
            async with node.client() as c:
                [item async for item in c.pull("acestep-v15-turbo")]
                songs = []
                for model in ("acestep-v15-turbo", None, "acestep-v15-sft", "acestep-v15-turbo"):
                    if model is None:  # the engine runs; another DiT arrives
                        pulled = [item async for item in c.pull("acestep-v15-sft")]
                        assert pulled[-1].type == "done"
                        continue
                    sid = await c.submit_song(
                        {
                            "caption": "restart test",
                            "duration": 10,
                            "lyrics": "[Verse]\nla",
                            "model": model,
                        }
                    )
                    songs.append(await until_state(c, sid, ("done", "failed")))
                return songs
        finally:
            await node.stop()

    songs = asyncio.run(main())
    assert [s["state"] for s in songs] == ["done"] * 3, [s.get("error") for s in songs]
    dits = [
        json.loads(Path(s["takes"][0]["sidecar"]).read_text())["engine_request"]["synth_model"]
        for s in songs
    ]
    assert dits == [DIT, DIT2, DIT]
    log = (cantor_home / "logs" / "engine-acestep.log").read_text()
    starts = [line for line in log.splitlines() if "---- starting:" in line]
    assert len(starts) == 2, starts  # once at first, once for the new DiT
    assert "DiT not found" not in log
