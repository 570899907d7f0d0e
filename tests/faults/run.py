"""Run the whole fault suite and print one "tried / survived / lost" table.

    .venv/bin/python tests/faults/run.py            # every fault, table into docs/reliability.md
    .venv/bin/python tests/faults/run.py --no-write # print only
    .venv/bin/python tests/faults/run.py -k config  # a part (extra arguments go to pytest)

It runs ``pytest -m slow tests/faults -s`` (offscreen), reads the line each fault test prints
(``[faults] WHAT: tried N / survived S / lost L`` or ``WHAT: tried N, survived S, lost L``),
and adds pytest's own outcome (failed tests and strict xfails = known bugs). The exit code is
pytest's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
COMMAND = ".venv/bin/python tests/faults/run.py"
LINE_RE = re.compile(
    r"^(?:\[faults\]\s*)?(?P<what>[^\[\]].*?): tried (?P<tried>\d+)\s*[,/]\s*"
    r"survived (?P<survived>\d+)\s*[,/]\s*lost (?P<lost>\d+)(?P<rest>.*)$"
)
XFAIL_RE = re.compile(r"^XFAIL (?P<test>\S+(?:\[.*?\])?) - (?P<reason>.*)$")
OUTCOME_RE = re.compile(r"^(FAILED|ERROR) (?P<test>\S+)")


def machine() -> str:
    """The machine, as the benchmarks describe it (bench/common.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from common import machine_facts

    f = machine_facts()
    return f"{f['os']}, {f['cpu']}, {f['cores']} cores, {f['ram']} RAM"


def run(pytest_args: list[str]) -> tuple[int, list[dict], list[tuple[str, str]], list[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "slow",
        "-s",
        "-rxfE",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "faults"),
        *pytest_args,
    ]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    rows: list[dict] = []
    xfails: list[tuple[str, str]] = []
    failed: list[str] = []
    summary = ""
    assert proc.stdout is not None
    for raw in proc.stdout:
        sys.stdout.write(raw)
        sys.stdout.flush()
        line = raw.strip()
        if m := LINE_RE.match(line):
            rest = m.group("rest").lstrip(" ;—-").strip()
            rows.append(
                {
                    "what": m.group("what").strip(),
                    "tried": int(m.group("tried")),
                    "survived": int(m.group("survived")),
                    "lost": int(m.group("lost")),
                    "note": rest,
                }
            )
        elif m := XFAIL_RE.match(line):
            xfails.append((m.group("test"), m.group("reason")))
        elif m := OUTCOME_RE.match(line):
            failed.append(m.group("test"))
        elif re.match(r"^=+ .*(passed|failed|error).* in [\d.]+s", line):
            summary = line.strip("= ")
    return proc.wait(), rows, xfails, failed, summary


def table(rows: list[dict]) -> str:
    total = [sum(r[k] for r in rows) for k in ("tried", "survived", "lost")]
    width = max([len(r["what"]) for r in rows] + [len("overall")])
    out = [
        f"| {'fault':<{width}} | tried | survived | lost |",
        f"|{'-' * (width + 2)}|------:|---------:|-----:|",
    ]
    for r in rows:
        out.append(
            f"| {r['what']:<{width}} | {r['tried']:>5} | {r['survived']:>8} | {r['lost']:>4} |"
        )
    out.append(f"| {'**overall**':<{width}} | {total[0]:>5} | {total[1]:>8} | {total[2]:>4} |")
    return "\n".join(out)


def write_doc(rows, xfails, failed, summary, code, extra_args) -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = COMMAND + (" " + " ".join(extra_args) if extra_args else "")
    lost_notes = [f"- **{r['what']}**: {r['note']}" for r in rows if r["lost"] and r["note"]]
    seen_notes = [f"- **{r['what']}**: {r['note']}" for r in rows if not r["lost"] and r["note"]]
    bugs = [f"- `{test}`: {reason}" for test, reason in xfails]
    parts = [
        "# Reliability: the fault suite",
        "",
        "Every fault Cantor is built to survive, tried on purpose against real processes and "
        "real sockets on 127.0.0.1 (nothing reaches the internet). A trial *survives* when "
        "Cantor ends in a correct state with a clear reason; it is *lost* otherwise.",
        "",
        "Run it (about 3 minutes on 2 cores; every test is marked `slow`):",
        "",
        "```",
        COMMAND + "              # runs, prints the table, rewrites this page",
        COMMAND + " --no-write   # print only",
        "./run-tests -m slow tests/faults -s            # the same tests, plain pytest",
        "```",
        "",
        f"## Latest run — {now}",
        "",
        f"Machine: {machine()}. Command: `{command}`. pytest: {summary or 'no summary'} "
        f"(exit code {code}).",
        "",
        table(rows),
        "",
    ]
    if lost_notes:
        parts += [
            "What was lost (each is a known bug below, reported to the lead):",
            "",
            *lost_notes,
            "",
        ]
    if seen_notes:
        parts += [
            "How this run counted (what the tests saw besides the counts):",
            "",
            *seen_notes,
            "",
        ]
    if bugs:
        parts += [
            "Known bugs (strict xfail tests: they turn into failures once fixed, so the "
            "mark gets removed):",
            "",
            *bugs,
            "",
        ]
    if failed:
        parts += ["Failing tests in this run:", "", *[f"- `{t}`" for t in failed], ""]
    parts += [
        "## What each fault does",
        "",
        "- **engine kill -9 mid-song** (`test_node_faults.py`): the engine is killed at random "
        "moments of songs until 20 kills have landed mid-song — the node had that song on "
        "that engine when the signal was sent, the song ran across the signal, and the "
        "process ended; only those are counted (the others are reported), and fewer than 20 "
        "fail the test. Each such song ends failed with the engine's reason (or done with a "
        "whole file when the engine had already handed it over), and the next song is done.",
        "- **node kill -9 with a queue** (`test_node_faults.py`): the node is killed 10 times "
        "while songs of its batch are queued or running; after the restart no song is lost: "
        'the running one is failed "node stopped" (and done once retried), the rest run.',
        "- **leftover processes** (`test_process_faults.py`, Linux): the real app (offscreen) "
        "with its node and the sketch engine; kill -9 the app 20 times (each time a new app "
        "that made a song: its node and engine must end with it), then under one app kill -9 "
        "the node 20 times (its engine must end, the app starts one new node, never two, and "
        "the next song is done) and the engine 20 times (nothing of it stays, not even a "
        "zombie). A round is lost when any process is left; the goal is 0. Windows and macOS: "
        'packaging/README.md, "Process life on Windows and macOS".',
        "- **download cuts, flipped bytes, disk full** (`test_download_faults.py`): a download "
        "cut at 50 random offsets resumes byte-identical; a flipped byte is refused and never "
        "installed; a full disk (tmpfs) is a clear error that keeps the partial file.",
        "- **archives** (`test_archive_faults.py`): absolute paths, `..`, links out, hard links, "
        "zip bombs, the link chain `a -> .` then `a/a/esc -> ../../etc` (tar and zip), 20 000 "
        'tiny entries and a 48 MiB zip "symlink" entry are refused, nothing is written '
        "outside, no link leads out and memory stays under 8 MiB; setuid/setgid 0o6777 files "
        "are unpacked as 0o755.",
        "- **manifests** (`test_manifest_faults.py`): unsigned, tampered (a byte, a build "
        "added, line endings), wrongly keyed and malformed signatures, a signature of another "
        "manifest, signed builds on a foreign, look-alike or plain-http host, a forbidden "
        "middle redirect hop (manifest and .sig; evil.example is never asked), file:// and "
        "endless redirects, endless, 1 GB-declared and gzip bodies, an endless .sig: each "
        "refused with the reason, the built-in manifest kept, nothing cached, memory under "
        "16 MiB; a signed manifest, direct and through loopback redirects, is accepted (the "
        "control).",
        "- **node.toml** (`test_config_faults.py`): 40 malformed or hostile files (bad types, "
        "1e400, 10**30, NaN, dates, 10000-deep arrays, tables where values belong and back, "
        "duplicate keys, BOMs, UTF-16, Latin-1, NUL bytes, lone CR, 1 MB strings, random "
        "binary) each give a ConfigError naming the key or the line and column; the file is "
        "byte-identical after `load`, `update` and `set_from_text`, no temp file is left, and "
        "`load_or_defaults` gives the app the defaults. Two processes update different keys "
        "40 times at once while a third, started before them, reads all along: no key lost, "
        "the user's comment and unknown key kept, no read sees half a file; a round counts "
        "only when the writers overlapped and the reader read at least 20 times while both "
        "wrote.",
        "- **song request** (`test_request_faults.py`): 88 bad inputs over every field of the "
        "request and the body itself (wrong types, out of range, NaN/Infinity, 10**30, unknown "
        "fields, broken or 100000-deep JSON, non-UTF-8) on `POST /v1/songs`, and 45 on the "
        "Lemonade-style `POST /v1/audio/generations` under its own field names, against a real "
        "node: each a 4xx whose JSON "
        "error names the field; the queue does not grow and the sketch engine's log gets no "
        'new "Job … created" line (a good song before and after proves the check is live).',
        "- **OpenAPI fuzz** (`test_api_fuzz.py`): schemathesis generates valid and invalid "
        "examples for every operation of the node's `/openapi.json` against a real node. A "
        "valid example survives only with a 2xx, an invalid one only with a 4xx, and every "
        "answer must match the document (status, content type, response schema); no answer "
        "or a node that stops answering is lost. Invalid examples break the published "
        "document; valid ones come from the node's own request rules where the document is "
        "looser, and point at real songs, uploads and models in the state each operation "
        "needs. Examples that are valid once sent, and operations with no invalid input, are "
        "not counted and are reported. Model pull, backend install/use/update (they download) "
        "and node restart are left out. CANTOR_FUZZ_EXAMPLES sets the examples per operation "
        "and mode.",
        "",
    ]
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text("\n".join(parts) + _kept_sections(), "utf-8")
    print(f"\nwrote {DOC.relative_to(ROOT)}")


KEPT_FROM = "\n## The real engine"  # written by hand from tests/real_engine: kept


def _kept_sections() -> str:
    try:
        text = DOC.read_text("utf-8")
    except OSError:
        return ""
    at = text.find(KEPT_FROM)
    return text[at:] if at >= 0 else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="do not rewrite docs/reliability.md")
    args, pytest_args = ap.parse_known_args()
    code, rows, xfails, failed, summary = run(pytest_args)
    print("\n" + table(rows) if rows else "\nno fault lines were printed")
    for test, reason in xfails:
        print(f"known bug: {test}: {reason}")
    for test in failed:
        print(f"FAILED: {test}")
    if not args.no_write and rows:
        write_doc(rows, xfails, failed, summary, code, pytest_args)
    return code


if __name__ == "__main__":
    sys.exit(main())
