"""A Sketch job's status as a state machine: running ends done, failed or cancelled, once;
the second of a finish and a cancel that race is refused and changes nothing."""

from __future__ import annotations

import io

import pytest

from cantor_desktop.sketch import ensure_sketch_models
from cantor_desktop.sketch.engine import Engine
from cantor_desktop.sketch.jobs import TRANSITIONS, Job, JobStatus
from cantor_desktop.sketch.log import EngineLog
from cantor_desktop.sketch.options import Options
from cantor_desktop.sketch.registry import Registry
from cantor_desktop.sketch.request import normalise

ENDS = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


def test_the_table_lets_a_running_job_end_once():
    assert TRANSITIONS == {
        JobStatus.RUNNING: frozenset(ENDS),
        **{end: frozenset() for end in ENDS},
    }


@pytest.mark.parametrize("end", ENDS)
def test_every_end_is_made_from_running_and_none_after_it(end):
    job = Job("a", "synth", [])
    assert job.end(end, [b"x"], "audio/wav") and job.status is end
    assert job.cancel.is_set() == (end is JobStatus.CANCELLED)
    for status in JobStatus:
        assert not job.end(status)  # refused: the status and the result stay
        assert job.status is end and job.result == [b"x"]


def test_a_cancel_after_the_job_finished_is_refused_and_says_how_it_ended(tmp_path):
    ensure_sketch_models(tmp_path)
    log = EngineLog(stream=io.StringIO())
    engine = Engine(Options(models=str(tmp_path)), Registry(tmp_path, log), log)
    job = engine.submit("lm", [normalise({"caption": "x"})])
    with engine.lock:
        assert job.end(JobStatus.DONE, [b"{}"], "application/json")
    assert engine.cancel(job) == JobStatus.DONE and not job.cancel.is_set()
    other = engine.submit("lm", [normalise({"caption": "y"})])
    assert engine.cancel(other) == JobStatus.CANCELLED and other.cancel.is_set()
    assert not other.end(JobStatus.DONE, [b"late"]) and other.result == []
