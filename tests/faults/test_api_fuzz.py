"""The node's OpenAPI document fuzzed with schemathesis against a real node on 127.0.0.1.

Run: .venv/bin/python tests/faults/run.py  (or: ./run-tests -m slow tests/faults/test_api_fuzz.py -s)

Every operation gets valid (positive) and invalid (negative) examples — a bounded number
(CANTOR_FUZZ_EXAMPLES, default 100 per operation and mode) so the whole run takes a couple of
minutes. A "lost" example is a 5xx answer, no answer at all, or a node that stopped answering.

Left out: the operations that download from the internet (model pull; backend install, use,
update — the node's bundled manifest names real URLs) and POST /v1/node/restart and
/v1/node/shutdown (they end the node on purpose). The node's manifest and Hugging Face addresses point at a closed local port
anyway.
"""

from __future__ import annotations

import os

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("CANTOR_FUZZ_EXAMPLES", "100"))
LEFT_OUT = {
    ("POST", "/v1/models/pull"): "downloads a model from the internet",
    ("POST", "/v1/backends/install"): "downloads an engine build",
    ("POST", "/v1/backends/use"): "downloads an engine build",
    ("POST", "/v1/backends/update"): "fetches the published manifest",
    ("POST", "/v1/node/restart"): "ends the node on purpose",
    ("POST", "/v1/node/shutdown"): "ends the node on purpose",
}


def _song_body_schema() -> dict:
    """POST /v1/songs declares no body in the document (the handler reads the raw JSON), so
    the fuzz gets one written from the song request's rules: positive examples are valid
    songs (cancelled at once), negative ones break a rule."""
    from cantor_desktop.config import SONG_FORMATS
    from cantor_desktop.song_request import (BATCH_RANGE, BPM_RANGE, CAPTION_MAX,
                                             DURATION_RANGE, LANGUAGES, SEED_MAX,
                                             TIME_SIGNATURES)
    return {"type": "object", "required": ["caption"], "additionalProperties": False,
            "properties": {
                "caption": {"type": "string", "minLength": 1, "maxLength": CAPTION_MAX,
                            "pattern": "\\S"},
                "lyrics": {"type": "string", "maxLength": 200},
                "duration": {"type": "number", "minimum": DURATION_RANGE[0],
                             "maximum": DURATION_RANGE[0] + 5},
                "bpm": {"type": "integer", "minimum": BPM_RANGE[0], "maximum": BPM_RANGE[1]},
                "key": {"type": "string", "enum": ["C major", "F# minor", "bb MAJ"]},
                "time_signature": {"type": "integer", "enum": list(TIME_SIGNATURES)},
                "language": {"type": "string", "enum": list(LANGUAGES)},
                "seed": {"type": "integer", "minimum": -1, "maximum": SEED_MAX},
                "model": {"type": "string", "enum": ["sketch"]},
                "format": {"type": "string", "enum": list(SONG_FORMATS)},
                "batch": {"type": "integer", "minimum": BATCH_RANGE[0],
                          "maximum": BATCH_RANGE[1]}}}


def _enrich(doc: dict, song_ids: list[str]) -> dict:
    """The document, plus a body for POST /v1/songs when it declares none, song durations kept
    short (valid songs are really made: /v1/audio/generations answers when the song is done),
    and real song ids as explicit examples."""
    songs = doc["paths"]["/v1/songs"]["post"]
    if "requestBody" not in songs:
        songs["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": _song_body_schema()}}}
    for item in doc["paths"].values():
        for op in item.values():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            props = body.get("schema", {}).get("properties", {})
            if isinstance(props.get("duration"), dict):
                props["duration"] = {"type": "number", "minimum": 10, "maximum": 15}
            for param in op.get("parameters", []):
                if param.get("name") == "song_id":
                    param["examples"] = {f"song{i}": {"value": sid}
                                         for i, sid in enumerate(song_ids)}
    return doc


def _operations(schema):
    for result in schema.get_all_operations():
        op = result.ok()
        if (op.method.upper(), op.path) not in LEFT_OUT:
            yield op


def test_openapi_fuzz_no_500_no_crash(node_under_test, tally):
    node = node_under_test
    done = node.make_song()
    doc = httpx.get(node.url + "/openapi.json", timeout=10, trust_env=False,
                    headers=node.headers).json()
    schema = schemathesis.openapi.from_dict(_enrich(doc, [done["id"]]))
    operations = list(_operations(schema))
    assert len(operations) >= 10, [f"{o.method} {o.path}" for o in operations]

    t = tally(f"OpenAPI fuzz: {len(operations)} operations x {EXAMPLES} examples x "
              f"positive/negative")
    failures: list[str] = []
    statuses: dict[str, int] = {}
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case):
                label = f"{op.method.upper()} {case.formatted_path}"
                try:
                    response = case.call(base_url=node.url, timeout=30, headers=node.headers)
                    status = response.status_code
                except Exception as exc:  # noqa: BLE001 - no answer is a loss
                    status, why = None, f"{type(exc).__name__}: {exc}"
                klass = f"{status // 100}xx" if status else "none"
                statuses[klass] = statuses.get(klass, 0) + 1
                if op.path == "/v1/songs" and op.method.upper() == "POST":
                    statuses[f"POST /v1/songs {klass}"] = statuses.get(
                        f"POST /v1/songs {klass}", 0) + 1
                if status is None:
                    t.fail(f"{label}: no answer ({why[:100]})")
                elif status >= 500:
                    t.fail(f"{label} [{mode.value}]: {status} {response.text[:150]}")
                else:
                    t.ok()
                if status == 202 and op.path == "/v1/songs":     # a valid song: end it now
                    httpx.post(f"{node.url}/v1/songs/{response.json()['id']}/cancel",
                               timeout=10, trust_env=False, headers=node.headers)
                if status is None or status >= 500:
                    failures.append(t.lost[-1])

            try:
                run()
            except Unsatisfiable:
                pass        # nothing to break: e.g. no parameters, so no negative examples
            if not node.alive():
                t.fail(f"the node died after {op.method.upper()} {op.path} [{mode.value}]")
                failures.append(t.lost[-1])
                break
    print("\nstatus classes:", dict(sorted(statuses.items())))
    assert node.alive()
    assert not failures, "\n".join(dict.fromkeys(failures))
