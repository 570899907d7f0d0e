"""Hardware & Backends rows: nothing guessed before the node answers; a backend this machine
can run but has not installed reads "installable"."""

from support.ui import run

from cantor_desktop.views.hardware import backend_rows


def test_before_the_node_answers_every_backend_is_unknown_and_cannot_be_installed():
    rows = backend_rows({})
    assert [r["state"] for r in rows] == ["unknown"] * len(rows)
    assert not any(r["supported"] for r in rows)


def test_a_supported_backend_not_installed_is_installable():
    system = {
        "hardware": {
            "backends": {
                "cpu": {"supported": True, "evidence": ["/proc/cpuinfo: AVX2"]},
                "vulkan": {"supported": False, "reason": "No Vulkan device found."},
            }
        }
    }
    by_name = {r["name"]: r for r in backend_rows(system)}
    assert by_name["cpu"]["state"] == "installable" and by_name["cpu"]["supported"]
    assert by_name["vulkan"]["state"] == "unsupported" and not by_name["vulkan"]["supported"]
    assert by_name["vulkan"]["reason"] == "No Vulkan device found."
    status = {
        "families": {
            "acestep": {"backends": [{"name": "cpu", "state": "installed", "installed": True}]}
        }
    }
    assert {r["name"]: r for r in backend_rows({**system, **status})}["cpu"]["state"] == "installed"


def test_first_run_set_up_does_the_next_step(qtbot, qloop):
    """The banner's set-up button starts "Find the best backend" (not only shows a page);
    once a backend is there it reads "Download…" and opens the Library; a find that ends
    says what comes next."""
    from support.procs import free_port
    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.window import MainWindow

    link = NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False)
    w = MainWindow(link)
    qtbot.addWidget(w)
    w.populate()
    w.banner.update_from({}, [])
    assert w.banner.state == "needs setup"
    w.banner.setup.click()
    assert w.pages.currentWidget() is w.hardware
    assert w.hardware.log.count() == 0  # find_best was asked, and said why it could not
    assert w.hardware.message.text() == (
        "Could not find the best backend: "
        "The node is not running; start it from the tray or the status bar"
    )
    system = {"families": {"acestep": {"backends": [{"name": "cpu", "installed": True}]}}}
    w.banner.update_from(system, [])
    assert w.banner.state == "needs download"
    assert w.banner.setup.text().startswith("Download an ACE-Step model")
    w.banner.setup.click()
    assert w.pages.currentWidget() is w.library
    w.hardware.view_model.start("find", None, "k")
    w.hardware.on_event("k", {"state": "done"})
    last = w.hardware.log.item(w.hardware.log.count() - 1).text()
    assert last.startswith("Next: download an ACE-Step model in Library")
    run(qloop, link.shutdown())


def test_a_refused_find_ends_on_one_plain_line(qtbot):
    # the reason is logged as its own event; the end said "Failed: failed" after it
    from support.procs import free_port
    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.pages.hardware import HardwarePage

    page = HardwarePage(NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
    qtbot.addWidget(page)
    page.view_model.start("find", None, "k")
    page.on_event(
        "k",
        {
            "backend": None,
            "outcome": "rejected",
            "message": "No backend works on this machine: cpu: offline.",
        },
    )
    page.on_event("k", {"state": "failed", "error": ""})
    lines = [page.log.item(i).text() for i in range(page.log.count())]
    assert lines == ["No backend works on this machine: cpu: offline.", "Failed."]
    assert page.message.isHidden()
    page.on_event("k", {"state": "failed", "error": "the node went away"})
    assert page.log.item(page.log.count() - 1).text() == "Failed."
    assert page.message.text() == "Could not find the best backend: the node went away"
    assert page.message.property("cantorTone") == "danger"


def test_a_rejected_backend_shows_the_engines_reason_and_can_be_tried_again(qtbot):
    from support.procs import free_port
    from cantor_desktop.ui.node_link import NodeLink
    from cantor_desktop.ui.pages.hardware import HardwarePage

    reason = (
        "rejected: [Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU (trial "
        "load of v0.1.1, 2026-11-30 03:12 UTC). Run: cantor backends --use cuda12 to "
        "try it again"
    )
    system = {
        "hardware": {
            "backends": {
                "cuda12": {"supported": True, "evidence": ["nvidia-smi: RTX 4070"]},
                "cpu": {"supported": True},
            }
        },
        "families": {
            "acestep": {
                "default": "cpu",
                "backends": [
                    {
                        "name": "cuda12",
                        "state": "rejected",
                        "installed": False,
                        "message": reason,
                        "evidence": ["nvidia-smi: RTX 4070"],
                    },
                    {"name": "cpu", "state": "installed", "installed": True},
                ],
            }
        },
    }
    rows = {r["name"]: r for r in backend_rows(system)}
    assert rows["cuda12"]["state"] == "rejected" and rows["cuda12"]["reason"] == reason
    page = HardwarePage(NodeLink(url=f"http://127.0.0.1:{free_port()}", start_child=False))
    qtbot.addWidget(page)
    page.set_system(system)
    assert page.table.item(0, 1).text() == "rejected"
    assert page.table.item(0, 2).text().startswith("rejected: [Load] FATAL: GGML_BACKEND=CUDA0")
    assert page.table.cellWidget(0, 3).findChildren(type(page.find_button))[0].text() == "Try again"
    assert page.table.item(0, 0).text() == "cuda12"  # not the auto choice
