"""PullEvent: one typed vocabulary from the node's downloader to the Library page."""

from __future__ import annotations

import json

import pytest

from cantor_desktop.models.events import PullEvent, PullStep


def test_events_survive_the_wire_exactly():
    events = [
        PullEvent(
            "plan",
            "m",
            total=10,
            approximate=True,
            files=[{"name": "a.gguf", "kind": "dit", "size": 10, "to_get": 10, "state": "missing"}],
        ),
        PullEvent(
            "progress",
            "m",
            file="a.gguf",
            file_received=5,
            file_total=10,
            received=5,
            total=10,
            speed=2.5,
            eta=2.0,
        ),
        PullEvent(
            "done",
            "m",
            message="m is ready",
            engine_ready=False,
            engine_error="no build",
            engine={"ready": False},
        ),
    ]
    for event in events:
        data = json.loads(json.dumps(event.to_json()))
        assert "file" not in data or event.file is not None  # defaults left out
        assert PullEvent.from_sse(str(event.type), data) == event
    assert events[1].fraction == 0.5 and PullEvent("plan", "m").fraction is None
    assert events[2].is_terminal and not events[1].is_terminal


def test_the_nodes_error_event_is_a_failed_step_and_unknown_steps_are_refused():
    failed = PullEvent.from_sse("error", {"message": "HTTP 404", "type": "DownloadError"}, "m")
    assert (failed.type, failed.model, failed.message, failed.error_type) == (
        PullStep.FAILED,
        "m",
        "HTTP 404",
        "DownloadError",
    )
    assert failed.is_terminal
    assert PullEvent.from_sse("error", "plain text", "m").message == "plain text"
    assert PullEvent.paused("m").type == "paused" and PullEvent.paused("m").is_terminal
    with pytest.raises(ValueError):
        PullEvent.from_sse("teleport", {"model": "m"})
    with pytest.raises(ValueError):
        PullEvent.from_json({"model": "m"})
    newer = PullEvent.from_sse("progress", {"model": "m", "received": 3, "colour": "blue"})
    assert newer.received == 3  # fields a newer node adds are ignored


def test_the_events_module_stays_light():
    """The app's side imports it without the downloader, the hub or httpx."""
    import subprocess
    import sys

    code = (
        "import sys, cantor_desktop.models.events; "
        "print(sorted(m for m in sys.modules if m.startswith(('httpx', "
        "'cantor_desktop.models.hub', 'cantor_desktop.fetch.download', 'PySide6'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"
