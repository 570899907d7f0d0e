"""Fast checks that the one-command benchmark and fault runners still read what the scripts print.

Each check runs a real (small) bench script and asserts that every figure was produced and
its output checked, never the figure's value: a figure is a measurement of this machine at
this moment (bench/run_all.py and docs/performance.md hold it against its goal)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
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
    assert not row.error and row.ok is not None, row  # measured and held against its goal
    assert float(row.ours.split("×")[0]) > 0 and float(row.baseline.split("×")[0]) > 0
    table = run_all.markdown([row])
    assert table.count("\n") == 2 and row.result in table


def test_run_all_reads_a_real_export_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    measure, row = run_all.export_figure(plan)
    assert not row.error and row.ok is not None, row
    assert float(row.ours.split("×")[0]) > 0
    assert "every counted file decoded and checked" in row.note
    assert not measure.error and measure.ok is not None, measure  # tempo and key found
    assert float(measure.ours.split()[0]) > 0 and "as rendered" in measure.note


def test_run_all_reads_a_real_edit_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    rows = run_all.edit_figures(plan)
    assert [r.figure for r in rows] == [
        "Edit of a 20-s song through the node",
        "50 MB WAV upload on loopback",
        "12 stems of a 20-s song through the node, queued at once",
        "12 stems of a 20-s song through the node, one at a time",
    ]
    assert not any(r.error for r in rows), rows
    # each measured and held against its goal; one stem at a time is reported
    assert [r.ok is not None for r in rows] == [True, True, True, False]
    assert float(rows[1].ours.split()[0]) > 0 and "decoded, checked, kept" in rows[1].note
    assert all(r.ours.endswith(("ms", "a set")) for r in rows)
    assert all(r.compare.endswith(("ms", "×", "stem")) for r in rows)


def test_run_all_says_why_the_real_engine_figures_are_skipped(monkeypatch):
    monkeypatch.delenv("CANTOR_REAL_ACE_SERVER", raising=False)
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    rows = run_all.real_engine_figures(run_all.plan_for(quick=True))
    assert [r.figure for r in rows] == run_all.REAL_ENGINE_FIGURES
    for r in rows:
        assert not r.error and r.ok is None and r.result == "—"
        assert r.note == (
            "skipped: CANTOR_REAL_ACE_SERVER does not name a real ace-server build"
        ), r.note


def test_fault_runner_reads_both_line_formats():
    run = _load(ROOT / "tests" / "faults" / "run.py", "faults_run")
    m = run.LINE_RE.match("[faults] node.toml: 40 files: tried 40 / survived 39 / lost 1 — x")
    assert m and (m["what"], m["tried"], m["survived"], m["lost"]) == (
        "node.toml: 40 files",
        "40",
        "39",
        "1",
    )
    m = run.LINE_RE.match("engine kill -9: tried 20, survived 20, lost 0; reasons: a")
    assert m and (m["what"], m["tried"], m["lost"]) == ("engine kill -9", "20", "0")
    assert run.LINE_RE.match("tests/faults/test_x.py .") is None
    md = run.table([{"what": "a", "tried": 2, "survived": 1, "lost": 1, "note": ""}])
    assert "| **overall**" in md and md.splitlines()[-1].split("|")[2].strip() == "2"


def test_run_all_reads_the_json_of_a_real_download_race():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    plan.dl_mib, plan.dl_runs = 24, 1  # ranged (more than one 16-MiB chunk), one round
    rows = run_all.download_figures(plan)
    assert [r.figure for r in rows] == run_all.DOWNLOAD_FIGURES
    for row in rows:
        assert not row.error and row.ok is not None, row  # measured, held against its goal
        assert float(row.compare.rstrip("×")) > 0 and row.ours.endswith("MiB/s")
        assert "compared byte for byte with the hub's" in row.note
        for tool in ("cantor pull", "huggingface_hub", "hf_transfer", "curl", "httpx loop"):
            assert f"{tool}: " in row.note  # every peer raced (and the reference), measured
    # the resume trial: stopped half-way, only the missing bytes fetched again
    assert "only what was missing" in rows[0].note


def test_run_all_reads_the_json_of_a_real_soak():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    plan.soak_songs, plan.soak_every = 10, 5  # new songs, a repaint, an extension, a stem, a cover
    [row] = run_all.soak_figure(plan)
    assert not row.error and row.ok is not None, row
    assert row.ours.endswith("MiB RSS") and row.compare.endswith("MiB PSS")
    assert "each take checked" in row.note
    for kind in ("new", "repaint", "extend", "extract", "cover"):
        assert f"{kind} " in row.note


def test_run_all_reads_the_json_of_a_real_node_run():
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    plan.node_songs, plan.latency_songs = 1, 1
    rows, after_songs = run_all.node_figures(plan)
    overhead, latency = rows
    assert not overhead.error and not latency.error, rows
    assert overhead.baseline.endswith("(engine alone)") and "(n=1)" in overhead.spread
    assert "a second client of the engine's log" in latency.baseline
    assert ", 0 without their progress event (lost)" in latency.note  # every step matched
    assert after_songs > 0


def test_a_script_that_fails_gives_no_figures(tmp_path):
    run_all = _load(ROOT / "bench" / "run_all.py", "bench_run_all")
    plan = run_all.plan_for(quick=True)
    script = tmp_path / "half.py"
    script.write_text(
        "import json, os, sys\n"
        "json.dump({'ratio': 1.0}, open(os.environ['CANTOR_BENCH_JSON'], 'w'))\n"
        "sys.exit('failed after writing')\n"
    )
    out = run_all.run_script(plan, [str(script)], "half", check=False)
    assert out.figures is None and "SCRIPT-ERROR" in out
    ok = tmp_path / "ok.py"
    ok.write_text(
        "import json, os\njson.dump({'ratio': 2.0}, open(os.environ['CANTOR_BENCH_JSON'], 'w'))\n"
    )
    assert run_all.run_script(plan, [str(ok)], "ok").figures == {"ratio": 2.0}


def test_the_app_bench_songs_page_runs_on_the_song_record_of_today(qapp):
    """bench/app.py's Songs-page figure, in this process (the whole bench takes minutes)."""
    app_bench = _load(ROOT / "bench" / "app.py", "bench_app")
    page = app_bench.bench_songs_page(qapp, n=1000, runs=2)
    assert set(page) == {f"{k}_{n}" for k in ("parse", "open", "parse_open") for n in (100, 1000)}
    assert all(len(v) == 2 and all(t > 0 for t in v) for v in page.values())


def test_the_app_bench_search_keystrokes_check_what_they_find(qapp, qloop):
    """bench/app.py's keystroke figure: every keystroke timed, at both sizes, and the
    search's result checked against the songs (the figure's value is the bench's)."""
    app_bench = _load(ROOT / "bench" / "app.py", "bench_app")
    base, full = app_bench.bench_search(qapp, n=1000)
    typed = len(app_bench.SEARCH_TYPED)
    assert len(base) == len(full) == 2 * typed and all(t > 0 for t in base + full)
    assert len(app_bench.bench_search.cpu[1000]) == len(full)
