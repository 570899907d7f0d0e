"""`pull` against a model hub on 127.0.0.1 (tests/support/hub.py): resume, hashes, tokens,
partial state, free space. Engine step skipped (no ensure_engine) except where noted."""

from __future__ import annotations

import asyncio
import os

import pytest

from cantor_desktop import config
from cantor_desktop.fetch import download as dl
from cantor_desktop.install import backends
from cantor_desktop.system import secrets
from cantor_desktop.models import library, pull
from support.hub import ModelHub

DIT = "acestep-v15-turbo-Q8_0.gguf"
TE = "Qwen3-Embedding-0.6B-Q8_0.gguf"
VAE = "vae-BF16.gguf"
LM = "acestep-5Hz-lm-0.6B-Q8_0.gguf"
SIZE = 256 * 1024


@pytest.fixture
def hub(monkeypatch):
    with ModelHub() as h:
        h.add_set(DIT, LM, size=SIZE)
        monkeypatch.setenv("HF_ENDPOINT", h.base_url)
        yield h


def run(coro):
    return asyncio.run(coro)


def family_file(name):
    return library.family_dir() / name


def test_pull_downloads_the_set_with_progress_and_resolves(hub):
    events = []
    files = run(pull.pull("acestep-v15-turbo", lm_size="0.6B", on_event=events.append))
    assert files.name == "acestep-v15-turbo-Q8_0"
    assert (files.dit, files.text_enc, files.vae, files.lm) == (DIT, TE, VAE, LM)
    assert files.models_dir == library.family_dir()
    for name in (DIT, TE, VAE, LM):
        p = family_file(name)
        assert p.is_file() and not p.is_symlink()
        assert p.read_bytes() == hub.files[name]
    plan = next(e for e in events if e.type == "plan")
    assert plan.total == 4 * SIZE and not plan.approximate
    assert {f["name"] for f in plan.files} == {DIT, TE, VAE, LM}
    done = [e for e in events if e.type == "file_done"]
    assert [e.verified for e in done] == [True] * 4
    assert done[-1].received == done[-1].total == 4 * SIZE
    assert events[-1].type == "done"
    model = library.find("acestep-v15-turbo-Q8_0", lm_size="0.6B")
    assert model.state == library.READY
    assert model.size_bytes == 4 * SIZE and model.download_bytes == 0
    assert all(f.verified for f in model.files)
    # a second pull has nothing to get
    events.clear()
    run(pull.pull("acestep-v15-turbo-Q8_0", lm_size="0.6B", on_event=events.append))
    assert next(e for e in events if e.type == "plan").total == 0
    assert not hub.cdn.requests_for(hub.cdn_path(DIT))[1:]


def test_cut_connection_resumes_to_identical_file(hub):
    hub.cdn.cut(hub.cdn_path(DIT), after=100_000)
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert family_file(DIT).read_bytes() == hub.files[DIT]
    ranges = [r.header("range") for r in hub.cdn.requests_for(hub.cdn_path(DIT))]
    assert ranges[0] is None and ranges[-1] == "bytes=100000-"


def test_wrong_hash_is_refused_and_never_ready(hub):
    hub.advertise(DIT, sha256="0" * 64)
    with pytest.raises(dl.HashMismatch):
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert not family_file(DIT).exists()
    model = library.find("acestep-v15-turbo", lm_size="0.6B")
    assert model.state != library.READY
    with pytest.raises(library.ModelNotReady):
        library.resolve("acestep-v15-turbo")


def test_corrupted_bytes_in_transit_are_refused(hub):
    hub.cdn.corrupt(hub.cdn_path(TE))
    with pytest.raises(dl.HashMismatch):
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B", retries=0))
    assert not family_file(TE).exists()
    assert library.find("acestep-v15-turbo", lm_size="0.6B").state != library.READY


def test_gated_file_needs_a_token(hub, monkeypatch):
    hub.gate(DIT, "hf_sesame")
    with pytest.raises(pull.NeedsToken) as err:
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert "cantor login" in str(err.value) and "HF_TOKEN" in str(err.value)
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(pull.NeedsToken):
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    monkeypatch.setenv("HF_TOKEN", "hf_sesame")
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert family_file(DIT).read_bytes() == hub.files[DIT]
    # the token went to the hub, which gates /resolve …
    resolved = hub.server.requests_for(hub.resolve_path(DIT))
    assert resolved[-1].status == 302 and resolved[-1].header("authorization") == "Bearer hf_sesame"
    # … and never to the CDN on another server it redirected to (which would refuse it)
    fetched = hub.cdn.requests_for(hub.cdn_path(DIT))
    assert fetched and all(r.status in (200, 206) for r in fetched)
    assert all(r.header("authorization") is None for r in hub.cdn.requests)


def test_keyring_token_is_used_when_no_env(hub):
    hub.gate(DIT, "hf_from_keyring")
    secrets.set_secret(secrets.HF_TOKEN, "hf_from_keyring")
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert family_file(DIT).is_file()


def saved(name):
    """Bytes of a model file on disk: the whole file, or its .part."""
    for p in (family_file(name), dl.part_path(family_file(name))):
        if p.exists():
            return p.stat().st_size
    return 0


def test_interrupted_pull_is_partial_then_resumes(hub):
    # the downloader writes in 1 MiB batches: a DiT of a few MiB leaves a real .part
    big = 3 * 1024 * 1024
    hub.add(DIT, size=big)
    hub.cdn.throttle(hub.cdn_path(DIT), 3_000_000, times=1)

    async def interrupted():
        got_bytes = asyncio.Event()

        def on_event(e):
            if e.type == "progress" and e.file == DIT and e.file_received > 1_300_000:
                got_bytes.set()

        task = asyncio.create_task(
            pull.pull("acestep-v15-turbo", lm_size="0.6B", on_event=on_event)
        )
        await asyncio.wait_for(got_bytes.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(interrupted())
    part = dl.part_path(family_file(DIT))
    assert part.exists() and 0 < part.stat().st_size < big
    assert not family_file(DIT).exists()
    model = library.find("acestep-v15-turbo", lm_size="0.6B")
    assert model.state == library.PARTIAL
    listed = {m.name: m for m in library.list_models(lm_size="0.6B")}
    assert listed["acestep-v15-turbo-Q8_0"].state == library.PARTIAL
    have = part.stat().st_size
    # the companions came at once, over the connections the DiT left free: what is missing
    # is the rest of the DiT and whatever of theirs had not arrived
    missing = big - have + sum(SIZE - saved(name) for name in (TE, VAE, LM))
    assert model.download_bytes == missing
    events = []
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B", on_event=events.append))
    assert next(e for e in events if e.type == "plan").total == missing
    assert family_file(DIT).read_bytes() == hub.files[DIT]
    assert library.find("acestep-v15-turbo", lm_size="0.6B").state == library.READY


def test_not_enough_disk_refused_before_first_byte(hub):
    hub.advertise(VAE, size=10**16)
    with pytest.raises(dl.NotEnoughSpace) as err:
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    assert "disk space" in str(err.value)
    assert hub.cdn.requests == []  # not one byte asked for
    assert not list(library.family_dir().glob("*.gguf*"))


def test_unknown_model_and_bad_lm_size(hub):
    with pytest.raises(pull.BadModelName) as err:
        run(pull.pull("acestep-v15-nope"))
    assert "known variants" in str(err.value)
    with pytest.raises(pull.BadModelName):
        run(pull.pull("acestep-v15-turbo", lm_size="3B"))


def test_hash_from_etag_when_tree_is_unreachable(hub, monkeypatch):
    # no tree API: the built-in catalogue (no sha256) answers; the CDN ETag gives the sha256
    hub.server.fail(f"/api/models/{hub.repo}/tree/main", 500, times=None)
    events = []
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B", on_event=events.append))
    plan = next(e for e in events if e.type == "plan")
    assert plan.approximate
    assert all(e.verified for e in events if e.type == "file_done")
    assert family_file(DIT).read_bytes() == hub.files[DIT]


def test_sketch_needs_nothing(hub):
    files = run(pull.pull("sketch"))
    assert files.builtin and files.name == "sketch"
    assert hub.server.requests == [] and hub.cdn.requests == []


def test_pull_fetches_an_engine_when_none_is_installed(hub, tmp_path, monkeypatch):
    """The engine step: a CPU-only machine, a manifest on 127.0.0.1 with a working CPU build
    (it runs the sketch engine): pull installs and trial-loads it after the model files."""
    from cantor_desktop.install import engine_store
    from support.fake_builds import BuildServer, fake_machine, working_script

    root, bin_dir = fake_machine(
        tmp_path / "machine", nvidia_driver=None, render=False, vulkan_loader=False
    )
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    with BuildServer(tmp_path / "srv") as builds:
        builds.add("cpu", builds.archive("cpu.tar.gz", working_script()))
        monkeypatch.setenv("CANTOR_MANIFEST_URL", builds.manifest_url)
        events = []
        files = run(
            pull.pull(
                "acestep-v15-turbo",
                lm_size="0.6B",
                on_event=events.append,
                ensure_engine=backends.ensure_engine,
            )
        )
    kinds = [e.type for e in events]
    assert kinds.index("engine") > max(i for i, k in enumerate(kinds) if k == "file_done")
    ready = [e for e in events if e.type == "engine" and (e.engine or {}).get("ready")]
    assert ready and ready[-1].engine["backend"] == "cpu"
    assert engine_store.installed("acestep", "cpu") is not None
    assert files.dit == DIT and events[-1].type == "done"
    assert [e.type for e in events].count("done") == 1
    done = events[-1]
    assert done.engine_ready is True and done.engine_error is None
    assert done.backend == "cpu" and done.version == "v0.1.1"


def offline_machine(tmp_path, monkeypatch, builds):
    """A CPU-only machine whose engine download fails (as without internet): the manifest
    names a build its server does not have. (A closed port works too, but the downloader's
    retries take 31 s.)"""
    from support.fake_builds import fake_machine, working_script

    root, bin_dir = fake_machine(
        tmp_path / "machine", nvidia_driver=None, render=False, vulkan_loader=False
    )
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    entry = builds.add("cpu", builds.archive("cpu.tar.gz", working_script()))
    entry["url"] = builds.server.url("/builds/gone.tar.gz")  # not served: 404
    builds.publish()
    monkeypatch.setenv("CANTOR_MANIFEST_URL", builds.manifest_url)


def test_model_is_ready_when_the_engine_cannot_be_fetched(hub, tmp_path, monkeypatch):
    """Files complete and verified, engine download impossible: the pull does not fail; its
    one ``done`` says the engine is not ready and why, and the model is listed as ready."""
    from cantor_desktop.install import engine_store
    from support.fake_builds import BuildServer

    with BuildServer(tmp_path / "srv") as builds:
        offline_machine(tmp_path, monkeypatch, builds)
        events = []
        files = run(
            pull.pull(
                "acestep-v15-turbo",
                lm_size="0.6B",
                on_event=events.append,
                ensure_engine=backends.ensure_engine,
            )
        )
    assert files.dit == DIT and files.lm == LM
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    done = events[-1]
    assert done.engine_ready is False
    assert done.engine_error.startswith(
        "No backend works on this machine: cpu: could not fetch acestep cpu"
    )
    assert "gone.tar.gz: HTTP 404" in done.engine_error
    assert done.engine_error.endswith("The built-in sketch engine still works")
    assert done.message.startswith("Model ready. No engine yet:")
    assert engine_store.installed("acestep", "cpu") is None
    model = library.find("acestep-v15-turbo", lm_size="0.6B")
    assert model.state == library.READY
    assert library.resolve("acestep-v15-turbo", lm_size="0.6B").dit == DIT


def test_cli_pull_offline_says_model_ready_no_engine_and_exits_1(
    hub, tmp_path, monkeypatch, cantor_home
):
    import subprocess

    from cantor_desktop.system.selfexec import self_argv
    from support.fake_builds import BuildServer

    with BuildServer(tmp_path / "srv") as builds:
        offline_machine(tmp_path, monkeypatch, builds)
        result = subprocess.run(
            self_argv("cli") + ["pull", "acestep-v15-turbo", "--lm-size", "0.6B"],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        helped = subprocess.run(
            self_argv("cli") + ["pull", "--help"], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1, result.stderr
    assert "Model ready. No engine yet: " in result.stderr
    assert "could not fetch" in result.stderr
    assert result.stderr.rstrip().endswith("Run `cantor backends --install` when you are online.")
    assert "Traceback" not in result.stderr
    assert library.find("acestep-v15-turbo", lm_size="0.6B").state == library.READY
    assert "Exit status" in helped.stdout and "no engine" in " ".join(helped.stdout.split())


def test_the_hub_gates_resolve_and_its_cdn_would_refuse_a_forwarded_token(hub):
    """The stand-in has teeth where huggingface.co has them: /resolve is the gate, the CDN is
    another origin whose signed URL must not come with the hub's token."""
    import httpx

    hub.gate(DIT, "hf_sesame")
    url = hub.base_url + hub.resolve_path(DIT)
    with httpx.Client(trust_env=False) as c:
        assert c.head(url).status_code == 401
        assert c.head(url, headers={"Authorization": "Bearer hf_wrong"}).status_code == 403
        hop = c.head(url, headers={"Authorization": "Bearer hf_sesame"})
        assert hop.status_code == 302
        assert hop.headers["x-linked-etag"] == f'"{hub.sha256(DIT)}"'
        cdn = hop.headers["location"]
        assert cdn.startswith(hub.cdn.base_url + "/") and hub.cdn.base_url != hub.base_url
        assert c.get(cdn).content == hub.files[DIT]  # signed URL alone
        assert c.get(cdn, headers={"Authorization": "Bearer hf_sesame"}).status_code == 400
        assert c.get(cdn.split("?")[0]).status_code == 403  # unsigned


def test_a_pull_shares_its_connections_and_the_next_file_takes_those_the_dit_leaves(hub):
    """downloads.connections is what the whole pull opens: the DiT's ranges hold both, and
    a companion's first request goes out only once the DiT has asked for its last range,
    on the connection its ranges leave free (not after its last byte, nor at once beside
    it)."""
    config.set_from_text("downloads.connections", "2")
    big = 40 * 1024 * 1024  # ranges of 8, 16 and 16 MiB: the last taken by the first done
    hub.add(DIT, size=big)
    run(pull.pull("acestep-v15-turbo", lm_size="0.6B"))
    for name in (DIT, TE, VAE, LM):
        assert family_file(name).read_bytes() == hub.files[name]
    paths = [r.path.split("?", 1)[0] for r in hub.cdn.requests]
    dit = [k for k, p in enumerate(paths) if p == hub.cdn_path(DIT)]
    others = [k for k, p in enumerate(paths) if p != hub.cdn_path(DIT)]
    assert len(dit) >= 3 and len(others) == 3  # the first answer, then ranges
    assert max(dit) < min(others)


def test_a_file_that_fails_starts_no_later_file(hub):
    """The DiT refused at its first answer (the hub offers another size than its list
    says), before it asked for its ranges: the pull fails with that, and the companions
    waiting their turn are not started."""
    hub.add(DIT, size=dl.CHUNK + 1024 * 1024)  # bigger than a chunk: ranges
    hub.advertise(DIT, size=dl.CHUNK + 1024 * 1024 + 1)
    events = []
    with pytest.raises(dl.DownloadError, match="expected"):
        run(pull.pull("acestep-v15-turbo", lm_size="0.6B", on_event=events.append))
    assert [e.file for e in events if e.type == "file_start"] == [DIT]
    assert not any(p.path.split("?", 1)[0] != hub.cdn_path(DIT) for p in hub.cdn.requests)
