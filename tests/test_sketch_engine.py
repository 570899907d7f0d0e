"""The sketch engine's job store, in-process: eviction by count and by result size."""

from __future__ import annotations

import io

from cantor_desktop.sketch import engine as eng
from cantor_desktop.sketch import ensure_sketch_models
from cantor_desktop.sketch.log import EngineLog
from cantor_desktop.sketch.options import Options
from cantor_desktop.sketch.request import normalise


def _engine(tmp_path) -> eng.Engine:
    ensure_sketch_models(tmp_path)
    log = EngineLog(stream=io.StringIO())
    return eng.Engine(Options(models=str(tmp_path)), eng.Registry(tmp_path, log), log)


def _finish(e: eng.Engine, job: eng.Job, size: int) -> None:
    with e.lock:
        job.result, job.status = [b"x" * size], "done"
        e._evict(keep=job.id)


def test_keeps_32_jobs_but_never_evicts_running_ones(tmp_path):
    e = _engine(tmp_path)
    req = [normalise({"caption": "x"})]
    running = [e.submit("lm", req) for _ in range(3)]
    done = []
    for _ in range(40):
        job = e.submit("lm", req)
        _finish(e, job, 10)
        done.append(job)
    assert len(e.jobs) == 32
    assert all(e.get(j.id) for j in running)
    assert e.get(done[-1].id) and not e.get(done[0].id)


def test_old_results_go_when_they_hold_too_much(tmp_path, monkeypatch):
    monkeypatch.setattr(eng, "RESULT_BUDGET", 1000)
    e = _engine(tmp_path)
    req = [normalise({"caption": "x"})]
    jobs = [e.submit("synth", req) for _ in range(4)]
    for job in jobs[:3]:
        _finish(e, job, 400)
    assert [j.id for j in jobs[:3] if e.get(j.id)] == [j.id for j in jobs[1:3]]
    _finish(e, jobs[3], 5000)  # the newest result stays, even alone
    assert [j.id for j in jobs if e.get(j.id)] == [jobs[3].id]
