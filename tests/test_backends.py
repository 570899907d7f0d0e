"""Backends end to end: a manifest server on 127.0.0.1 with test builds, simulated machines,
the real CLI in a child process, real engines trial-loaded."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cantor_desktop.install import backends, engine_store, manifest, trial
from cantor_desktop import config
from cantor_desktop.install.backends import BackendStatus, choose_default
from cantor_desktop.system.paths import paths
from support.fake_builds import (
    BuildServer,
    cuda_broken_script,
    fake_machine,
    fallback_script,
    gpu_script,
    never_ready_script,
    working_script,
)

CUDA_LINE = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"


@pytest.fixture
def nvidia(tmp_path, monkeypatch):
    """A simulated NVIDIA Linux machine (driver 550.54.14, render node, Vulkan loader)."""
    root, bin_dir = fake_machine(tmp_path / "machine")
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    return root


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """cuda12 broken (CUDA error), vulkan a GPU test engine owning Vulkan0, cpu the sketch
    engine; vulkan and cpu share one archive as in the real manifest."""
    with BuildServer(tmp_path / "srv") as srv:
        srv.cuda = srv.archive("cuda.tar.gz", cuda_broken_script(CUDA_LINE))
        srv.shared = srv.archive("vulkan.tar.gz", gpu_script(srv.engine_path, "CPU,Vulkan0"))
        srv.add("cuda12", srv.cuda)
        srv.add("vulkan", srv.shared)
        srv.add("cpu", srv.shared)
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        yield srv


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop", "backends", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_install_rejects_broken_cuda_and_keeps_vulkan(nvidia, builds):
    done = cli("--install")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rejected = next(i for i, ln in enumerate(lines) if ln.startswith("GPU backend rejected"))
    assert lines[rejected] == f"GPU backend rejected: {CUDA_LINE}"
    assert lines[rejected + 1] == "Falling back to vulkan."
    kept = next(i for i, ln in enumerate(lines) if ln.startswith("vulkan: works"))
    assert kept > rejected
    assert not any(ln.startswith("cpu:") for ln in lines[kept:])  # stopped at the first
    st = json.loads(cli("--json").stdout)
    states = {b["name"]: b["state"] for b in st["backends"]}
    assert states == {
        "cuda12": "rejected",
        "metal": "unsupported",
        "vulkan": "installed",
        "cpu": "installable",
    }
    cuda = next(b for b in st["backends"] if b["name"] == "cuda12")
    assert cuda["message"].startswith(f"rejected: {CUDA_LINE} (trial load of v0.1.1, ")
    assert cuda["trial"]["state"] == "rejected" and cuda["trial"]["evidence"]
    assert st["default"] == "vulkan" and st["pinned"] is None  # the auto rule
    assert engine_store.installed("acestep", "cuda12") is None  # a rejected build is not kept
    assert "cuda12  rejected v0.1.1" in cli().stdout


def test_use_cuda_fails_and_node_toml_is_byte_identical(nvidia, builds):
    toml = paths().config_file
    toml.parent.mkdir(parents=True, exist_ok=True)
    toml.write_bytes(
        b'# my settings\n[backends]\nacestep = "auto"  # keep\n\n[node]\nport = 7900\n'
    )
    before = toml.read_bytes()
    done = cli("--use", "cuda12")
    assert done.returncode == 1
    assert f"GPU backend rejected: {CUDA_LINE}" in done.stderr
    assert "node.toml is unchanged" in done.stderr
    assert toml.read_bytes() == before


def test_use_vulkan_pins_after_a_working_trial(nvidia, builds):
    done = cli("--use", "vulkan")
    assert done.returncode == 0, done.stderr
    assert "Saved: vulkan" in done.stdout
    assert config.load().pinned_backend("acestep") == "vulkan"
    st = json.loads(cli("--json").stdout)
    assert st["pinned"] == "vulkan" and st["default"] == "vulkan"
    assert next(b for b in st["backends"] if b["name"] == "vulkan")["pinned"] is True
    human = cli().stdout
    assert "vulkan  installed, pinned, default v0.1.1" in human
    assert "evidence: nvidia-smi: NVIDIA GeForce RTX 4070, driver 550.54.14, 12282 MiB" in human
    assert "evidence: /dev/dri/renderD128 (driver nvidia, NVIDIA)" in human
    assert "evidence: trial load: came up on Vulkan0 (" in human


def test_auto_rule_prefers_installed_later_backend(nvidia, builds):
    m = asyncio.run(manifest.fetch())
    asyncio.run(engine_store.install(m.best("acestep", "cpu", "linux", "x86_64")))
    st = backends.status("acestep", manifest=m)
    assert [(b.name, b.state) for b in st.backends] == [
        ("cuda12", "installable"),
        ("metal", "unsupported"),
        ("vulkan", "installable"),
        ("cpu", "installed"),
    ]
    assert st.default == "cpu"
    config.update({"backends.acestep": "vulkan"})
    assert backends.default_backend("acestep", manifest=m) == "vulkan"  # a pin wins


def test_choose_default_rule():
    def s(*states):
        return [BackendStatus(n, st) for n, st in zip(config.BACKENDS, states)]

    assert (
        choose_default(s("installable", "unsupported", "installable", "installable"), None)
        == "cuda12"
    )
    assert (
        choose_default(s("installable", "unsupported", "update_available", "installed"), None)
        == "vulkan"
    )
    assert choose_default(s("installed", "unsupported", "installed", "installed"), None) == "cuda12"
    assert (
        choose_default(s("unsupported", "unsupported", "unsupported", "installable"), None) == "cpu"
    )
    assert (
        choose_default(s("unsupported", "unsupported", "unsupported", "unsupported"), None) is None
    )
    assert choose_default(s("installable", "unsupported", "installed", "installed"), "cpu") == "cpu"


def test_shared_download_fetched_once(nvidia, builds):
    assert cli("--use", "vulkan").returncode == 0
    assert cli("--use", "cpu").returncode == 0
    assert builds.downloads(builds.shared) == 1
    assert not list((paths().cache_dir / "engines").glob("*.tar.gz"))  # dropped when done


def test_wrong_hash_refused(nvidia, tmp_path, monkeypatch):
    with BuildServer(tmp_path / "srv2") as srv:
        srv.add("cpu", srv.archive("cpu.tar.gz", working_script()), sha256="1" * 64)
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        done = cli("--use", "cpu")
    assert done.returncode == 1 and "sha256" in done.stderr.lower()
    # a build that never arrived was not rejected: it says it could not be fetched
    assert "cpu: could not fetch" in done.stderr and "rejected" not in done.stderr
    assert engine_store.installed("acestep", "cpu") is None
    assert config.load().pinned_backend("acestep") is None


def test_never_ready_and_silent_fallback_are_rejected(nvidia, tmp_path, monkeypatch):
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "3")
    with BuildServer(tmp_path / "srv2") as srv:
        srv.add("cuda12", srv.archive("cuda.tar.gz", never_ready_script()))
        srv.add("vulkan", srv.archive("vk.tar.gz", fallback_script()))
        srv.add("cpu", srv.archive("cpu.tar.gz", working_script()))
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        events: list[backends.BackendEvent] = []
        kept = asyncio.run(backends.install("acestep", events.append))
    rejected = [e.message for e in events if e.kind == "rejected"]
    assert rejected[0].startswith("GPU backend rejected: timed out answering /health")
    assert rejected[1] == ("GPU backend rejected: came up on CPU, not Vulkan0 (a silent fall-back)")
    assert [e.message for e in events if e.kind == "fallback"] == [
        "Falling back to vulkan.",
        "Falling back to cpu.",
    ]
    assert kept.backend == "cpu" and kept.source == "store"
    assert [e.kind for e in events if e.kind in ("rejected", "kept")] == [
        "rejected",
        "rejected",
        "kept",
    ]


def test_no_build_for_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("CANTOR_HW_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("CANTOR_HW_OS", "macos")
    monkeypatch.setenv("CANTOR_HW_ARCH", "arm64")
    monkeypatch.setenv("CANTOR_MANIFEST_URL", "http://127.0.0.1:9/offline.json")  # builtin
    st = json.loads(cli("--json").stdout)
    metal = next(b for b in st["backends"] if b["name"] == "metal")
    assert metal["state"] == "unsupported"
    # no engine of any kind is published for the Mac: never send the user to a CPU build
    assert metal["message"] == (
        "No build for this machine: neither a metal nor a cpu engine is "
        "published for macos arm64. The built-in sketch engine still "
        "works, and so does an ace-server you build yourself: cantor "
        "config set engines.acestep.path /path/to/ace-server"
    )
    cpu = next(b for b in st["backends"] if b["name"] == "cpu")
    assert "no cpu engine is published for macos arm64" in cpu["message"]
    assert "always" not in json.dumps(st)
    assert metal["evidence"] == ["macOS on Apple Silicon (arm64)"]
    assert st["default"] is None
    done = cli("--use", "metal")
    assert done.returncode == 1 and "No build for this machine" in done.stderr


def test_user_supplied_build_never_replaced(nvidia, builds, tmp_path):
    exe = tmp_path / "my" / "ace-server"
    exe.parent.mkdir()
    exe.write_bytes(working_script())
    exe.chmod(0o755)
    before = exe.read_bytes()
    config.update({"engines.acestep.path": str(exe)})
    events: list[backends.BackendEvent] = []
    kept = asyncio.run(backends.install("acestep", events.append))
    assert kept.source == "user" and kept.backend == "cpu"  # the sketch has only the CPU
    upd = cli("--update")
    assert upd.returncode == 0 and "never replaces it" in upd.stdout
    assert builds.downloads(builds.cuda) == builds.downloads(builds.shared) == 0
    assert exe.read_bytes() == before
    assert engine_store.inspect("acestep", "cpu").versions == []  # nothing in the store
    # it was tried on each backend and counts only where it loaded
    rejected = [e.message for e in events if e.kind == "rejected"]
    assert rejected[0].startswith("GPU backend rejected: ")
    assert "GGML_BACKEND=CUDA0" in rejected[0] and "GGML_BACKEND=Vulkan0" in rejected[1]
    assert events[-1].message.startswith("cpu: works — kept (your build)")
    st = json.loads(cli("--json").stdout)
    states = {b["name"]: b["state"] for b in st["backends"]}
    assert states == {
        "cuda12": "rejected",
        "metal": "unsupported",
        "vulkan": "rejected",
        "cpu": "installed",
    }
    assert st["default"] == "cpu"


def test_a_user_build_untried_on_a_backend_is_trial_loaded_before_use(nvidia, tmp_path):
    """A CPU-only build of the user's on an NVIDIA machine never becomes cuda12: the node
    tries it there first, records the rejection and takes the next backend that loads."""
    exe = tmp_path / "my" / "ace-server"
    exe.parent.mkdir()
    exe.write_bytes(working_script())
    exe.chmod(0o755)
    config.update({"engines.acestep.path": str(exe)})
    st = backends.status("acestep")
    cuda = st.backend("cuda12")
    assert cuda.state == "installed" and "Not trial-loaded on CUDA yet" in cuda.message
    events: list[backends.BackendEvent] = []
    build = asyncio.run(backends.engine_for("acestep", on_event=events.append))
    assert build.backend == "cpu" and build.source == "user"
    assert build.env["GGML_BACKEND"] == "CPU"
    assert [e.message.split(" on ")[-1] for e in events if e.kind == "trial"] == [
        "CUDA0 …",
        "Vulkan0 …",
        "CPU …",
    ]
    st = backends.status("acestep")
    assert [st.backend(n).state for n in ("cuda12", "vulkan", "cpu")] == [
        "rejected",
        "rejected",
        "installed",
    ]
    assert st.default == "cpu"
    assert st.backend("cuda12").message.startswith("rejected: ")
    # the records hold: the next node start tries nothing
    events.clear()
    assert asyncio.run(backends.engine_for("acestep", on_event=events.append)).backend == "cpu"
    assert not events
    # pinned to a backend it was rejected on: the node says so instead of running it
    config.update({"backends.acestep": "cuda12"})
    with pytest.raises(
        backends.BackendError,
        match=r"cuda12 engine \(pinned in node.toml\) "
        r"was rejected: ",
    ):
        asyncio.run(backends.engine_for("acestep"))


def test_a_rejected_backend_is_tried_again_when_its_evidence_changes(nvidia, builds):
    assert cli("--install").returncode == 0
    assert backends.status("acestep").backend("cuda12").state == "rejected"
    # a new driver: the record no longer holds; the auto rule may pick cuda12 again
    smi = next(p for p in os.environ["PATH"].split(os.pathsep) if (Path(p) / "nvidia-smi").exists())
    (Path(smi) / "nvidia-smi").write_text(
        "#!/bin/sh\necho '0, NVIDIA GeForce RTX 4070, 560.10.01, 12282, 8.9'\n"
    )
    assert backends.status("acestep").backend("cuda12").state == "installable"


def test_use_never_names_a_backend_that_is_not_installed_as_in_use(nvidia, builds):
    done = cli("--use", "cuda12")
    assert done.returncode == 1
    assert "node keeps using" not in done.stderr
    assert "no engine backend is installed and working here yet" in done.stderr
    assert cli("--use", "vulkan").returncode == 0
    done = cli("--use", "cuda12")
    assert "node.toml is unchanged; the node keeps using vulkan" in done.stderr


MISSING_LIB = (
    "ace-server: error while loading shared libraries: libggml-base.so.0: cannot "
    "open shared object file: No such file or directory"
)


def missing_library_script() -> bytes:
    return f"#!/bin/sh\necho '{MISSING_LIB}' >&2\nexit 127\n".encode()


def test_update_stages_a_newer_build_and_a_broken_one_never_takes_over(nvidia, builds):
    assert cli("--use", "cpu").returncode == 0
    new = builds.archive("cpu2.tar.gz", missing_library_script())  # fails any trial
    builds.add("cpu", new, version="v0.2.0")
    st = json.loads(cli("--json").stdout)
    assert next(b for b in st["backends"] if b["name"] == "cpu")["state"] == "installed"
    asyncio.run(manifest.fetch())  # status reads the last fetched manifest
    st = json.loads(cli("--json").stdout)
    cpu = next(b for b in st["backends"] if b["name"] == "cpu")
    assert cpu["state"] == "update_available" and "--update" in cpu["message"]
    done = cli("--update")
    assert done.returncode == 0, done.stderr
    assert "v0.2.0 fetched and verified" in done.stdout and "next start" in done.stdout
    # fetched, not loaded: staged; the working build stays current
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    assert engine_store.staged("acestep", "cpu").version == "v0.2.0"
    cpu = backends.status("acestep").backend("cpu")
    assert cpu.state == "installed" and cpu.staged == "v0.2.0"
    assert "v0.2.0 is staged" in cpu.message
    # the node's start: the staged build is trial-loaded before it takes over, and fails
    told = asyncio.run(backends.settle_staged("acestep"))
    rejected = [e.message for e in told if e.kind == "rejected"]
    assert rejected == [
        f"cpu: the update to v0.2.0 was rejected: {MISSING_LIB}. v0.1.1 "
        f"stays in use; --update will not offer v0.2.0 again."
    ]
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    assert engine_store.staged("acestep", "cpu") is None
    cpu = backends.status("acestep").backend("cpu")
    assert cpu.state == "installed"
    assert (
        f"The update to v0.2.0 was rejected here and is not offered again: {MISSING_LIB}"
        in cpu.message
    )
    again = cli("--update")
    assert again.returncode == 0 and "v0.2.0 was rejected here and is not offered" in again.stdout
    assert builds.downloads(new) == 1
    # --use cpu keeps the working build and says nothing of switching
    done = cli("--use", "cpu")
    assert done.returncode == 0 and "Saved: cpu" in done.stdout
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    assert builds.downloads(new) == 1


def test_a_staged_build_that_works_takes_over_and_rollback_returns(nvidia, builds):
    assert cli("--use", "cpu").returncode == 0
    builds.add("cpu", builds.archive("cpu2.tar.gz", working_script()), version="v0.2.0")
    assert cli("--update").returncode == 0
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    told = asyncio.run(backends.settle_staged("acestep"))
    assert [e.kind for e in told] == ["trial", "updated"]
    assert "v0.2.0 works on CPU and is now in use (was v0.1.1;" in told[-1].message
    assert engine_store.installed("acestep", "cpu").version == "v0.2.0"
    done = cli("--rollback")
    assert done.returncode == 0, done.stderr
    assert "cpu: back to v0.1.1 (was v0.2.0)" in done.stdout
    assert engine_store.installed("acestep", "cpu").version == "v0.1.1"
    # a staged update is dropped by --rollback without ever running
    assert cli("--update").returncode == 0
    assert engine_store.staged("acestep", "cpu") is not None
    done = cli("--rollback")
    assert "the staged v0.2.0 is dropped; v0.1.1 stays in use" in done.stdout
    assert engine_store.staged("acestep", "cpu") is None


def test_rollback_with_nothing_to_return_to(nvidia):
    done = cli("--rollback")
    assert done.returncode == 1 and "nothing to roll back" in done.stderr


def test_keep_loaded_saved(nvidia):
    done = cli("--keep-loaded", "on")
    assert done.returncode == 0
    assert "applies from the next song" in done.stdout and "restart" in done.stdout
    assert config.load().get("node.keep_loaded") is True
    assert json.loads(cli("--json").stdout)["keep_loaded"] is True
    assert cli("--keep-loaded", "maybe").returncode == 2
    assert cli("--use", "rocm").returncode == 2


def test_ensure_engine_installs_when_nothing_is(nvidia, builds):
    inst = asyncio.run(backends.ensure_engine("acestep"))
    assert inst.backend == "vulkan"
    again = asyncio.run(backends.ensure_engine("acestep"))
    assert again.argv == inst.argv and builds.downloads(builds.shared) == 1


def test_trial_reports_cuda_init_failure(tmp_path):
    script = tmp_path / "ace-server"
    script.write_bytes(
        cuda_broken_script(
            "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected"
        )
    )
    script.chmod(0o755)
    build = engine_store.InstalledBuild(
        "acestep", "cuda12", "t", [str(script)], {"GGML_BACKEND": "CUDA0"}, script
    )
    r = asyncio.run(trial.trial_load(build, "cuda12", timeout=10))
    assert not r.ok and r.reason.startswith("ggml_cuda_init: failed to initialize CUDA")


def test_trial_exit_without_device_line(tmp_path):
    script = tmp_path / "ace-server"
    script.write_text("#!/bin/sh\necho 'starting up' >&2\nexit 3\n")
    script.chmod(0o755)
    build = engine_store.InstalledBuild("acestep", "cpu", "t", [str(script)], {}, script)
    # what is checked is that every probe was tried: a deadline that never comes first (25
    # processes: seconds alone, far longer on a loaded machine); it ends at the 25th
    r = asyncio.run(trial.trial_load(build, "cpu", timeout=250))
    assert not r.ok and r.exit_code == 3 and r.probes == trial.MAX_PROBES
    assert r.reason == (
        "exited (exit code 3) before initialising a device (last line: "
        f"starting up); the same in all {trial.MAX_PROBES} tries"
    )


def test_sketch_build_trial_loads():
    build = backends.sketch_build()
    assert build.source == "sketch" and build.env == {}
    r = asyncio.run(trial.trial_load(build, "cpu", timeout=20))
    assert r.ok and r.device == "CPU"


def test_ensure_engine_for_a_named_backend(nvidia, builds):
    events: list[backends.BackendEvent] = []
    with pytest.raises(backends.BackendError, match="GPU backend rejected"):
        asyncio.run(backends.ensure_engine("acestep", "cuda12", on_event=events.append))
    assert events[-1].kind == "rejected" and events[-1].to_dict()["backend"] == "cuda12"
    inst = asyncio.run(backends.ensure_engine("acestep", backend="cpu"))
    assert inst.backend == "cpu" and config.load().pinned_backend("acestep") is None


def test_trial_ignores_start_up_warnings_when_the_device_comes_up(tmp_path):
    """A bundle that warns about another GPU library at start still works on its device;
    a CUDA init failure at start becomes the reason when the device then fails."""
    engine = tmp_path / "gpu_engine.py"
    from support.fake_builds import GPU_ENGINE

    engine.write_text(GPU_ENGINE)
    script = tmp_path / "ace-server"
    script.write_bytes(
        b"#!/bin/sh\necho 'ggml_vulkan: failed to initialize Vulkan: no device "
        b"found' >&2\n" + gpu_script(engine, "CPU,CUDA0").split(b"\n", 1)[1]
    )
    script.chmod(0o755)
    build = engine_store.InstalledBuild(
        "acestep", "cuda12", "t", [str(script)], {"GGML_BACKEND": "CUDA0"}, script
    )
    r = asyncio.run(trial.trial_load(build, "cuda12", timeout=15))
    assert r.ok and r.device == "CUDA0", r.reason
    build.env = {"GGML_BACKEND": "Vulkan0"}
    r = asyncio.run(trial.trial_load(build, "vulkan", timeout=15))
    assert not r.ok and r.reason.startswith("ggml_vulkan: failed to initialize Vulkan")


# -- a software Vulkan device (Mesa's llvmpipe): named, never chosen, usable on request -----

LLVMPIPE = "llvmpipe (LLVM 15.0.6, 256 bits)"


@pytest.fixture
def llvmpipe_only(tmp_path, monkeypatch):
    """A machine whose only Vulkan device is llvmpipe (vulkaninfo says its type is CPU), no
    GPU, the Vulkan loader installed; the builds: vulkan a test engine whose Vulkan0 is that
    software device (hidden unless named), cpu the sketch engine."""
    root, bin_dir = fake_machine(tmp_path / "machine", nvidia_driver=None, render=False)
    tool = bin_dir / "vulkaninfo"
    tool.write_text(
        '#!/bin/sh\n[ "$1" = --summary ] || exit 2\n'
        "echo 'Devices:'\necho '========'\necho 'GPU0:'\n"
        "echo '\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU'\n"
        f"echo '\tdeviceName         = {LLVMPIPE}'\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("CANTOR_HW_ROOT", str(root))
    monkeypatch.setenv("CANTOR_HW_OS", "linux")
    monkeypatch.setenv("CANTOR_HW_ARCH", "x86_64")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CANTOR_TRIAL_TIMEOUT", "20")
    with BuildServer(tmp_path / "srv") as srv:
        vulkan = srv.archive(
            "vulkan.tar.gz", gpu_script(srv.engine_path, "CPU,Vulkan0", software=LLVMPIPE)
        )
        srv.add("vulkan", vulkan)
        srv.add("cpu", srv.archive("cpu.tar.gz", working_script()))
        monkeypatch.setenv("CANTOR_MANIFEST_URL", srv.manifest_url)
        yield srv


def test_a_software_vulkan_device_is_named_and_never_chosen_by_install(llvmpipe_only):
    st = json.loads(cli("--json").stdout)
    vulkan = next(b for b in st["backends"] if b["name"] == "vulkan")
    assert vulkan["state"] == "unsupported" and vulkan["software"] == LLVMPIPE
    assert "a software device" in vulkan["message"] and "--use vulkan" in vulkan["message"]
    assert (
        f"vulkaninfo: {LLVMPIPE} (a software device: it computes on the CPU)"
        in (vulkan["evidence"])
    )
    done = cli("--install")
    assert done.returncode == 0, done.stderr
    assert "cpu: works" in done.stdout and "vulkan: works" not in done.stdout
    assert engine_store.installed("acestep", "vulkan") is None  # never fetched
    assert json.loads(cli("--json").stdout)["default"] == "cpu"


def test_use_vulkan_on_a_software_device_works_and_says_what_it_is(llvmpipe_only):
    """ggml hides a CPU-type Vulkan device unless GGML_VK_VISIBLE_DEVICES names it: the
    trial names it (without that the engine finds no Vulkan device and is rejected), the
    node's engine is started the same way, and every status says it is a software device."""
    done = cli("--use", "vulkan")
    assert done.returncode == 0, done.stderr
    assert f"vulkan here is {LLVMPIPE}, a software device" in done.stdout
    assert "Saved: vulkan" in done.stdout
    st = json.loads(cli("--json").stdout)
    vulkan = next(b for b in st["backends"] if b["name"] == "vulkan")
    assert st["default"] == "vulkan" and vulkan["state"] == "installed"
    assert vulkan["trial"]["software"] is True and vulkan["trial"]["device_name"] == LLVMPIPE
    assert f"trial load: came up on Vulkan0 ({LLVMPIPE}, a software device)" in (
        " ".join(vulkan["evidence"])
    )
    build = asyncio.run(backends.engine_for("acestep"))
    assert build.backend == "vulkan" and build.env["GGML_VK_VISIBLE_DEVICES"] == "0"
    # the same build without the device named: no Vulkan device, as on the real engine
    bare = asyncio.run(trial.trial_load(engine_store.installed("acestep", "vulkan"), "vulkan"))
    assert not bare.ok and "Vulkan0 not found" in bare.reason
