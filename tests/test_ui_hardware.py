"""Hardware & Backends rows: nothing guessed before the node answers; a backend this machine
can run but has not installed reads "installable"."""

from cantor_desktop.ui.pages.hardware import backend_rows


def test_before_the_node_answers_every_backend_is_unknown_and_cannot_be_installed():
    rows = backend_rows({})
    assert [r["state"] for r in rows] == ["unknown"] * len(rows)
    assert not any(r["supported"] for r in rows)


def test_a_supported_backend_not_installed_is_installable():
    system = {"hardware": {"backends": {
        "cpu": {"supported": True, "evidence": ["/proc/cpuinfo: AVX2"]},
        "vulkan": {"supported": False, "reason": "No Vulkan device found."}}}}
    by_name = {r["name"]: r for r in backend_rows(system)}
    assert by_name["cpu"]["state"] == "installable" and by_name["cpu"]["supported"]
    assert by_name["vulkan"]["state"] == "unsupported" and not by_name["vulkan"]["supported"]
    assert by_name["vulkan"]["reason"] == "No Vulkan device found."
    status = {"families": {"acestep": {"backends": [{"name": "cpu", "state": "installed",
                                                     "installed": True}]}}}
    assert {r["name"]: r for r in backend_rows({**system, **status})}["cpu"]["state"] == "installed"
