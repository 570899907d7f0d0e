"""LoRA adapters through a real node: added by path (a ComfyUI file, a PEFT folder) or by
upload, listed with what they were made for, refused with the reason when their files say
they belong to another model, removed (not while a song uses them); an adapter added while
the node runs is used by the next song, the engine restarted with ``--adapters`` between
songs and the node left running; a song naming an unknown adapter is a 422."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cantor_desktop.system.paths import paths
from support.adapter_files import (
    comfyui_file,
    llm_peft_folder,
    lora_tensors,
    peft_folder,
    sd_unet_file,
    write_safetensors,
)
from support.node import LONG, Node, engine_pid, until_state, write_config


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_add_by_path_and_upload_list_refuse_and_remove(cantor_home, tmp_path):
    write_config(cantor_home)
    mine = tmp_path / "mine"
    style = comfyui_file(mine / "Warm Tape.safetensors")
    peft = peft_folder(mine / "chinese-new-year")
    sd = sd_unet_file(mine / "sdxl-style.safetensors")
    llm = llm_peft_folder(mine / "qwen-lora")
    wide = write_safetensors(mine / "wide.safetensors", lora_tensors(width=4096))
    (mine / "notes.txt").write_text("hello")
    (mine / "cut.safetensors").write_bytes(style.read_bytes()[:5000])
    folder = cantor_home / "models" / "adapters"

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.http() as http:
                answers = {}
                for label, body in (
                    ("file", {"path": str(style)}),
                    ("peft", {"path": str(peft), "name": "cny"}),
                    ("again", {"path": str(style), "name": "WARM-tape"}),
                    ("sd", {"path": str(sd)}),
                    ("llm", {"path": str(llm)}),
                    ("wide", {"path": str(wide)}),
                    ("txt", {"path": str(mine / "notes.txt")}),
                    ("cut", {"path": str(mine / "cut.safetensors")}),
                    ("relative", {"path": "style.safetensors"}),
                    ("bad name", {"path": str(wide), "name": "../up"}),
                    ("extra", {"path": str(style), "copy": True}),
                ):
                    r = await http.post("/v1/adapters", json=body)
                    answers[label] = (r.status_code, r.json())
                listed = (await http.get("/v1/adapters")).json()
                up = await http.post(
                    "/v1/adapters/upload",
                    params={"name": "sent"},
                    content=style.read_bytes(),
                    headers={"Content-Type": "application/octet-stream"},
                )
                junk = await http.post(
                    "/v1/adapters/upload",
                    params={"name": "junk"},
                    content=b"\x89PNG" + b"\0" * 4000,
                    headers={"Content-Type": "application/octet-stream"},
                )
                sd_up = await http.post(
                    "/v1/adapters/upload",
                    params={"name": "sd"},
                    content=sd.read_bytes(),
                    headers={"Content-Type": "application/octet-stream"},
                )
                on_disk = _tree(folder)
                gone = await http.delete("/v1/adapters/Warm-Tape")
                missing = await http.delete("/v1/adapters/Warm-Tape")
                after = (await http.get("/v1/adapters")).json()
            return answers, listed, up, junk, sd_up, on_disk, gone, missing, after
        finally:
            await node.stop()

    answers, listed, up, junk, sd_up, on_disk, gone, missing, after = asyncio.run(main())
    status, body = answers["file"]
    assert status == 201, body
    added = body["added"]
    assert added["name"] == "Warm-Tape" and added["engine_name"] == "Warm-Tape.safetensors"
    assert added["made_for"] == "ACE-Step 1.5 (2B DiT)" and added["dit"] == "2B"
    assert added["format"] == "comfyui" and added["rank"] == 4 and added["alpha"] == 8.0
    assert answers["peft"][0] == 201
    peft_added = answers["peft"][1]["added"]
    assert peft_added["engine_name"] == "cny" and peft_added["format"] == "peft"
    assert peft_added["base_model"] == "ACE-Step/Ace-Step1.5" and peft_added["alpha"] == 8.0
    # a clash, in any case
    assert (
        answers["again"][0] == 409
        and "already installed" in answers["again"][1]["error"]["message"]
    )
    # made for another model: refused, saying what for and why
    for label, words in (
        ("sd", "made for sdxl_base_v1-0"),
        ("llm", "made for Qwen/Qwen3-0.6B"),
        ("wide", "4096 features"),
    ):
        status, body = answers[label]
        assert status == 422 and body["error"]["type"] == "made_for_another_model", (label, body)
        assert words in body["error"]["message"] and "refused" in body["error"]["message"]
        assert body["error"]["made_for"]
    expected = {
        "txt": "not a .safetensors file",
        "cut": "the file may be cut short",
        "relative": "not an absolute path",
        "bad name": "cannot name an adapter",
        "extra": "copy: unknown field",
    }
    for label, words in expected.items():
        status, body = answers[label]
        assert status == 422 and words in body["error"]["message"], (label, body)
    # the list: both, with what they are for
    names = {a["name"]: a for a in listed["adapters"]}
    assert set(names) == {"Warm-Tape", "cny"} and listed["folder"] == str(folder)
    assert names["cny"]["size"] > 0 and names["cny"]["targets"] == [
        "self_attn.o_proj",
        "self_attn.q_proj",
    ]
    # an upload: kept whole and checked; junk and another model's adapter are not kept
    assert up.status_code == 201 and up.json()["added"]["engine_name"] == "sent.safetensors"
    assert (folder / "sent.safetensors").read_bytes() == style.read_bytes()
    assert junk.status_code == 422 and junk.json()["error"]["field"] == "body"
    assert sd_up.status_code == 422 and "sdxl" in sd_up.json()["error"]["message"]
    # on disk: the file, the PEFT folder with only what the engine reads, nothing half done
    assert on_disk == [
        "Warm-Tape.safetensors",
        "cny",
        "cny/adapter_config.json",
        "cny/adapter_model.safetensors",
        "sent.safetensors",
    ]
    assert not any((cantor_home / "models" / ".adapters-staging").iterdir())
    assert gone.status_code == 200 and gone.json()["freed_bytes"] == style.stat().st_size
    assert (
        missing.status_code == 404 and "installed: cny, sent" in missing.json()["error"]["message"]
    )
    assert [a["name"] for a in after["adapters"]] == ["cny", "sent"]


def _engine_log() -> str:
    return paths().engine_log("sketch").read_text("utf-8")


def test_an_adapter_added_while_the_node_runs_is_used_by_the_next_song(cantor_home, tmp_path):
    write_config(cantor_home)
    style = comfyui_file(tmp_path / "tape.safetensors")
    folder = cantor_home / "models" / "adapters"

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                first = await c.submit_song(
                    {"caption": "dusty boom bap", "duration": 10, "model": "sketch"}
                )
                await until_state(c, first, ("done",))
                before = await engine_pid(c)
                # the engine runs; an adapter arrives
                added = await c.add_adapter(style)
                second = await c.submit_song(
                    {
                        "caption": "dusty boom bap",
                        "duration": 10,
                        "lyrics": "[Verse]\nwarm tape hiss",
                        "model": "sketch",
                        "adapter": "tape",
                        "adapter_scale": 0.7,
                    }
                )
                song2 = await until_state(c, second, ("done", "failed"))
                after = await engine_pid(c)
                third = await c.submit_song(
                    {"caption": "again", "duration": 10, "model": "sketch", "adapter": "tape"}
                )
                song3 = await until_state(c, third, ("done", "failed"))
                still = await engine_pid(c)
                # in use: not removed while a song naming it waits or runs
                long_id = await c.submit_song({**LONG, "adapter": "tape"})
                async with node.http() as http:
                    busy = await http.delete("/v1/adapters/tape")
                    await c.cancel(long_id)
                    await until_state(c, long_id, ("cancelled",))
                    free = await http.delete("/v1/adapters/tape")
            return (
                added,
                song2,
                song3,
                before,
                after,
                still,
                busy,
                free,
                node.proc.pid,
                node.proc.running,
            )
        finally:
            await node.stop()

    added, song2, song3, before, after, still, busy, free, pid, running = asyncio.run(main())
    assert added["name"] == "tape"
    assert song2["state"] == "done", song2.get("error")
    assert before and after and after != before  # the engine, restarted between songs
    assert still == after and song3["state"] == "done"  # nothing changed: no restart
    assert running
    log = _engine_log()
    starts = [line for line in log.splitlines() if "---- starting:" in line]
    assert len(starts) == 2 and all(f"--adapters {folder}" in s for s in starts), starts
    second_run = log.split(starts[1], 1)[1]
    assert f"[Server] Scanning adapters in {folder}" in second_run
    assert "[Registry] Adapter: tape.safetensors (ComfyUI)" in second_run
    assert "[Server] Loading synth: DiT=" in second_run and "Adapter=tape.safetensors" in second_run
    assert "[Adapter] tape.safetensors: scale=0.70" in second_run  # the field reached it
    assert "[Adapter] tape.safetensors: scale=1.00" in second_run  # the third song's default
    sidecar = json.loads(Path(song2["takes"][0]["sidecar"]).read_text("utf-8"))
    assert sidecar["request"]["adapter"] == "tape" and sidecar["request"]["adapter_scale"] == 0.7
    assert sidecar["engine_request"]["adapter"] == "tape.safetensors"
    assert busy.status_code == 409 and busy.json()["error"]["type"] == "in_use"
    assert free.status_code == 200 and not (folder / "tape.safetensors").exists()


def test_a_song_naming_an_adapter_that_is_not_installed_is_a_422(cantor_home, tmp_path):
    write_config(cantor_home)
    peft = peft_folder(tmp_path / "my-style")

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.http() as http:
                none = await http.post(
                    "/v1/songs", json={"caption": "x", "model": "sketch", "adapter": "nope"}
                )
                await http.post("/v1/adapters", json={"path": str(peft)})
                one = await http.post(
                    "/v1/songs", json={"caption": "x", "model": "sketch", "adapter": "nope"}
                )
                scale = await http.post(
                    "/v1/songs",
                    json={
                        "caption": "x",
                        "model": "sketch",
                        "adapter": "my-style",
                        "adapter_scale": 2.5,
                    },
                )
                songs = (await http.get("/v1/songs")).json()["songs"]
            return none, one, scale, songs
        finally:
            await node.stop()

    none, one, scale, songs = asyncio.run(main())
    for r, installed in ((none, []), (one, ["my-style"])):
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["field"] == "adapter" and err["installed"] == installed
        assert err["message"].startswith("adapter: adapter 'nope' is not installed; installed: ")
    assert "my-style" in one.json()["error"]["message"]
    assert scale.status_code == 422 and scale.json()["error"]["field"] == "adapter_scale"
    assert songs == []  # nothing reached the queue


def test_an_adapter_for_the_other_dit_size_is_refused_for_the_song(cantor_home, tmp_path):
    """An XL adapter changes nothing on a 2B DiT (the engine skips every tensor): the node
    says so before the song is queued. (The model check is the node's own function.)"""
    import pytest

    from cantor_desktop.models.adapters import store
    from cantor_desktop.node.routes.adapters import check_song_adapter
    from cantor_desktop.node.http_common import ApiError

    xl = write_safetensors(tmp_path / "big.safetensors", lora_tensors(size="XL", layers=(0, 30)))
    assert store().add(xl).dit == "XL"
    check_song_adapter({"adapter": "big", "model": "acestep-v15-xl-turbo-Q8_0"})
    check_song_adapter({"adapter": "big", "model": "sketch"})
    with pytest.raises(ApiError) as caught:
        check_song_adapter({"adapter": "big", "model": "acestep-v15-turbo-Q8_0"})
    assert caught.value.status == 422 and caught.value.field == "adapter"
    assert "made for the XL DiT" in caught.value.message


def test_an_upload_cut_short_or_of_another_type_keeps_nothing(cantor_home, tmp_path):
    import socket

    write_config(cantor_home)
    data = comfyui_file(tmp_path / "tape.safetensors").read_bytes()

    async def main():
        node = await Node(cantor_home).start()
        try:
            port = int(node.url.rsplit(":", 1)[1])
            head = (
                f"POST /v1/adapters/upload?name=tape HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {node.proc.token}\r\n"
                f"Content-Type: application/octet-stream\r\n"
                f"Content-Length: {len(data)}\r\n\r\n"
            ).encode()

            def cut_short() -> bytes:
                """Half the body, then the client's end closed; returns once the node has
                closed its end (what it answers, if anything)."""
                with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                    s.sendall(head + data[: len(data) // 2])
                    s.shutdown(socket.SHUT_WR)
                    answer = b""
                    while chunk := s.recv(65536):
                        answer += chunk
                    return answer

            answer = await asyncio.to_thread(cut_short)
            assert not answer.startswith(b"HTTP/1.1 2"), answer
            async with node.http() as http:
                typed = await http.post(
                    "/v1/adapters/upload",
                    params={"name": "tape"},
                    content=data,
                    headers={"Content-Type": "text/plain"},
                )

                async def settled():
                    staging = cantor_home / "models" / ".adapters-staging"
                    return not staging.exists() or not any(staging.iterdir())

                from support.node import wait_for

                await wait_for(settled, 10)
                listed = (await http.get("/v1/adapters")).json()["adapters"]
                whole = await http.post(
                    "/v1/adapters/upload",
                    params={"name": "tape"},
                    content=data,
                    headers={"Content-Type": "application/octet-stream"},
                )
            return typed, listed, whole
        finally:
            await node.stop()

    typed, listed, whole = asyncio.run(main())
    assert typed.status_code == 415
    assert listed == []  # nothing of the cut upload was kept
    assert whole.status_code == 201  # and nothing of it stands in the way
    assert _tree(cantor_home / "models" / "adapters") == ["tape.safetensors"]
