"""`cantor adapters` and `cantor sing --adapter … --scale … --steps …` end to end: real CLI
processes through a real node (the running one, a private one, another machine's)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from cantor_desktop.system.selfexec import self_argv

from support.procs import free_port
from support.adapter_files import comfyui_file, peft_folder, sd_unet_file
from support.node import Node, write_config


def cantor(
    home: Path, *args: str, env: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        self_argv("cli") + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "CANTOR_HOME": str(home), **(env or {})},
    )


def _config_with_port(home: Path) -> int:
    port = free_port()
    write_config(home)
    with open(home / "node.toml", "a") as fh:
        fh.write(f"\n[node]\nport = {port}\n")
    return port


def test_adapters_add_list_sing_and_remove_through_the_running_node(cantor_home, tmp_path):
    port = _config_with_port(cantor_home)
    peft = peft_folder(tmp_path / "my-style")
    tape = comfyui_file(tmp_path / "tape-v2.safetensors")
    sd = sd_unet_file(tmp_path / "sdxl.safetensors")

    async def main():
        node = await Node(cantor_home, port=port).start()
        run = lambda *a: asyncio.to_thread(cantor, cantor_home, *a)  # noqa: E731
        try:
            out = {
                "empty": await run("adapters"),
                "peft": await run("adapters", "add", str(peft)),
                "tape": await run("adapters", "add", str(tape), "--name", "tape"),
                "clash": await run("adapters", "add", str(tape), "--name", "TAPE"),
                "sd": await run("adapters", "add", str(sd)),
                "list": await run("adapters"),
                "json": await run("adapters", "--json"),
                "sing": await run(
                    "sing",
                    "warm tape pop",
                    "--instrumental",
                    "--duration",
                    "10",
                    "--model",
                    "sketch",
                    "--adapter",
                    "tape",
                    "--scale",
                    "0.5",
                    "--steps",
                    "4",
                    "--guidance",
                    "1.5",
                    "--shift",
                    "2",
                    "--solver",
                    "sde",
                ),
                "unknown": await run("sing", "x", "--model", "sketch", "--adapter", "nope"),
                "lonely": await run("sing", "x", "--model", "sketch", "--scale", "1"),
                "solver": await run("sing", "x", "--model", "sketch", "--solver", "magic"),
                "rm": await run("adapters", "rm", "tape"),
                "rm again": await run("adapters", "rm", "tape"),
            }
            return out, node.proc.running
        finally:
            await node.stop()

    out, running = asyncio.run(main())
    assert running
    assert out["empty"].returncode == 0 and "No adapters yet" in out["empty"].stdout
    assert out["peft"].returncode == 0, out["peft"].stderr
    assert out["peft"].stdout.startswith("added my-style: made for ACE-Step 1.5 (2B DiT)")
    assert "--adapter my-style" in out["peft"].stdout
    assert out["tape"].returncode == 0, out["tape"].stderr
    assert out["clash"].returncode == 2 and "already installed" in out["clash"].stderr
    assert out["sd"].returncode == 2
    assert "made for sdxl_base_v1-0" in out["sd"].stderr and "refused" in out["sd"].stderr
    lines = out["list"].stdout.splitlines()
    assert lines[0].split() == ["NAME", "MADE", "FOR", "FORMAT", "SIZE", "RANK"]
    assert lines[1].startswith("my-style") and "PEFT" in lines[1]
    assert lines[2].startswith("tape ") and "COMFYUI" in lines[2] and lines[2].endswith("4")
    listed = json.loads(out["json"].stdout)
    assert [a["name"] for a in listed["adapters"]] == ["my-style", "tape"]
    # the song: every flag reached the engine's request
    assert out["sing"].returncode == 0, out["sing"].stderr
    audio = Path(out["sing"].stdout.strip())
    sidecar = json.loads(audio.with_suffix(".json").read_text("utf-8"))
    sent = sidecar["engine_request"]
    assert (
        sent["adapter"],
        sent["adapter_scale"],
        sent["inference_steps"],
        sent["guidance_scale"],
        sent["shift"],
        sent["solver"],
    ) == ("tape.safetensors", 0.5, 4, 1.5, 2.0, "sde")
    log = (cantor_home / "logs" / "engine-sketch.log").read_text("utf-8")
    assert "steps=4, guidance=1.5, shift=2.0" in log and "Adapter=tape.safetensors" in log
    assert out["unknown"].returncode == 2
    assert "adapter 'nope' is not installed; installed: my-style, tape" in out["unknown"].stderr
    assert out["lonely"].returncode == 2
    assert out["lonely"].stderr.strip() == "cantor sing: --scale: goes with an adapter"
    assert out["solver"].returncode == 2 and "invalid choice" in out["solver"].stderr
    assert out["rm"].returncode == 0 and out["rm"].stdout.startswith("removed tape, ")
    assert out["rm again"].returncode == 2
    assert "not installed; installed: my-style" in out["rm again"].stderr


def test_adapters_with_a_private_node_and_to_another_machines_node(cantor_home, tmp_path):
    """No node running: the CLI starts a private one for the call. ``--node URL`` of a node
    of another home: the file is uploaded into its models folder; a PEFT folder is not."""
    from test_node_library_routes import their_node

    _config_with_port(cantor_home)
    tape = comfyui_file(tmp_path / "tape.safetensors")
    peft = peft_folder(tmp_path / "my-style")
    added = cantor(cantor_home, "adapters", "add", str(tape))
    listed = cantor(cantor_home, "adapters", "--json")
    theirs = their_node(tmp_path)

    async def remote():
        await theirs.start()
        env = {"CANTOR_NODE_TOKEN": theirs.proc.token}
        run = lambda *a: asyncio.to_thread(cantor, cantor_home, *a, env=env)  # noqa: E731
        try:
            return (
                await run("adapters", "--node", theirs.url, "add", str(tape), "--name", "t2"),
                await run("adapters", "add", str(peft), "--node", theirs.url),
                await run("adapters", "--node", theirs.url),
            )
        finally:
            await theirs.stop()

    up, folder, their_list = asyncio.run(remote())
    assert added.returncode == 0, added.stderr
    assert [a["name"] for a in json.loads(listed.stdout)["adapters"]] == ["tape"]
    assert up.returncode == 0, up.stderr
    landed = theirs.home / "models" / "adapters" / "t2.safetensors"
    assert landed.read_bytes() == tape.read_bytes()
    assert folder.returncode == 2 and "only on the node's own machine" in folder.stderr
    assert their_list.returncode == 0 and their_list.stdout.startswith("NAME")
    assert "t2 " in their_list.stdout and "my-style" not in their_list.stdout
    assert not (cantor_home / "models" / "adapters" / "t2.safetensors").exists()
