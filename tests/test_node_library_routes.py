"""Model files and the Hugging Face token through a real node: import by path (checked),
upload from another machine (a node with its own CANTOR_HOME and keyring: the file lands in
its models folder, nothing in ours), discarding what a stopped download left, and the token
kept in the node's keyring, never readable back."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from cantor_desktop.models import gguf
from cantor_desktop.models.events import PullEvent
from support.hub import ModelHub, model_bytes
from support.node import Node, write_config

DIT = "acestep-v15-turbo-Q8_0.gguf"


def their_node(tmp_path: Path, **env: str) -> Node:
    """A node that is not this home's: its own CANTOR_HOME and its own keyring."""
    home = tmp_path / "their-home"
    home.mkdir()
    write_config(home)
    return Node(
        home, env={"CANTOR_HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "their-xdg"), **env}
    )


def _files_under(folder: Path) -> list[str]:
    return (
        sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        if folder.exists()
        else []
    )


def test_import_by_path_takes_only_a_readable_ace_step_gguf(cantor_home, tmp_path):
    write_config(cantor_home)
    mine = tmp_path / "mine"
    mine.mkdir()
    good = gguf.write_header_only(mine / "my-dit.gguf", gguf.ARCH_DIT)
    (mine / "notes.txt").write_text("hello")
    (mine / "garbage.gguf").write_bytes(b"not a model at all")
    gguf.write_header_only(mine / "llama.gguf", "llama")
    gguf.write_header_only(mine / "vae-BF16.gguf", gguf.ARCH_LM)  # named VAE, says LM

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.http() as http:
                answers = {}
                for label, body in (
                    ("good", {"path": str(good)}),
                    ("again", {"path": str(good)}),
                    ("txt", {"path": str(mine / "notes.txt")}),
                    ("garbage", {"path": str(mine / "garbage.gguf")}),
                    ("llama", {"path": str(mine / "llama.gguf")}),
                    ("mislabelled", {"path": str(mine / "vae-BF16.gguf")}),
                    ("folder", {"path": str(mine)}),
                    ("missing", {"path": str(mine / "nope.gguf")}),
                    ("relative", {"path": "my-dit.gguf"}),
                    ("extra", {"path": str(good), "copy": True}),
                ):
                    r = await http.post("/v1/models/import", json=body)
                    answers[label] = (r.status_code, r.json())
                models = (await http.get("/v1/models")).json()["models"]
            return answers, models
        finally:
            await node.stop()

    answers, models = asyncio.run(main())
    status, body = answers["good"]
    assert status == 200 and body["imported"]["kind"] == "dit"
    assert body["imported"]["how"] == "adopted" and body["imported"]["path"] == str(good)
    assert answers["again"][0] == 200
    expected = {
        "txt": "is not a .gguf file",
        "garbage": "is not a readable GGUF model",
        "llama": "not an ACE-Step model file",
        "mislabelled": "named like a VAE",
        "folder": "is a folder",
        "missing": "does not exist",
        "relative": "not an absolute path",
        "extra": "copy: unknown field",
    }
    for label, words in expected.items():
        status, body = answers[label]
        assert status == 422 and words in body["error"]["message"], (label, body)
    by_name = {m["name"]: m for m in models}
    assert by_name["my-dit"]["imported"] is True
    assert good.read_bytes() == gguf.header_bytes(gguf.ARCH_DIT)  # never changed


def test_an_upload_lands_in_the_remote_nodes_models_folder_and_nowhere_here(cantor_home, tmp_path):
    node = their_node(tmp_path)
    data = model_bytes(DIT, 3 * 1024 * 1024 + 17)
    src = tmp_path / DIT
    src.write_bytes(data)
    not_gguf = tmp_path / "fake.gguf"
    not_gguf.write_bytes(b"PK\x03\x04" + os.urandom(200_000))
    lm_as_dit = tmp_path / "acestep-v15-sft-Q8_0.gguf"
    lm_as_dit.write_bytes(model_bytes("acestep-5Hz-lm-0.6B-Q8_0.gguf", 4096))
    sent: list[tuple[int, int]] = []

    async def main():
        await node.start()
        try:
            async with node.client() as c:
                imported = await c.upload_model(src, on_progress=lambda a, b: sent.append((a, b)))
                listed = {m["name"]: m for m in (await c.models())["models"]}
                outcomes = {}
                for label, path, name in (
                    ("again", src, None),
                    ("not gguf", not_gguf, None),
                    ("mislabelled", lm_as_dit, None),
                    ("bad name", src, "../escape.gguf"),
                ):
                    try:
                        await c.upload_model(path, name=name)
                        outcomes[label] = None
                    except Exception as exc:  # NodeError
                        outcomes[label] = (exc.status, exc.message)
            async with node.http() as http:
                plain = await http.post(
                    "/v1/models/upload",
                    params={"name": "x.gguf"},
                    content=data[:100],
                    headers={"Content-Type": "text/plain"},
                )
            huge = _raw(
                node,
                [
                    "POST /v1/models/upload?name=big.gguf HTTP/1.1",
                    f"Host: 127.0.0.1:{node.proc.port}",
                    f"Authorization: Bearer {node.proc.token}",
                    "Content-Type: application/octet-stream",
                    f"Content-Length: {20 * 2**30}",
                ],
            )
            return imported, listed, outcomes, plain, huge
        finally:
            await node.stop()

    imported, listed, outcomes, plain, huge = asyncio.run(main())
    landed = node.home / "models" / "acestep" / DIT
    assert imported["how"] == "uploaded" and imported["path"] == str(landed)
    assert landed.read_bytes() == data and imported["size"] == len(data)
    assert sent[-1] == (len(data), len(data)) and len(sent) >= 3
    assert listed["acestep-v15-turbo-Q8_0"]["files"][0]["state"] == "ready"
    assert outcomes["again"][0] == 409 and "already" in outcomes["again"][1]
    assert outcomes["not gguf"][0] == 422 and "not a GGUF" in outcomes["not gguf"][1]
    assert outcomes["mislabelled"][0] == 422 and "named like a DiT" in outcomes["mislabelled"][1]
    assert outcomes["bad name"][0] == 422
    assert plain.status_code == 415
    assert huge.startswith(b"HTTP/1.1 413")
    # nothing but the one file was kept there (no temporary upload left), nothing here
    assert _files_under(node.home / "models" / "acestep") == [DIT]
    assert _files_under(cantor_home / "models") == []


def _raw(node: Node, lines: list[str]) -> bytes:
    """Send only a request's head and read the node's answer."""
    with socket.create_connection(("127.0.0.1", node.proc.port), timeout=10) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return s.recv(4096)


def test_discarding_a_stopped_download_deletes_its_part_files_only(cantor_home, tmp_path):
    write_config(cantor_home)
    folder = cantor_home / "models" / "acestep"
    folder.mkdir(parents=True)
    (folder / f"{DIT}.part").write_bytes(b"x" * 1000)
    (folder / "vae-BF16.gguf.part").write_bytes(b"y" * 500)
    (folder / "Qwen3-Embedding-0.6B-Q8_0.gguf").write_bytes(
        model_bytes("Qwen3-Embedding-0.6B-Q8_0.gguf", 2048)
    )

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                before = {m["name"]: m for m in (await c.models())["models"]}
                first = await c.discard_parts("acestep-v15-turbo")
                second = await c.discard_parts("acestep-v15-turbo")
            async with node.http() as http:
                unknown = await http.delete("/v1/models/acestep-v15-nope/parts")
                builtin = await http.delete("/v1/models/sketch/parts")
            return before, first, second, unknown, builtin
        finally:
            await node.stop()

    before, first, second, unknown, builtin = asyncio.run(main())
    assert before["acestep-v15-turbo-Q8_0"]["state"] == "partial"
    assert sorted(Path(p).name for p in first["deleted"]) == [f"{DIT}.part", "vae-BF16.gguf.part"]
    assert first["freed_bytes"] == 1500 and second["deleted"] == []
    assert sorted(p.name for p in folder.iterdir()) == ["Qwen3-Embedding-0.6B-Q8_0.gguf"]
    assert unknown.status_code == 404 and builtin.status_code == 400


def test_discarding_waits_for_a_running_download_then_says_why_not(cantor_home):
    """The pull's lock is held (a download writing its .part): the node waits a little for
    it to stop, then refuses with the reason instead of deleting under it."""
    from filelock import FileLock

    write_config(cantor_home)
    folder = cantor_home / "models" / "acestep"
    folder.mkdir(parents=True)
    (folder / f"{DIT}.part").write_bytes(b"x" * 10)

    async def main():
        from cantor_desktop.system.paths import paths

        paths().locks_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(paths().locks_dir / "acestep-v15-turbo-Q8_0.lock"))
        node = await Node(cantor_home).start()
        try:
            async with node.http(timeout=30) as http:
                with lock:
                    held = await http.delete("/v1/models/acestep-v15-turbo/parts")
                free = await http.delete("/v1/models/acestep-v15-turbo/parts")
            return held, free
        finally:
            await node.stop()

    held, free = asyncio.run(main())
    assert held.status_code == 409 and "still downloading" in held.json()["error"]["message"]
    assert free.status_code == 200 and len(free.json()["deleted"]) == 1


def test_the_hf_token_is_kept_by_the_node_and_never_read_back(cantor_home, tmp_path):
    """Set through a node of another home: it lands in that node's keyring (not this
    machine's own), the node uses it for a gated model, and no answer ever carries it."""
    from cantor_desktop.system import secrets

    secret = "hf_" + "s3cret" * 6
    with ModelHub() as hub:
        hub.add_set(DIT, "acestep-5Hz-lm-0.6B-Q8_0.gguf")
        hub.gate(DIT, token=secret)
        node = their_node(tmp_path, HF_ENDPOINT=hub.base_url)

        async def main():
            await node.start()
            try:
                async with node.client() as c:
                    status0 = await c.hf_token()
                    refused = [e async for e in c.pull("acestep-v15-turbo")][-1]
                    answers = [await c.set_hf_token(secret), await c.hf_token()]
                    pulled = [e async for e in c.pull("acestep-v15-turbo")][-1]
                    removed = await c.remove_hf_token()
                    answers += [removed, await c.hf_token(), await c.remove_hf_token()]
                async with node.http() as http:
                    bad = await http.put("/v1/hub/token", json={"token": "has spaces in it"})
                    extra = await http.put("/v1/hub/token", json={"token": secret, "x": 1})
                return status0, refused, answers, pulled, bad, extra
            finally:
                await node.stop()

        status0, refused, answers, pulled, bad, extra = asyncio.run(main())
    assert status0 == {"set": False, "source": None, "note": ""}
    assert isinstance(refused, PullEvent) and refused.type == "failed"
    assert refused.error_type == "NeedsToken" and "token" in refused.message
    saved, read = answers[0], answers[1]
    assert saved["set"] is True and read == {"set": True, "source": "keyring", "note": ""}
    assert pulled.type == "done", pulled
    assert answers[2]["removed"] is True and answers[3]["set"] is False
    assert answers[4]["removed"] is False
    assert all(secret not in repr(a) for a in answers)
    assert bad.status_code == 422 and extra.status_code == 422
    assert secret not in bad.text + extra.text
    # it went to the node's keyring: this machine's own keyring never saw it
    assert secrets.get_secret(secrets.HF_TOKEN) is None
    keyring_file = tmp_path / "their-xdg" / "python_keyring" / "keyring_pass.cfg"
    assert "hf_5ftoken" not in keyring_file.read_text()  # removed from there too


def test_a_failed_pull_is_one_typed_failed_event(cantor_home, status=404):
    """The hub refuses a file: the stream's end is read as ``failed`` with the node's
    reason, the same vocabulary as every other step."""
    write_config(cantor_home)
    with ModelHub() as hub:
        hub.add_set(DIT, "acestep-5Hz-lm-0.6B-Q8_0.gguf")
        hub.cdn.fail(hub.cdn_path(DIT), status, times=1)  # the CDN refuses it once

        async def main():
            node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
            try:
                async with node.client() as c:
                    first = [e async for e in c.pull("acestep-v15-turbo")]
                    second = [e async for e in c.pull("acestep-v15-turbo")]
                return first, second
            finally:
                await node.stop()

        first, second = asyncio.run(main())
    assert [e.type for e in first][:2] == ["catalogue", "plan"]
    assert first[-1].type == "failed" and f"HTTP {status}" in first[-1].message
    assert sum(e.is_terminal for e in first) == 1
    assert second[-1].type == "done" and second[-1].model == "acestep-v15-turbo-Q8_0"


def test_the_nodes_catalogue_lists_the_xl_dits_the_hub_lists_with_their_sizes(cantor_home):
    write_config(cantor_home)
    xl = [
        "acestep-v15-xl-turbo-Q8_0.gguf",
        "acestep-v15-xl-sft-Q8_0.gguf",
        "acestep-v15-xl-base-Q8_0.gguf",
        "acestep-v15-xl-turbo-Q4_K_M.gguf",
    ]
    with ModelHub() as hub:
        hub.add_set(DIT, "acestep-5Hz-lm-0.6B-Q8_0.gguf")
        for name in xl:
            hub.add(name, 4096)
            hub.advertise(name, size=3_020_000_000 if "Q4" in name else 5_310_000_000)

        async def main():
            node = await Node(cantor_home, env={"HF_ENDPOINT": hub.base_url}).start()
            try:
                async with node.client() as c:
                    return (await c.models(all=True))["models"]
            finally:
                await node.stop()

        models = {m["name"]: m for m in asyncio.run(main())}
    for name in xl:
        stem = name[: -len(".gguf")]
        dit = models[stem]["files"][0]
        assert dit["size"] == (3_020_000_000 if "Q4" in name else 5_310_000_000), stem
        assert models[stem]["display_name"].startswith("ACE-Step 1.5 XL")
        assert models[stem]["download_bytes"] > dit["size"]  # + its companions
    assert "acestep-v15-sft-Q8_0" not in models  # the hub does not list it


def test_a_path_is_taken_only_from_a_client_on_the_nodes_machine():
    from starlette.requests import Request

    from cantor_desktop.node.http_common import from_this_machine

    def request(client: str, server: str) -> Request:
        return Request(
            {
                "type": "http",
                "client": (client, 5000),
                "server": (server, 7823),
                "headers": [],
                "method": "POST",
                "path": "/v1/models/import",
            }
        )

    assert from_this_machine(request("127.0.0.1", "127.0.0.1"))
    assert from_this_machine(request("::1", "::1"))
    assert from_this_machine(request("192.168.1.20", "192.168.1.20"))  # its own address
    assert not from_this_machine(request("192.168.1.31", "192.168.1.20"))
    assert not from_this_machine(request("not-an-ip", "192.168.1.20"))
