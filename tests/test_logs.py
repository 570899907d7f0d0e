"""Logs that help: one node.log line per song state change (with the reason of a failure),
per download and per backend action; no line per health poll in the app's log."""

from __future__ import annotations

import asyncio
import logging

from support.node import SHORT, Node, until_state, write_config


def test_node_log_tells_each_song_s_story(cantor_home):
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home, env={"CANTOR_MANIFEST_URL": ""}).start()
        try:
            async with node.client() as c:
                ok = await c.submit_song(SHORT)
                await until_state(c, ok, ("done",))
                bad = await c.submit_song(
                    {**SHORT, "model": "sketch", "format": "mp3", "duration": 600}
                )
                await c.cancel(bad)
                await until_state(c, bad, ("cancelled",))
                async with node.http(timeout=30) as http:
                    async with http.stream("POST", "/v1/backends/update") as r:
                        async for _ in r.aiter_lines():
                            pass
            return ok, bad
        finally:
            await node.stop()

    ok, bad = asyncio.run(main())
    text = (cantor_home / "logs" / "node.log").read_text()
    for needle in (
        f"song {ok} queued",
        f"song {ok} running",
        f"song {ok} done",
        f"song {bad} cancelled",
        "backend update started",
        "backend update ",
    ):
        assert needle in text, needle
    assert "uvicorn.error" not in text  # start-up lines are the node's own


def test_health_polls_are_not_logged_at_info(tmp_path):
    from cantor_desktop.system import logs

    logs.setup(tmp_path / "app.log")
    logging.getLogger("httpx").info('HTTP Request: GET http://127.0.0.1:7823/v1/health "200 OK"')
    logging.getLogger("cantor_desktop.ui").info("a line of our own")
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = (tmp_path / "app.log").read_text()
    assert "a line of our own" in text and "/v1/health" not in text


def _fill(folder, name: str, size: int) -> dict[str, bytes]:
    """``name`` grown to ``size`` bytes of old lines, and its five backups, each marked."""
    from cantor_desktop.system import logs

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for n in range(logs.BACKUPS + 1):
        path = folder / (name if n == 0 else f"{name}.{n}")
        mark = f"OLD {name} #{n}\n".encode()
        files[path.name] = mark + b"x" * (size - len(mark) - 1) + b"\n"
        path.write_bytes(files[path.name])
    return files


def test_node_and_engine_logs_rotate_when_full_and_keep_five(cantor_home):
    """A node started over a full node.log, and an engine over a full engine log: each file
    moves up one (x.log → x.log.1 … x.log.4 → x.log.5), the fifth backup goes, the new lines
    start a fresh file, and no file grows past the limit."""
    from cantor_desktop.system import logs

    write_config(cantor_home)
    folder = cantor_home / "logs"
    old = {
        **_fill(folder, "node.log", logs.MAX_BYTES - 10),
        **_fill(folder, "engine-sketch.log", logs.MAX_BYTES - 10),
    }

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                await until_state(c, await c.submit_song(SHORT), ("done",))
        finally:
            await node.stop()

    asyncio.run(main())
    for name in ("node.log", "engine-sketch.log"):
        for n in range(1, logs.BACKUPS + 1):
            assert (folder / f"{name}.{n}").read_bytes() == old[
                name if n == 1 else f"{name}.{n - 1}"
            ]
        assert not (folder / f"{name}.{logs.BACKUPS + 1}").exists()
        fresh = (folder / name).read_text()
        assert not fresh.startswith("OLD") and fresh.strip()
        assert all((folder / f).stat().st_size <= logs.MAX_BYTES for f in old)
    assert "song " in (folder / "node.log").read_text()  # the node's own lines
    assert "---- starting" in (folder / "engine-sketch.log").read_text()


def test_a_log_that_cannot_roll_over_or_reopen_never_raises_into_the_caller(tmp_path, monkeypatch):
    """Rollover failed (the live file held open) and reopening failed too (the folder gone,
    or a program holding the file without sharing it): each record goes to handleError and
    the code that logged carries on."""
    import logging

    from cantor_desktop.system import logs

    handler = logs.rotating_handler(tmp_path / "app.log")
    handler.maxBytes = 300
    handler.rotator = lambda source, dest: (_ for _ in ()).throw(PermissionError(13, "held"))
    failed = []
    handler.handleError = lambda record: failed.append(record.getMessage())
    logger = logging.Logger("t")
    logger.addHandler(handler)
    logger.info("x" * 200)

    def refuse():
        raise PermissionError(13, "held by another program")

    handler._open = refuse
    monkeypatch.setattr(logs.shutil, "copyfile", lambda *a, **k: refuse())
    try:
        for i in range(5):
            logger.info("record %d %s", i, "y" * 200)  # must not raise
    finally:
        handler.close()
    assert failed and all(m.startswith("record") for m in failed)


def test_a_log_emptied_by_another_process_is_not_rolled_over_again(tmp_path):
    """Two processes write one log; when one empties it in place (its copy-and-truncate),
    the other measures the file as it is now, not where its own writes ended: no backup of
    one line pushes real history out."""
    import logging

    from cantor_desktop.system import logs

    path = tmp_path / "cli.log"
    handler = logs.rotating_handler(path)
    handler.maxBytes = 2000
    logger = logging.Logger("t")
    logger.addHandler(handler)
    for i in range(7):
        logger.info("record %d %s", i, "x" * 200)
    assert 1500 < path.stat().st_size < 2000 and not (tmp_path / "cli.log.1").exists()
    with open(path, "r+b") as other:  # the other process's copytruncate
        other.truncate(0)
    logger.info("after %s", "y" * 400)
    handler.close()
    assert not (tmp_path / "cli.log.1").exists()
    assert path.read_text().count("after") == 1


def test_one_record_is_one_line_whatever_the_message_holds(tmp_path):
    """A refused request's path with `%0a` in it, logged decoded, would write a forged line
    into node.log, which the app shows: control characters are escaped."""
    from cantor_desktop.system import logs

    logs.setup(tmp_path / "node.log")
    log = logging.getLogger("cantor_desktop.node.guard")
    log.info("refused %s %s: %s", "GET", "/x\n2026-01-01 00:00:00,000 INFO forged\r\x1b[2K", "no")
    log.info("bidi \u202e and separators \u2028\u2029 and NUL \x00")
    try:
        raise ValueError("bad\nINFO forged too")
    except ValueError:
        log.exception("it failed")
    for handler in logging.getLogger().handlers:
        handler.flush()
    lines = (tmp_path / "node.log").read_text("utf-8").splitlines()
    records = [line for line in lines if not line.startswith(" ")]
    assert len(records) == 3, lines
    assert "/x\\n2026-01-01 00:00:00,000 INFO forged\\r\\x1b[2K: no" in records[0]
    assert records[1].endswith("bidi \\u202e and separators \\u2028\\u2029 and NUL \\x00")
    assert all(line.startswith("    ") for line in lines[3:]) and "Traceback" in lines[3]
    assert not any(line.startswith("INFO") for line in lines)


def test_a_backup_held_open_loses_no_record_and_the_rollover_is_tried_again(tmp_path, monkeypatch):
    """An older backup that cannot be moved up (held open elsewhere, as Windows refuses a
    rename then): the live file is reopened and keeps every record, growing past the limit
    while the backup is held; once it is free, the next rollover moves every file up."""
    import logging
    import os

    from cantor_desktop.system import logs

    monkeypatch.setattr(logs, "RETRY_AFTER_S", 0.0)  # try again at the next record
    for n in (1, 2, 3):
        (tmp_path / f"node.log.{n}").write_text(f"backup {n}\n")
    held = {str(tmp_path / "node.log.2")}
    rename = os.rename

    def windows_rename(source, dest):
        if str(source) in held:
            raise PermissionError(13, "used by another process", str(source))
        rename(source, dest)

    monkeypatch.setattr(os, "rename", windows_rename)
    handler = logs.rotating_handler(tmp_path / "node.log")
    handler.maxBytes = 1000
    errors = []
    handler.handleError = lambda record: errors.append(record.getMessage())
    logger = logging.Logger("t")
    logger.addHandler(handler)
    try:
        for i in range(20):
            logger.info("record %02d %s", i, "x" * 100)
        grown = (tmp_path / "node.log").stat().st_size
        held.clear()
        for i in range(20, 22):
            logger.info("record %02d %s", i, "x" * 100)
    finally:
        handler.close()
    assert errors == [] and grown > 2000
    text = (tmp_path / "node.log.1").read_text() + (tmp_path / "node.log").read_text()
    assert [int(line.split("record ")[1][:2]) for line in text.splitlines()] == list(range(22))
    assert [(tmp_path / f"node.log.{n}").read_text() for n in (2, 3, 5)] == [
        "backup 1\n",
        "backup 2\n",
        "backup 3\n",
    ]
