"""`cantor pull`, `cantor models`, `cantor login` as a user runs them (hub on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cantor_desktop.cli.main import main
from cantor_desktop.fetch.download import part_path
from cantor_desktop.models import library
from support.hub import ModelHub

DIT = "acestep-v15-turbo-Q8_0.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"


@pytest.fixture
def hub(monkeypatch):
    with ModelHub() as h:
        h.add_set(DIT, LM, size=128 * 1024)
        monkeypatch.setenv("HF_ENDPOINT", h.base_url)
        yield h


def test_pull_then_list_json_then_rm(hub, capsys):
    assert main(["pull", "acestep-v15-turbo", "--lm-size", "0.6B", "--no-engine"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[1]
    assert first.startswith("acestep-v15-turbo-Q8_0: 512.0 KiB to download (4 files)")
    assert out.count("sha256 verified") == 4 and "is ready" in out
    assert main(["models", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["sketch"]["state"] == "ready"
    turbo = listed["acestep-v15-turbo-Q8_0"]
    assert turbo["family"] == "acestep" and turbo["size_bytes"] == 4 * 128 * 1024
    assert {f["kind"] for f in turbo["files"]} == {"dit", "text_enc", "vae", "lm"}
    assert turbo["state"] in ("ready", "missing companion")  # LM size follows node.toml
    assert main(["models"]) == 0
    assert "acestep-v15-turbo-Q8_0" in capsys.readouterr().out
    assert main(["models", "rm", "acestep-v15-turbo"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not list(library.family_dir().glob("*.gguf"))
    assert main(["models", "rm", "acestep-v15-turbo"]) == 2


def test_pull_exit_codes(hub, capsys):
    assert main(["pull", "acestep-v15-nope", "--no-engine"]) == 2
    hub.gate(DIT, "hf_x")
    assert main(["pull", "acestep-v15-turbo", "--lm-size", "0.6B", "--no-engine"]) == 1
    assert "needs a Hugging Face token" in capsys.readouterr().err


def test_import_and_verify(tmp_path, capsys):
    from cantor_desktop.models import gguf

    gguf.write_header_only(tmp_path / "a.gguf", gguf.ARCH_DIT)
    gguf.write_header_only(tmp_path / "b.gguf", "llama")
    assert main(["models", "import", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    adopted, skipped = out.splitlines()
    assert adopted == f"dit      {tmp_path / 'a.gguf'}"
    assert skipped.startswith(f"skipped  {tmp_path / 'b.gguf'}: ")
    assert "llama" in skipped  # why: not an ACE-Step architecture
    assert main(["models", "import", str(tmp_path / "missing")]) == 2
    assert main(["models", "verify"]) == 0
    assert "unverified" in capsys.readouterr().out


def test_login_status_logout(monkeypatch, capsys):
    assert main(["login", "--token", "hf_0123456789"]) == 0
    assert main(["login", "--status"]) == 0
    assert "stored in the keyring" in capsys.readouterr().out
    assert main(["login", "--token", "   "]) == 2
    assert main(["login", "--logout"]) == 0
    assert main(["login", "--status"]) == 0
    assert "no Hugging Face token" in capsys.readouterr().out


def test_ctrl_c_keeps_part_and_next_pull_resumes(hub, cantor_home):
    big = 4 * 1024 * 1024
    hub.add(DIT, size=big)
    hub.cdn.throttle(hub.cdn_path(DIT), 2_000_000, times=1)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cantor_desktop",
            "pull",
            "acestep-v15-turbo",
            "--lm-size",
            "0.6B",
            "--no-engine",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    part = part_path(library.family_dir() / DIT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (part.exists() and part.stat().st_size > 0):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, (out, err)
    assert "partial files are kept" in err
    assert part.exists() and 0 < part.stat().st_size < big
    have = part.stat().st_size
    assert library.find("acestep-v15-turbo", lm_size="0.6B").state == library.PARTIAL
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cantor_desktop",
            "pull",
            "acestep-v15-turbo",
            "--lm-size",
            "0.6B",
            "--no-engine",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "(resuming)" in done.stdout
    assert (library.family_dir() / DIT).read_bytes() == hub.files[DIT]
    assert hub.cdn.requests_for(hub.cdn_path(DIT))[-1].header("range") == f"bytes={have}-"


def test_models_all_lists_what_can_be_pulled_besides_what_is_here(hub, capsys):
    from cantor_desktop.models import catalogue

    pullable = {e.name.removesuffix(".gguf") for e in catalogue.load().dits()}
    assert len(pullable) >= 3  # the built-in catalogue: nothing fetched yet
    assert main(["models", "--json"]) == 0
    assert [m["name"] for m in json.loads(capsys.readouterr().out)] == ["sketch"]
    assert main(["models", "--all", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"sketch"} | pullable
    for name in pullable:
        assert listed[name]["state"] == library.NOT_DOWNLOADED, listed[name]
        assert listed[name]["size_bytes"] == 0 and listed[name]["download_bytes"] > 0
    # the table: without --all it says how to see the rest; with it, the rest is there
    assert main(["models"]) == 0
    plain = capsys.readouterr().out
    assert "`cantor models --all` lists every model you can pull." in plain
    assert not any(line.split()[0] in pullable for line in plain.splitlines() if line.strip())
    assert main(["models", "--all"]) == 0
    table = capsys.readouterr().out
    assert "--all` lists" not in table
    rows = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    for name in pullable:
        assert library.NOT_DOWNLOADED in rows[name], table
    # one pulled: listed with or without --all, once; the pull read the hub's live file
    # list, so the catalogue is now what this hub has
    assert main(["pull", "acestep-v15-turbo", "--lm-size", "0.6B", "--no-engine"]) == 0
    capsys.readouterr()
    assert main(["models", "--json"]) == 0
    here = [m["name"] for m in json.loads(capsys.readouterr().out)]
    assert here == ["sketch", "acestep-v15-turbo-Q8_0"]
    live = {e.name.removesuffix(".gguf") for e in catalogue.load().dits()}
    assert catalogue.load().source != "builtin" and live == {"acestep-v15-turbo-Q8_0"}
    assert main(["models", "--all", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in listed] == ["sketch", "acestep-v15-turbo-Q8_0"]
    assert listed[1]["state"] != library.NOT_DOWNLOADED and listed[1]["size_bytes"] > 0
