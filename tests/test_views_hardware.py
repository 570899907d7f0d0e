"""Hardware & Backends and the readiness banner without Qt: each backend row's words and
offer, an action followed from its events, and the next step the banner offers."""

from __future__ import annotations

from cantor_desktop.views.hardware import (
    NEXT,
    HardwareViewModel,
    backend_rows,
    cell_text,
    machine_text,
    row_offer,
)
from cantor_desktop.views.readiness import NEEDS_DOWNLOAD, NEEDS_SETUP, READY, banner

SYSTEM = {
    "hardware": {
        "os": "linux",
        "arch": "x86_64",
        "ram_bytes": 16 * 1024**3,
        "backends": {"cpu": {"supported": True, "evidence": ["AVX2"]}},
    },
    "families": {
        "acestep": {
            "default": "cpu",
            "pinned": "cpu",
            "backends": [{"name": "cpu", "state": "installed", "installed": True, "version": "1"}],
        }
    },
}


def test_each_backend_row_says_its_state_and_offers_what_it_can():
    cpu = {r["name"]: r for r in backend_rows(SYSTEM)}["cpu"]
    assert cell_text(cpu) == ("cpu  (pinned)", "installed 1", "AVX2", "AVX2")
    assert row_offer(cpu) == ("Unpin (auto)", "", None, True, True)
    unknown = {r["name"]: r for r in backend_rows({})}["cuda12"]
    assert cell_text(unknown)[1:3] == ("unknown", "waiting for the node")
    rejected = {**cpu, "pinned": False, "state": "rejected", "reason": "no GPU", "installed": False}
    assert cell_text(rejected)[2] == "no GPU"
    assert row_offer(rejected)[:3] == (
        "Try again",
        "Fetch this backend again, trial-load it, and pin it if it works",
        "cpu",
    )
    fresh = {**rejected, "state": "installable", "supported": True}
    assert row_offer(fresh)[0] == "Install && use" and not row_offer(fresh)[4]
    assert machine_text({}) == "Waiting for the node to describe this machine…"
    assert "Memory: 16.0 GiB" in machine_text(SYSTEM) and "GPUs: none found" in machine_text(SYSTEM)


def test_an_action_is_followed_from_its_events_to_its_end():
    vm = HardwareViewModel()
    assert vm.start("find", None, "backend:find:") == "Finding the best backend…"
    assert vm.running_key == "backend:find:" and vm.running_what == "find the best backend"
    step = vm.event({"backend": "cpu", "kind": "skipped", "message": "no GPU", "progress": 0.5}, [])
    assert step.lines == ["– cpu: no GPU"] and step.progress == 500
    quiet = vm.event({"kind": "download", "progress": 0.4, "message": "fetching"}, [])
    assert quiet.lines == [] and quiet.progress == 400  # a download's steps: the bar only
    done = vm.event({"state": "done"}, [])
    assert done.ended and done.lines == ["Done.", NEXT] and vm.running_key is None
    vm.start("use", "cuda12", "k")
    assert vm.event(
        {"state": "done"}, [{"name": "acestep-v15-turbo-Q8_0", "state": "ready"}]
    ).lines == ["Done."]
    vm.start("use", None, "k")
    failed = vm.event({"state": "failed", "error": "the node went away"}, [])
    assert failed.lines == ["Failed."] and failed.failed == "the node went away"
    assert not failed.scroll and done.scroll and step.scroll  # the log keeps its place
    assert vm.running_what == "unpin the backend"
    assert vm.event({"state": "cancelled"}, []).lines == ["Cancelled."]
    assert HardwareViewModel.what("update") == "update the backends"


def test_the_banner_offers_the_next_step():
    turbo = {"name": "acestep-v15-turbo-Q8_0", "state": "not downloaded", "download_bytes": 2**30}
    setup = banner({}, [turbo])
    assert setup.state == NEEDS_SETUP and setup.set_up is not None
    assert setup.set_up.endswith("then download a model (1.0 GiB)")
    download = banner(SYSTEM, [turbo])
    assert (
        download.state == NEEDS_DOWNLOAD
        and download.set_up == "Download an ACE-Step model (1.0 GiB)"
    )
    ready = banner(SYSTEM, [{**turbo, "state": "ready"}])
    assert ready.state == READY and ready.set_up is None and ready.title == "Cantor is ready"


def test_a_measured_speed_and_a_software_device_are_read_first():
    """What this machine measured (node's backends status: measured, software) leads the
    row's words: a lavapipe Vulkan row says it computes on the CPU and how slow it was,
    and the message offering the CPU stays in the tooltip and the reason."""
    system = {
        "hardware": {
            "backends": {
                "cpu": {"supported": True, "evidence": ["AVX2"]},
                "vulkan": {"supported": False, "software": "llvmpipe (LLVM 15.0.6, 256 bits)"},
            }
        },
        "families": {
            "acestep": {
                "backends": [
                    {
                        "name": "cpu",
                        "state": "installed",
                        "installed": True,
                        "measured": {"seconds_per_step": 0.42, "songs": 3},
                        "evidence": ["installed v1"],
                    },
                    {
                        "name": "vulkan",
                        "state": "installed",
                        "installed": True,
                        "measured": {"seconds_per_step": 8.9, "songs": 1},
                        "software": "llvmpipe (LLVM 15.0.6, 256 bits)",
                        "message": "Measured slower than the CPU here: cantor backends --use cpu",
                        "evidence": ["installed v1"],
                    },
                ]
            }
        },
    }
    rows = {r["name"]: r for r in backend_rows(system)}
    cpu, vulkan = cell_text(rows["cpu"]), cell_text(rows["vulkan"])
    assert cpu[2].startswith("0.42 s a step for a minute of song, measured here (3 songs)")
    assert vulkan[2].startswith(
        "8.90 s a step for a minute of song, measured here (1 song) · 21.2× slower than cpu "
        "here: Use cpu · software device (llvmpipe (LLVM 15.0.6, 256 bits)): it computes on "
        "the CPU"
    )
    assert "slower" not in cpu[2]  # the faster one says only its speed
    assert "--use cpu" in vulkan[3]
    assert cell_text({**rows["cpu"], "measured": None})[2] == "installed v1"
