"""The fault suite's shared parts: the one "tried / survived / lost" line every fault test
prints, and a real node to attack (``NodeUnderTest``). The fixtures built on them are in
tests/faults/conftest.py.

`tests/faults/run.py` reads those lines and writes the table in docs/reliability.md.
The line format (also used by tests that print it themselves) is::

    [faults] WHAT: tried N / survived S / lost L — details
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cantor_desktop.auth.access import bearer
from cantor_desktop.client.node_process import NodeProcess

from .procs import free_port


def report_line(what: str, tried: int, survived: int, lost: int, extra: str = "") -> str:
    return (
        f"[faults] {what}: tried {tried} / survived {survived} / lost {lost}"
        f"{' — ' + extra if extra else ''}"
    )


@dataclass
class Tally:
    """Counts one fault's trials; ``lost`` holds a short reason per trial that failed."""

    what: str
    tried: int = 0
    survived: int = 0
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was seen, besides the counts

    def ok(self) -> None:
        self.tried += 1
        self.survived += 1

    def fail(self, reason: str) -> None:
        self.tried += 1
        self.lost.append(" ".join(reason.split()))  # one line in the report

    def note(self, text: str) -> None:
        self.notes.append(text)

    def line(self) -> str:
        return report_line(
            self.what, self.tried, self.survived, len(self.lost), "; ".join(self.lost + self.notes)
        )


# -- a real node for the API fault tests ------------------------------------------------
# Its own CANTOR_HOME, the sketch engine as default model, and every download address
# pointed at a closed local port: nothing here can reach the internet.

UNREACHABLE = "http://127.0.0.1:9"  # discard port: nothing listens
ENGINE_JOB_RE = re.compile(r"\[Server\] Job [0-9a-f]+ created")


class NodeUnderTest:
    def __init__(self, home: Path):
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        (home / "node.toml").write_text(
            f'[models]\ndefault = "sketch"\n\n[songs]\ndir = "{home / "songs"}"\n'
            f'format = "wav16"\n\n[engines]\nmanifest = "{UNREACHABLE}/engines.json"\n',
            "utf-8",
        )
        env = {
            "CANTOR_HOME": str(home),
            "CANTOR_MANIFEST_URL": f"{UNREACHABLE}/engines.json",
            # the node's keyring is a file in its own home, never the user's
            "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
            "XDG_DATA_HOME": str(home / "xdg-data"),
            "HF_ENDPOINT": UNREACHABLE,
            "HTTPS_PROXY": UNREACHABLE,
            "HTTP_PROXY": UNREACHABLE,
            "NO_PROXY": "127.0.0.1,localhost",
        }
        self.proc = NodeProcess(
            "127.0.0.1", free_port(), env=env, log_path=home / "logs" / "node-child.log"
        )

    @property
    def url(self) -> str:
        return self.proc.url

    @property
    def headers(self) -> dict[str, str]:
        """The node's token, as every request but /v1/health must carry it."""
        return bearer(self.proc.token)

    def start(self) -> "NodeUnderTest":
        asyncio.run(self.proc.start())
        return self

    def stop(self) -> None:
        asyncio.run(self.proc.stop())

    def alive(self) -> bool:
        if not self.proc.running:
            return False
        try:
            return httpx.get(self.url + "/v1/health", timeout=5, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def engine_jobs(self) -> int:
        """How many jobs the sketch engine has been given (its log's "Job … created" lines)."""
        logs = self.home / "logs"
        return sum(
            len(ENGINE_JOB_RE.findall(p.read_text("utf-8", "replace")))
            for p in logs.glob("engine-*.log*")
        )

    def song_count(self) -> int:
        r = httpx.get(
            self.url + "/v1/songs",
            params={"limit": 100000},
            timeout=10,
            trust_env=False,
            headers=self.headers,
        )
        r.raise_for_status()
        return len(r.json()["songs"])

    def make_song(self, timeout: float = 60.0) -> dict:
        """One short instrumental song through the node, waited for until it ends."""
        r = httpx.post(
            self.url + "/v1/songs",
            json={"caption": "fault suite check", "duration": 10, "seed": 1},
            timeout=10,
            trust_env=False,
            headers=self.headers,
        )
        r.raise_for_status()
        sid = r.json()["id"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            song = httpx.get(
                f"{self.url}/v1/songs/{sid}", timeout=10, trust_env=False, headers=self.headers
            ).json()
            if song["state"] in ("done", "failed", "cancelled"):
                return song
            time.sleep(0.1)
        raise AssertionError(f"song {sid} did not end within {timeout} s")
