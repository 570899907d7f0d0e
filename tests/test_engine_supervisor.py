"""The engine supervisor with real engine processes (the scripted ace-server stand-in)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from support.node import wait_for
from support.procs import alive
from support.scripted_engine import engine_argv, make_models

from cantor_desktop.engine.client import JobFailed
from cantor_desktop.engine.supervisor import EngineStartError, EngineSupervisor
from cantor_desktop.system.paths import paths


def run(coro, limit: float = 30):
    return asyncio.run(asyncio.wait_for(coro, limit))


@pytest.fixture
def models(tmp_path):
    return make_models(tmp_path / "models")


def supervisor(models, script=None, **kwargs) -> EngineSupervisor:
    env = {"SCRIPTED_ENGINE": json.dumps(script or {})}
    return EngineSupervisor("acestep", engine_argv(), env, models, **kwargs)


def test_start_serve_and_stop_with_the_engine_log_written(models):
    sup = supervisor(models)

    async def go():
        await sup.start()
        assert sup.running and sup.base_url.startswith("http://127.0.0.1:")
        client = sup.client()
        try:
            props = await client.props()
            tracks = await client.song({"caption": "x", "output_format": "wav16"})
        finally:
            await client.aclose()
        pid = sup.pid
        await sup.aclose()
        return props, tracks, pid

    props, tracks, pid = run(go())
    assert props["models"]["dit"] == ["acestep-v15-turbo-Q8_0.gguf"]
    assert len(tracks) == 1
    assert not sup.running and not alive(pid)
    assert sup.exit_code == 0  # SIGTERM: a clean shutdown
    log = paths().engine_log("acestep").read_text()
    assert "[Server] Listening on 127.0.0.1:" in log
    assert "[DiT] Step 8/8" in log and "[Server] Done" in log
    assert "[Store] Created (policy=STRICT)" in log


def test_an_early_exit_is_reported_at_once_with_the_first_and_last_error_line(tmp_path, models):
    empty = tmp_path / "empty"
    empty.mkdir()
    # a ready timeout far longer than the test may run: only the exit itself can end start()
    sup = EngineSupervisor("acestep", engine_argv(), {}, empty, ready_timeout=3600)
    with pytest.raises(EngineStartError) as err:
        run(sup.start(), limit=3600)
    assert f"[Server] ERROR: no GGUF models found in {empty}" in str(err.value)
    assert err.value.code == 1

    lines = [
        "[Server] acestep.cpp test",
        "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU",
        "[Server] FATAL: second line",
        "[Server] Done",
    ]
    sup = supervisor(models, {"exit_at_start": {"lines": lines, "code": 3}})
    with pytest.raises(EngineStartError) as err:
        run(sup.start())
    assert err.value.reason == f"{lines[1]}; {lines[2]}"  # the cause first, whole
    assert lines[1] in str(err.value) and "exit code 3" in str(err.value)


def test_a_missing_executable_is_a_start_error(models, tmp_path):
    sup = EngineSupervisor("acestep", [str(tmp_path / "no-such-ace-server")], {}, models)
    with pytest.raises(EngineStartError, match="cannot start the acestep engine"):
        run(sup.start())


def test_an_engine_that_never_gets_ready_times_out_naming_its_last_line(models):
    sup = supervisor(models, {"never_ready": True}, ready_timeout=1.5)
    with pytest.raises(EngineStartError) as err:
        run(sup.start())
    assert "did not become ready within 1.5 s" in str(err.value)
    assert "[Server] Listening on 127.0.0.1:" in str(err.value)
    assert sup.pid is not None and not alive(sup.pid)


def test_kill_9_mid_song_fails_that_song_with_a_reason_then_restarts_cleanly(models):
    sup = supervisor(models, {"dit_steps": 400, "step_delay": 0.01})
    steps = []
    sup.subscribe(lambda e: steps.append(e) if e.stage == "synth" else None)

    async def go():
        await sup.start()
        first_pid = sup.pid
        client = sup.client()
        song = asyncio.create_task(client.song({"caption": "x", "output_format": "wav16"}))
        await wait_for(lambda: any(e.line.startswith("[DiT] Step") for e in steps), what="a step")
        os.kill(first_pid, signal.SIGKILL)
        with pytest.raises(JobFailed) as failed:
            await song
        await client.aclose()
        assert not sup.running
        sup.env["SCRIPTED_ENGINE"] = json.dumps({"dit_steps": 4})  # a short next song
        await sup.ensure_running()  # the node calls this before the next song
        assert sup.running and sup.pid != first_pid
        client = sup.client()
        try:
            tracks = await client.song({"caption": "y", "output_format": "wav16"})
        finally:
            await client.aclose()
        await sup.aclose()
        return failed.value, tracks

    failed, tracks = run(go())
    assert failed.reason.startswith("engine stopped: ")
    assert "SIGKILL" in failed.reason
    assert "---- exited (killed by signal 9" in paths().engine_log(sup.family).read_text()
    assert len(tracks) == 1 and tracks[0].audio[:4] == b"RIFF"


def test_a_fatal_line_mid_job_is_the_songs_reason(models):
    fatal = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU"
    sup = supervisor(models, {"fatal": {"/lm": {"lines": [fatal], "code": 1}}})

    async def go():
        await sup.start()
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as failed:
                await client.song({"caption": "x", "lyrics": "sing", "output_format": "wav16"})
        finally:
            await client.aclose()
            await sup.aclose()
        return failed.value

    failed = run(go())
    # the engine may die before or after answering the POST: the same reason either way
    assert failed.reason.startswith(f"engine stopped: {fatal}")
    assert sup.last_error_line() == fatal


def test_a_failed_job_waits_for_its_reason_even_when_the_log_lags(models):
    lines = ["[Server] DiT not found: nope.gguf", "[Server] FATAL: synth load failed"]
    sup = supervisor(models, {"fail": {"/synth": lines}, "fail_lines_after": True})

    async def go():
        await sup.start()
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as failed:
                await client.synth({"caption": "x", "synth_model": "nope.gguf"})
            assert sup.running  # a failed job leaves the engine up
        finally:
            await client.aclose()
            await sup.aclose()
        return failed.value

    assert "DiT not found: nope.gguf" in run(go()).reason


def test_progress_events_rise_monotonically_to_one(models):
    sup = supervisor(models, {"dit_steps": 12, "step_delay": 0.01})
    events = []
    unsubscribe = sup.subscribe(events.append)

    async def go():
        await sup.start()
        client = sup.client()
        try:
            sup.expect_duration(30)
            await client.song(
                {"caption": "x", "lyrics": "la la", "duration": 30, "output_format": "wav16"}
            )
            unsubscribe()
            await client.song({"caption": "after unsubscribe", "output_format": "wav16"})
        finally:
            await client.aclose()
            await sup.aclose()

    run(go())
    fractions = [e.fraction for e in events]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert [e.stage for e in events if e.stage_fraction == 0.0][:1] == ["lm"]
    assert {"lm", "synth", "decode"} <= {e.stage for e in events}
    assert any(
        e.eta_seconds is not None and e.eta_seconds > 0 for e in events if e.stage == "synth"
    )
    assert sum(e.line.startswith("[Server] Job") and "created" in e.line for e in events) == 2


def test_keep_loaded_change_restarts_between_songs_and_passes_the_flag(models):
    sup = supervisor(models)

    async def go():
        await sup.ensure_running()
        first = sup.pid
        await sup.ensure_running(keep_loaded=False)
        assert sup.pid == first  # unchanged setting: same process
        await sup.ensure_running(keep_loaded=True)
        second = sup.pid
        assert second != first and not alive(first)
        assert "[Store] Created (policy=NEVER)" in paths().engine_log(sup.family).read_text()
        await sup.ensure_running(keep_loaded=True)
        assert sup.pid == second
        await sup.aclose()

    run(go())


def test_stop_kills_an_engine_that_does_not_finish_after_sigterm(models):
    sup = supervisor(models, {"dit_steps": 2000, "step_delay": 0.01})

    async def go():
        await sup.start()
        client = sup.client()
        await client.submit("/synth", {"caption": "long", "output_format": "wav16"})
        await client.aclose()
        start = paths().engine_log(sup.family).stat().st_size
        await sup.stop(timeout=0.5)  # ace-server lets the running job finish: it would not
        return paths().engine_log(sup.family).read_bytes()[start:].decode("utf-8", "replace")

    log = run(go())
    # asked first (SIGTERM: the engine began to shut down), then killed before its 20-s job
    # ended (it never got to "Done"; the exit 0, had it been waited for)
    assert "[Server] Shutting down..." in log and "[Server] Done" not in log, log
    assert sup.exit_code == -signal.SIGKILL and not alive(sup.pid)


# -- the built-in sketch engine, started as the node starts it ----------------------------------

from cantor_desktop.system import selfexec
from cantor_desktop.sketch import ensure_sketch_models


@pytest.fixture
def sketch_models(tmp_path):
    folder = tmp_path / "sketch-models"
    ensure_sketch_models(folder)
    return folder


def sketch_supervisor(models, env=None, **kwargs) -> EngineSupervisor:
    return EngineSupervisor(
        "sketch", selfexec.self_argv("sketch-server"), env or {}, models, **kwargs
    )


def test_sketch_song_progress_rises_to_one_and_kill_9_restarts_cleanly(sketch_models):
    sup = sketch_supervisor(sketch_models)
    events = []
    sup.subscribe(events.append)

    async def go():
        await sup.ensure_running()
        client = sup.client()
        try:
            await client.song(
                {
                    "caption": "folk waltz",
                    "lyrics": "one two three",
                    "duration": 5,
                    "output_format": "wav16",
                }
            )
            song_events = list(events)
            long_song = asyncio.create_task(
                client.song(
                    {
                        "caption": "long",
                        "duration": 600,
                        "inference_steps": 100,
                        "output_format": "wav16",
                    }
                )
            )
            await wait_for(
                lambda: any(e.line.startswith("[DiT] Step") for e in events[len(song_events) :]),
                what="a step of the long song",
            )
            first_pid = sup.pid
            os.kill(first_pid, signal.SIGKILL)
            with pytest.raises(JobFailed) as failed:
                await long_song
        finally:
            await client.aclose()
        await sup.ensure_running()
        assert sup.pid != first_pid
        client = sup.client()
        try:
            tracks = await client.song(
                {"caption": "after", "duration": 3, "output_format": "wav16"}
            )
        finally:
            await client.aclose()
            await sup.aclose()
        return song_events, failed.value, tracks

    song_events, failed, tracks = run(go())
    fractions = [e.fraction for e in song_events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert [e.stage for e in song_events][0] == "lm"
    assert {"lm", "synth", "decode"} <= {e.stage for e in song_events}
    assert failed.reason.startswith("engine stopped: ") and "SIGKILL" in failed.reason
    assert "---- exited (killed by signal 9" in paths().engine_log(sup.family).read_text()
    assert len(tracks) == 1


def test_sketch_early_exit_and_a_missing_device_give_the_engines_first_line(
    tmp_path, sketch_models
):
    empty = tmp_path / "nothing"
    empty.mkdir()
    with pytest.raises(EngineStartError, match="no GGUF models found in"):
        run(sketch_supervisor(empty).start())

    sup = sketch_supervisor(sketch_models, {"GGML_BACKEND": "CUDA0"})

    async def go():
        await sup.start()  # the device is read at the first job, as ace-server
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as failed:
                await client.song({"caption": "x", "lyrics": "la", "output_format": "wav16"})
        finally:
            await client.aclose()
            await sup.aclose()
        return failed.value

    failed = run(go())
    assert "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU" in failed.reason


LM_FILE = "acestep-5Hz-lm-0.6B-Q8_0.gguf"


def test_an_engine_that_dies_with_its_last_lines_says_what_is_known(models):
    """The real engine loses its last lines at an exit: the reason then names the stage, the
    model file and the last line that did arrive, never a bare exit code."""
    sup = supervisor(models, {"header_only": True, "drop_last_lines": 3})

    async def go():
        await sup.start()
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as failed:
                await client.song(
                    {
                        "caption": "x",
                        "lyrics": "la la",
                        "lm_model": LM_FILE,
                        "output_format": "wav16",
                    }
                )
        finally:
            await client.aclose()
            await sup.aclose()
        return failed.value.reason

    reason = run(go())
    assert reason.startswith(
        "engine stopped: exit code 1, during the LM stage "
        f"(LM {LM_FILE}); its last line: [Load] LM backend: CPU"
    ), reason
    assert "FATAL" not in reason  # it never arrived: nothing is made up


def test_an_earlier_jobs_error_is_never_this_jobs_reason(models):
    """Job 1 fails and stays up; job 2 kills the engine and its own lines are lost, job 1's
    error lines arriving late: job 2's reason does not take them."""
    sup = supervisor(
        models,
        {
            "header_only": True,
            "drop_last_lines": 8,
            "fail": {
                "/synth": ["[Server] DiT not found: nope.gguf", "[Server] FATAL: synth load failed"]
            },
        },
    )

    async def go():
        await sup.start()
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as first:
                await client.synth(
                    {"caption": "x", "synth_model": "nope.gguf", "output_format": "wav16"}
                )
            with pytest.raises(JobFailed) as second:
                await client.lm({"caption": "y", "lyrics": "la", "lm_model": LM_FILE})
        finally:
            await client.aclose()
            await sup.aclose()
        return first.value.reason, second.value.reason

    first, second = run(go())
    assert "nope.gguf" not in second and "synth load failed" not in second, second
    assert second.startswith("engine stopped: exit code 1, during the LM stage")


def test_a_job_not_found_by_a_dying_engine_is_its_death_with_the_reason(models):
    """The real engine answers "Job not found" while it exits (its job table is gone
    first): the song fails with the engine's own reason, not "the engine lost job"."""
    fatal = "[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found"
    sup = supervisor(
        models,
        {"fatal": {"/lm": {"lines": [fatal], "code": 1}}, "dying_404": 0.5, "lm_delay": 0.05},
    )

    async def go():
        await sup.start()
        client = sup.client()
        try:
            with pytest.raises(JobFailed) as failed:
                await client.lm({"caption": "x", "lyrics": "la"})
        finally:
            await client.aclose()
            await sup.aclose()
        return failed.value.reason

    reason = run(go())
    assert reason == f"engine stopped: {fatal} (exit code 1)", reason


def test_a_cancelled_job_ends_at_its_next_step_or_its_engine_is_stopped(models):
    """A cancel lands at the job's next step (the engine reads "running" until then): the
    client waits for it. A step that outlasts the grace (a DiT step of a long song on a
    CPU) is ended by killing the engine, so no CPU goes to the cancelled song; the next
    song starts the engine again."""

    async def cancel_during(script, grace):
        sup = supervisor(models, script)
        await sup.start()
        client = sup.client(cancel_grace=grace)
        pid = sup.pid
        log = paths().engine_log("acestep")
        start = log.stat().st_size
        try:
            task = asyncio.ensure_future(
                client.song({"caption": "x", "lyrics": "[Instrumental]", "output_format": "wav16"})
            )
            # the job is in its first step once it has resolved its length
            await wait_for(lambda: "[Resolve-T]" in log.read_text()[start:], what="the steps")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return pid, sup.running, alive(pid)
        finally:
            await client.aclose()
            await sup.aclose()

    # steps of 0.3 s: the cancel lands at the next one, the engine goes on running
    pid, running, lives = run(cancel_during({"dit_steps": 50, "step_delay": 0.3}, 5.0))
    assert running and lives
    assert "[DiT] Cancelled at step" in paths().engine_log("acestep").read_text()
    # a step of 60 s: after the grace the engine is killed, at once
    pid, running, lives = run(cancel_during({"dit_steps": 4, "step_delay": 60}, 0.5))
    assert not running and not lives, "the engine still works on a cancelled song"
    assert "cancelled job" in paths().engine_log("acestep").read_text()
