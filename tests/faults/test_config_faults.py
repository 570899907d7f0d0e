"""node.toml faults: malformed or hostile files and two writers at once.

Run: .venv/bin/python tests/faults/run.py  (or: ./run-tests -m slow tests/faults/test_config_faults.py -s)

Every hostile variant must give a clear :class:`ConfigError` (it names the key, or a line and
column, in a message of reasonable length), leave the file byte-identical through ``load``,
``update`` and ``set_from_text``, leave no temp file behind, and ``load_or_defaults`` must
still hand the app the defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cantor_desktop import config

pytestmark = pytest.mark.slow

MESSAGE_MAX = 600  # a clear message fits on a screen; it never quotes a 1 MB value


def _nested(depth: int) -> bytes:
    return b"[node]\nport = " + b"[" * depth + b"1" + b"]" * depth + b"\n"


# (name, file bytes, what the error must name: a key, or None for "a line and column")
VARIANTS: list[tuple[str, bytes, str | None]] = [
    ("port as a string", b'[node]\nport = "7823"\n', "node.port"),
    ("port = 1e400 (float overflow)", b"[node]\nport = 1e400\n", "node.port"),
    ("port = 10**30", b"[node]\nport = 1000000000000000000000000000000\n", None),
    ("port = -1", b"[node]\nport = -1\n", "node.port"),
    ("port = 0", b"[node]\nport = 0\n", "node.port"),
    ("port = 7823.0", b"[node]\nport = 7823.0\n", "node.port"),
    ("port = nan", b"[node]\nport = nan\n", "node.port"),
    ("port = a date", b"[node]\nport = 1979-05-27T07:32:00Z\n", "node.port"),
    ("port = array", b"[node]\nport = [1, 2]\n", "node.port"),
    ("port = 10000-deep nested array", _nested(10000), None),
    ('keep_loaded = "yes"', b'[node]\nkeep_loaded = "yes"\n', "node.keep_loaded"),
    ("keep_loaded = 1", b"[node]\nkeep_loaded = 1\n", "node.keep_loaded"),
    ("host empty", b'[node]\nhost = ""\n', "node.host"),
    ("host with spaces", b'[node]\nhost = "127.0.0.1 evil"\n', "node.host"),
    ("backend rocm", b'[backends]\nacestep = "rocm"\n', "backends.acestep"),
    ("format ogg", b'[songs]\nformat = "ogg"\n', "songs.format"),
    ("format = 1 MB string", b'[songs]\nformat = "' + b"x" * (1 << 20) + b'"\n', "songs.format"),
    (
        "manifest plain http to a remote host",
        b'[engines]\nmanifest = "http://example.com/engines.json"\n',
        "engines.manifest",
    ),
    ("manifest file://", b'[engines]\nmanifest = "file:///etc/passwd"\n', "engines.manifest"),
    ("node = 5 (value where a table belongs)", b"node = 5\n", "node"),
    ("[[node]] array of tables", b"[[node]]\nport = 1\n", "node"),
    ("engines.acestep = string", b'[engines]\nacestep = "/bin/sh"\n', "engines.acestep"),
    ("[node.port] table where a value belongs", b"[node.port]\nx = 1\n", "node.port"),
    ("inline table with a bad value", b'node = { port = "x" }\n', "node.port"),
    ("duplicate key", b"[node]\nport = 7000\nport = 7001\n", None),
    ("duplicate table", b'[node]\nport = 7000\n[node]\nhost = "x"\n', None),
    ("BOM then a bad value", b'\xef\xbb\xbf[node]\nport = "x"\n', "node.port"),
    ("two BOMs", b"\xef\xbb\xbf\xef\xbb\xbf[node]\nport = 7000\n", None),
    ("UTF-16 with BOM", "[node]\nport = 7000\n".encode("utf-16"), None),
    ("UTF-16-LE without BOM", "[node]\nport = 7000\n".encode("utf-16-le"), None),
    ("Latin-1 text", '# caf\xe9\n[songs]\ndir = "/home/caf\xe9"\n'.encode("latin-1"), None),
    ("NUL byte in a string", b'[node]\nhost = "127.0\x00.0.1"\n', None),
    ("NUL byte in a key", b"[node]\npo\x00rt = 7000\n", None),
    ("lone CR", b"[node]\rport = 7000\n", None),
    ("unterminated string", b'[node]\nhost = "127.0.0.1\n', None),
    ("bad escape \\uD800", b'[node]\nhost = "\\uD800"\n', None),
    ("key without value", b"[node]\nport =\n", None),
    ("random binary", bytes(range(256)) * 64, None),
    ("empty default model", b'[models]\ndefault = "  "\n', "models.default"),
    ("node_url ftp://", b'[app]\nnode_url = "ftp://host/"\n', "app.node_url"),
]

# Variants that currently fail, with the bug they show. Each is also an xfail(strict) test
# below, so a fix shows up as an XPASS to be removed from here.
KNOWN_BUGS: dict[str, str] = {}


def _problems(path: Path, data: bytes, names: str | None) -> list[str]:
    """Everything wrong with how config handles this file (empty: it survived)."""
    problems: list[str] = []

    def untouched(after: str) -> None:
        if path.read_bytes() != data:
            problems.append(f"file changed by {after}")
            path.write_bytes(data)
        extra = sorted(
            p.name for p in path.parent.iterdir() if p.name not in (path.name, path.name + ".lock")
        )
        if extra:
            problems.append(f"left {extra} after {after}")

    try:
        config.load(path)
        problems.append("load accepted it")
    except config.ConfigError as exc:
        msg = str(exc)
        if len(msg) > MESSAGE_MAX:
            problems.append(f"message is {len(msg)} characters long")
        if names is not None:
            if names not in msg and exc.key != names:
                problems.append(f"message does not name {names}: {msg[:120]!r}")
        elif exc.line is None or exc.col is None or "line" not in msg:
            if not (exc.key and exc.key in msg):
                problems.append(f"no key and no line/column: {msg[:120]!r}")
    except BaseException as exc:  # noqa: BLE001 - anything but ConfigError is a loss
        problems.append(f"load raised {type(exc).__name__}: {str(exc)[:100]}")
    untouched("load")

    for what, call in (
        ("update", lambda: config.update({"node.keep_loaded": True}, path)),
        ("set_from_text", lambda: config.set_from_text("node.port", "7000", path)),
    ):
        try:
            call()
            problems.append(f"{what} wrote over it")
        except config.ConfigError:
            pass
        except BaseException as exc:  # noqa: BLE001
            problems.append(f"{what} raised {type(exc).__name__}: {str(exc)[:100]}")
        untouched(what)

    try:
        cfg, err = config.load_or_defaults(path)
        if err is None:
            problems.append("load_or_defaults saw no error")
        if (
            cfg.get("node.port") != 7823
            or cfg.get("songs.format") != "wav24"
            or cfg.get("node.keep_loaded") is not False
        ):
            problems.append("load_or_defaults did not give the defaults")
    except BaseException as exc:  # noqa: BLE001
        problems.append(f"load_or_defaults raised {type(exc).__name__}: {str(exc)[:100]}")
    untouched("load_or_defaults")
    return problems


def test_thirty_hostile_node_toml_variants(tmp_path, tally):
    assert len(VARIANTS) >= 30
    t = tally(f"node.toml: {len(VARIANTS)} malformed or hostile files")
    unexpected: list[str] = []
    for i, (name, data, names) in enumerate(VARIANTS):
        folder = tmp_path / f"v{i:02d}"
        folder.mkdir()
        path = folder / "node.toml"
        path.write_bytes(data)
        problems = _problems(path, data, names)
        if problems:
            t.fail(f"{name}: {problems[0]}")
            if name not in KNOWN_BUGS:
                unexpected.append(f"{name}: {problems}")
        else:
            t.ok()
            if name in KNOWN_BUGS:
                unexpected.append(f"{name}: survives now; remove it from KNOWN_BUGS")
    assert not unexpected, "\n".join(unexpected)


# a strict xfail per known bug (none now: then there is no such test)
if KNOWN_BUGS:

    @pytest.mark.parametrize("name", sorted(KNOWN_BUGS))
    def test_known_config_bug(name, tmp_path, request):
        if name in KNOWN_BUGS:
            request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name]))
        _name, data, names = next(v for v in VARIANTS if v[0] == name)
        path = tmp_path / "node.toml"
        path.write_bytes(data)
        assert _problems(path, data, names) == []


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cantor_desktop import config
    path, key, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    sys.stdout.write("go\\n"); sys.stdout.flush()
    sys.stdin.readline()
    started = time.monotonic()
    for i in range(n):
        value = 2000 + i if key == "node.port" else f"model-{i}"
        config.update({key: value}, path)
    print(started, time.monotonic())
""")

READER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cantor_desktop import config
    path = Path(sys.argv[1])
    config.load(path)
    sys.stdout.write("reading\\n"); sys.stdout.flush()
    import select
    stamps = []
    while not select.select([sys.stdin], [], [], 0)[0]:
        config.load(path)   # a ConfigError here means a reader saw half a file
        stamps.append(time.monotonic())
    start, end = map(float, sys.stdin.readline().split())
    print(len(stamps), sum(1 for t in stamps if start <= t <= end))
""")

MIN_READS = 20  # reads while both writers were writing: the reader really overlapped


@pytest.mark.skipif(sys.platform == "win32", reason="the reader polls its stdin with select")
def test_two_writers_at_once_lose_no_key(tmp_path, tally):
    """Two processes update different keys 40 times each, released at the same moment,
    while a third, started first, reads all along: both last values and the user's comment
    and unknown key are in the file, no read ever failed, the writers overlapped each other
    and the reader read at least MIN_READS times while both wrote."""
    t = tally(
        f"node.toml: two writers at once, 3 rounds x 40 updates each, a reader "
        f"throughout (≥ {MIN_READS} reads while both wrote)"
    )
    n = 40
    env = {**os.environ, "PYTHONPATH": str(Path(config.__file__).parent.parent)}
    overlaps: list[str] = []
    for rnd in range(3):
        path = tmp_path / f"r{rnd}" / "node.toml"
        path.parent.mkdir()
        path.write_text('# my settings\n[node]\nport = 7823\n\n[mine]\nkeep = "me"\n')
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert reader.stdout.readline().strip() == "reading", reader.stderr.read()
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(path), key, str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for key in ("node.port", "models.default")
        ]
        for w in writers:
            assert w.stdout.readline().strip() == "go"
        for w in writers:
            w.stdin.write("\n")
            w.stdin.flush()
        errors, spans = [], []
        for w in writers:
            out, err = w.communicate(timeout=120)
            if w.returncode != 0:
                errors.append(
                    err.strip().splitlines()[-1] if err.strip() else f"exit {w.returncode}"
                )
            else:
                spans.append(tuple(map(float, out.split())))
        both = (max(a for a, _ in spans), min(b for _, b in spans)) if len(spans) == 2 else (0, 0)
        out, err = reader.communicate(f"{both[0]} {both[1]}\n", timeout=120)
        if reader.returncode != 0:
            errors.append(
                "reader: "
                + (err.strip().splitlines()[-1] if err.strip() else f"exit {reader.returncode}")
            )
            reads = during = 0
        else:
            reads, during = map(int, out.split())
        overlaps.append(
            f"{during} of {reads} reads in {(both[1] - both[0]) * 1000:.0f} ms of both writing"
        )
        text = path.read_text()
        cfg = config.load(path)
        if errors:
            t.fail(f"round {rnd}: {errors[0]}")
        elif both[1] <= both[0]:
            t.fail(f"round {rnd}: the writers did not overlap")
        elif during < MIN_READS:
            t.fail(f"round {rnd}: the reader read only {during} times while both wrote")
        elif cfg.get("node.port") != 2000 + n - 1 or cfg.get("models.default") != f"model-{n - 1}":
            t.fail(
                f"round {rnd}: lost a key: port {cfg.get('node.port')}, "
                f"default {cfg.get('models.default')}"
            )
        elif "# my settings" not in text or 'keep = "me"' not in text:
            t.fail(f"round {rnd}: lost the user's comment or unknown key")
        else:
            t.ok()
    t.note("; ".join(overlaps))
    assert not t.lost, t.lost
