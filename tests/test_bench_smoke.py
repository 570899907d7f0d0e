"""Fast checks that the one-command benchmark and fault runners still read what the scripts print."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up there
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_run_all_reads_a_real_sketch_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    plan.sketch_duration, plan.sketch_runs = 10, 1
    [row] = run_all.sketch_figure(plan)
    assert not row.error and row.ok is True, row
    assert float(row.ours.split("×")[0]) >= 30 and float(row.baseline.split("×")[0]) > 1.0
    table = run_all.markdown([row])
    assert table.count("\n") == 2 and "pass" in table


def test_run_all_reads_a_real_export_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    [row] = run_all.export_figure(plan)
    assert not row.error and row.ok is True, row
    assert float(row.ours.split("×")[0]) >= 20


def test_run_all_reads_a_real_edit_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    rows = run_all.edit_figures(plan)
    assert [r.figure for r in rows] == ["Edit of a 20-s song through the node",
                                        "50 MB WAV upload on loopback",
                                        "12 stems of a 20-s song through the node"]
    assert not any(r.error for r in rows), rows
    assert rows[1].ok is True and float(rows[1].ours.split()[0]) < 1000
    assert all(r.ours.endswith("ms") and r.compare.endswith(("ms", "×", "stem")) for r in rows)


def test_fault_runner_reads_both_line_formats():
    run = _load(ROOT / "tests" / "faults" / "run.py", "faults_run")
    m = run.LINE_RE.match("[faults] node.toml: 40 files: tried 40 / survived 39 / lost 1 — x")
    assert m and (m["what"], m["tried"], m["survived"], m["lost"]) == ("node.toml: 40 files",
                                                                      "40", "39", "1")
    m = run.LINE_RE.match("engine kill -9: tried 20, survived 20, lost 0; reasons: a")
    assert m and (m["what"], m["tried"], m["lost"]) == ("engine kill -9", "20", "0")
    assert run.LINE_RE.match("tests/faults/test_x.py .") is None
    md = run.table([{"what": "a", "tried": 2, "survived": 1, "lost": 1, "note": ""}])
    assert "| **overall**" in md and md.splitlines()[-1].split("|")[2].strip() == "2"
