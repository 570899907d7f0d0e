"""The node's OpenAPI document fuzzed with schemathesis against a real node on 127.0.0.1.

Run: .venv/bin/python tests/faults/run.py  (or: ./run-tests -m slow tests/faults/test_api_fuzz.py -s)

Every operation gets valid (positive) and invalid (negative) examples — a bounded number
(CANTOR_FUZZ_EXAMPLES, default 100 per operation and mode). An example *survives* only when

- a positive one succeeded (2xx), a negative one was refused with a 4xx (schemathesis's
  ``positive_data_acceptance`` / ``negative_data_rejection``, held to those classes), and
- the answer is what the document promises: a documented status and content type, and a
  body that matches the documented response schema (``status_code_conformance``,
  ``content_type_conformance``, ``response_schema_conformance``, ``not_a_server_error``).

No answer, or a node that stopped answering, is a loss too. An operation and mode for which
no example can be generated (``Unsatisfiable``: an operation with no input has no invalid
one) is counted and reported, never silently passed; for a positive mode it is a loss.

The examples point at a world the test keeps ready, as a client would: song ids are the
ids of real songs in the state the operation needs (a running song to cancel, an ended one
to retry or forget, a done one to read, rename and play), upload ids are real uploads, the
model to delete is put in place first, and an upload's positive body is a real WAV file.

Negative examples break the document as the node publishes it: what it calls invalid must
be refused. Positive examples come from request schemas written from the node's own rules
where the document is looser (the song request's model, key, language and caption; a
title's newline; the settings PATCH /v1/config takes), kept cheap (songs of 10–15 s): the
document would otherwise call examples valid that the node rightly refuses.

Left out: the operations that download from the internet (model pull; backend install, use,
update — the node's bundled manifest names real URLs) and POST /v1/node/restart and
/v1/node/shutdown (they end the node on purpose). The node's manifest and Hugging Face addresses point at a closed local port
anyway.
"""

from __future__ import annotations

import copy
import io
import os
import time
from pathlib import Path
from collections import Counter

import httpx
import numpy as np
import pytest
import requests
import soundfile as sf

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,  # noqa: E402
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.config import SchemathesisConfig  # noqa: E402
from schemathesis.core.failures import Failure, FailureGroup  # noqa: E402

from cantor_desktop import config
from cantor_desktop.models import gguf  # noqa: E402
from cantor_desktop.song.request import (
    BATCH_RANGE,
    BPM_RANGE,
    CAPTION_MAX,
    CAPTION_PATTERN,
    DURATION_RANGE,
    LANGUAGES,
    SEED_MAX,
    SONG_FORMATS,
    TIME_SIGNATURES,
)

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("CANTOR_FUZZ_EXAMPLES", "100"))
ONLY = os.environ.get("CANTOR_FUZZ_ONLY", "")  # e.g. "PATCH /v1/config": one operation
LEFT_OUT = {
    ("POST", "/v1/models/pull"): "downloads a model from the internet",
    ("POST", "/v1/backends/install"): "downloads an engine build",
    ("POST", "/v1/backends/use"): "downloads an engine build",
    ("POST", "/v1/backends/update"): "fetches the published manifest",
    ("POST", "/v1/node/restart"): "ends the node on purpose",
    ("POST", "/v1/node/shutdown"): "ends the node on purpose",
}
MODEL_TO_DELETE = "acestep-v15-turbo-Q8_0"
ADAPTER_TO_DELETE = "fuzz-style"
STYLE = "fuzz style"  # the style the operations on one style act on
STYLE_RENAMED = "fuzz style renamed"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXPECTED = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ["2xx"]},
            "negative_data_rejection": {"expected-statuses": ["4xx"]},
        }
    }
)
SSE_STREAMS = {("GET", "/v1/events")}  # endless: the first event is read, then it is closed
NOT_HERE = {("GET", "/v1/pool"): (404, "not_in_pool")}
"""Operations whose valid request this node answers with a documented 4xx, and why: the
fuzzed node is in no pool (tests/test_pool.py and tests/faults/test_pool_attack_faults.py
ask GET /v1/pool of members). Checked as that answer instead of a 2xx."""


# -- request schemas written from the node's own rules ------------------------------------------


def _song_body_schema() -> dict:
    """Valid songs (cancelled at once) and, in negative mode, bodies that break a rule."""
    return {
        "type": "object",
        "required": ["caption"],
        "additionalProperties": False,
        "properties": {
            # a letter or digit: Python's strip() also takes \\x1c-\\x1f, which JSON
            # Schema's \\S (ECMAScript) leaves, so "\\S" alone lets a blank caption by
            "caption": {
                "type": "string",
                "minLength": 1,
                "maxLength": CAPTION_MAX,
                # no control character (tabs and line breaks are text)
                "pattern": f"{CAPTION_PATTERN[:-1]}[A-Za-z0-9]{CAPTION_PATTERN[1:]}",
            },
            "lyrics": {"type": "string", "maxLength": 200},
            "duration": {
                "type": "number",
                "minimum": DURATION_RANGE[0],
                "maximum": DURATION_RANGE[0] + 5,
            },
            "bpm": {"type": "integer", "minimum": BPM_RANGE[0], "maximum": BPM_RANGE[1]},
            "key": {"type": "string", "enum": ["C major", "F# minor", "bb MAJ"]},
            "time_signature": {"type": "integer", "enum": list(TIME_SIGNATURES)},
            "language": {"type": "string", "enum": list(LANGUAGES)},
            "seed": {"type": "integer", "minimum": -1, "maximum": SEED_MAX},
            "model": {"type": "string", "enum": ["sketch"]},
            "format": {"type": "string", "enum": list(SONG_FORMATS)},
            "batch": {"type": "integer", "minimum": BATCH_RANGE[0], "maximum": BATCH_RANGE[1]},
        },
    }


def _generation_body_schema(doc_schema: dict) -> dict:
    """Lemonade's names for the same rules (a valid one is really made: 10–15 s songs)."""
    song = _song_body_schema()["properties"]
    props = dict(doc_schema.get("properties", {}))
    props.update(
        {
            "prompt": song["caption"],
            "model": song["model"],
            "key": song["key"],
            "vocal_language": song["language"],
            "lyrics": song["lyrics"],
            "duration": song["duration"],
            "bpm": song["bpm"],
            "seed": song["seed"],
            "time_signature": song["time_signature"],
        }
    )
    return {**doc_schema, "properties": props, "additionalProperties": False}


def _settings_schema() -> dict:
    """Settings PATCH /v1/config may change (not the machine's own), each with its rule."""
    props = {}
    for key, opt in config.OPTIONS.items():
        if opt.local_only:
            continue
        if opt.choice_list():
            props[key] = {"type": "string", "enum": list(opt.choice_list())}
        elif opt.kind is bool:
            props[key] = {"type": "boolean"}
        elif opt.kind is int and opt.check is None:
            props[key] = {"type": "integer", "minimum": opt.minimum, "maximum": opt.maximum}
        elif opt.kind is list:
            continue
        else:  # a value with a rule of its own: its default passes it
            props[key] = {"enum": [opt.default()]}
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": props,
    }


def _wav(seconds: float = 1.0, rate: int = 44100) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    buf = io.BytesIO()
    sf.write(
        buf,
        (0.3 * np.sin(2 * np.pi * 330 * t)).astype("float32"),
        rate,
        format="WAV",
        subtype="PCM_16",
    )
    return buf.getvalue()


# -- the world the examples point at --------------------------------------------------------


class World:
    """The node's songs, uploads and models in the states the operations need."""

    def __init__(self, node):
        self.node = node
        self.http = httpx.Client(
            base_url=node.url, headers=node.headers, timeout=60, trust_env=False
        )
        self.wav = _wav()
        self.done = node.make_song()
        self.upload_id = self.upload()
        self.uploads = 0
        self.adapters = 0

    def close(self) -> None:
        self.http.close()

    def _ok(self, r: httpx.Response) -> dict:
        assert r.is_success, f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}"
        return r.json()

    def live_song(self) -> str:
        """A queued or running song (long, so it is still there when the example acts)."""
        return self._ok(
            self.http.post(
                "/v1/songs",
                json={"caption": "fuzz: a song to act on", "duration": 600, "model": "sketch"},
            )
        )["id"]

    def ended_song(self) -> str:
        """A cancelled song (the cancel is asked, then waited for: it ends the engine job)."""
        sid = self.live_song()
        self.cancel(sid)
        deadline = time.monotonic() + 60
        while self._ok(self.http.get(f"/v1/songs/{sid}"))["state"] != "cancelled":
            assert time.monotonic() < deadline, f"song {sid} was not cancelled within 60 s"
            time.sleep(0.02)
        return sid

    def cancel(self, sid: str) -> None:
        self.http.post(f"/v1/songs/{sid}/cancel")

    def upload(self) -> str:
        return self._ok(
            self.http.post(
                "/v1/uploads",
                params={"name": "fuzz.wav"},
                content=self.wav,
                headers={"Content-Type": "audio/wav"},
            )
        )["id"]

    def install_model(self) -> None:
        """The DiT of MODEL_TO_DELETE in the node's library (a header-only GGUF)."""
        folder = self.node.home / "models" / "acestep"
        folder.mkdir(parents=True, exist_ok=True)
        gguf.write_header_only(folder / f"{MODEL_TO_DELETE}.gguf", gguf.ARCH_DIT)

    def leave_parts(self) -> None:
        """What a stopped download of MODEL_TO_DELETE leaves: a .part file."""
        folder = self.node.home / "models" / "acestep"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{MODEL_TO_DELETE}.gguf.part").write_bytes(b"GGUF" + bytes(1000))

    def gguf_file(self) -> str:
        """A GGUF on the node's machine, outside its library (to import where it is)."""
        path = self.node.home / "elsewhere" / "my-dit-Q8_0.gguf"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            gguf.write_header_only(path, gguf.ARCH_DIT)
        return str(path)

    def gguf_upload(self) -> tuple[str, bytes]:
        """A GGUF to upload, under a name the library does not have yet."""
        self.uploads += 1
        name = f"fuzz-upload-{self.uploads}-Q8_0.gguf"
        path = self.node.home / "to-upload" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        gguf.write_header_only(path, gguf.ARCH_DIT)
        return name, path.read_bytes()

    def adapter_file(self) -> Path:
        """A new ComfyUI LoRA made for ACE-Step, on the node's machine, under a name the
        node's adapters folder does not have yet."""
        from support.adapter_files import comfyui_file

        self.adapters += 1
        return comfyui_file(self.node.home / "elsewhere" / f"fuzz-lora-{self.adapters}.safetensors")

    def models_elsewhere(self) -> tuple[str, str]:
        """A folder on the node's machine holding a file named like one of the catalogue's
        (another tool's download): (the folder, the file)."""
        folder = self.node.home / "other-tool"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "vae-BF16.gguf"
        if not path.exists():
            gguf.write_header_only(path, gguf.ARCH_VAE)
        return str(folder), str(path)

    def install_style(self) -> None:
        """STYLE kept by the node, and no STYLE_RENAMED (so renaming to it is free)."""
        self.http.delete(f"/v1/styles/{STYLE_RENAMED}")
        self._ok(
            self.http.post(
                "/v1/styles",
                json={"name": STYLE, "fields": {"caption": "fuzz"}, "replace": True},
            )
        )

    def style_file(self) -> bytes:
        """STYLE as one file, as GET /v1/styles/{name}/file gives it."""
        self.install_style()
        r = self.http.get(f"/v1/styles/{STYLE}/file")
        assert r.status_code == 200, r.text
        return r.content

    def install_adapter(self) -> None:
        """ADAPTER_TO_DELETE in the node's adapters folder (written there, as a user would)."""
        from support.adapter_files import comfyui_file

        folder = self.node.home / "models" / "adapters"
        folder.mkdir(parents=True, exist_ok=True)
        comfyui_file(folder / f"{ADAPTER_TO_DELETE}.safetensors")

    def config_text(self) -> str:
        return (self.node.home / "node.toml").read_text("utf-8")

    def restore_config(self, text: str) -> None:
        (self.node.home / "node.toml").write_text(text, "utf-8")


def _enrich(doc: dict, world: World, positive: bool) -> dict:
    """The document with its resource parameters pointed at the world; for positive
    examples also request schemas written from the node's rules (see the module doc)."""
    doc = copy.deepcopy(doc)
    paths = doc["paths"]

    def body(path: str, method: str, schema: dict) -> None:
        paths[path][method]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }

    if positive:
        body("/v1/songs", "post", _song_body_schema())
        gen = paths["/v1/audio/generations"]["post"]["requestBody"]["content"]
        body(
            "/v1/audio/generations",
            "post",
            _generation_body_schema(gen["application/json"]["schema"]),
        )
        patch = paths["/v1/songs/{song_id}"]["patch"]["requestBody"]["content"]
        patch["application/json"]["schema"]["properties"]["title"]["pattern"] = "^[^\\n\\r]*$"
        body("/v1/config", "patch", _settings_schema())
        body(
            "/v1/models/import",
            "post",
            {
                "type": "object",
                "required": ["path"],
                "additionalProperties": False,
                "properties": {"path": {"enum": [world.gguf_file()]}},
            },
        )
        body(
            "/v1/hub/token",
            "put",
            {
                "type": "object",
                "required": ["token"],
                "additionalProperties": False,
                "properties": {
                    "token": {
                        "type": "string",  # printable, no space
                        "pattern": "^hf_[!-~]{8,60}$",
                    }
                },
            },
        )
        body(
            "/v1/lm",
            "post",
            {
                "type": "object",
                "required": ["mode", "caption"],
                "additionalProperties": False,
                "properties": {
                    "mode": {"enum": ["inspire", "format"]},
                    "caption": _song_body_schema()["properties"]["caption"],
                    "lyrics": {"type": "string", "maxLength": 200},
                    "model": {"enum": ["sketch"]},
                },
            },
        )
        body(
            "/v1/understand",
            "post",
            {
                "type": "object",
                "required": ["source"],
                "additionalProperties": False,
                "properties": {
                    "source": {
                        "enum": [{"song": world.done["id"], "take": 1}, {"upload": world.upload_id}]
                    },
                    "model": {"enum": ["sketch"]},
                },
            },
        )
        folder, found = world.models_elsewhere()
        body(
            "/v1/models/adopt",
            "post",
            {
                "type": "object",
                "required": ["paths", "folders"],
                "additionalProperties": False,
                "properties": {
                    "paths": {"type": "array", "minItems": 1, "items": {"enum": [found]}},
                    "folders": {"enum": [[folder]]},
                    "copy": {"type": "boolean"},
                },
            },
        )
        body(
            "/v1/styles",
            "post",
            {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"enum": [STYLE, "fuzz style 2"]},
                    "fields": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "caption": _song_body_schema()["properties"]["caption"],
                            "bpm": _song_body_schema()["properties"]["bpm"],
                            "key": _song_body_schema()["properties"]["key"],
                        },
                    },
                    "seed": {"enum": ["random", 7]},
                    "from": {"enum": [{"song": world.done["id"], "take": 1}]},
                    "reference": {"enum": [{"upload": world.upload_id}, None]},
                    "replace": {"enum": [True]},
                },
            },
        )
        body(
            "/v1/styles/{name}/rename",
            "post",
            {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": {"enum": [STYLE_RENAMED]}},
            },
        )
    takes = len(world.done["takes"])
    for item in paths.values():
        for op in item.values():
            for param in op.get("parameters", []):
                name = param.get("name")
                if name == "name" and "style" in str(op.get("operationId", "")):
                    param["schema"] = {"type": "string", "enum": [STYLE]}
                elif name == "song_id":
                    param["schema"] = {"type": "string", "enum": [world.done["id"]]}
                elif name == "upload_id":
                    param["schema"] = {"type": "string", "enum": [world.upload_id]}
                elif name == "name" and param.get("in") == "path":
                    param["schema"] = {
                        "type": "string",
                        "enum": [
                            ADAPTER_TO_DELETE
                            if "adapters" in str(op.get("operationId", ""))
                            else MODEL_TO_DELETE
                        ],
                    }
                elif name == "take":
                    param["schema"] = {"type": "integer", "minimum": 1, "maximum": takes}
    return doc


def _prepare(key: tuple[str, str], case, world: World, positive: bool) -> None:
    """Point the example at a resource in the state its operation needs. Only a value that
    is the placeholder (valid) is swapped for another valid one: a negative example stays
    negative."""
    params = case.path_parameters or {}
    if params.get("song_id") == world.done["id"]:
        if key == ("POST", "/v1/songs/{song_id}/cancel"):
            params["song_id"] = world.live_song()
        elif key in (("POST", "/v1/songs/{song_id}/retry"), ("DELETE", "/v1/songs/{song_id}")):
            params["song_id"] = world.ended_song()
    if key == ("DELETE", "/v1/uploads/{upload_id}") and params.get("upload_id") == world.upload_id:
        params["upload_id"] = world.upload()
    if key == ("DELETE", "/v1/models/{name}"):
        world.install_model()
    if key == ("DELETE", "/v1/models/{name}/parts"):
        world.leave_parts()
    if key == ("POST", "/v1/uploads") and positive:
        case.body, case.media_type = world.wav, "application/octet-stream"  # documented
    if key == ("DELETE", "/v1/adapters/{name}"):
        world.install_adapter()
    if key == ("POST", "/v1/adapters") and positive:
        case.body = {"path": str(world.adapter_file())}
    if key == ("POST", "/v1/adapters/upload") and positive:
        path = world.adapter_file()
        case.query = {**(case.query or {}), "name": path.stem}
        case.body, case.media_type = path.read_bytes(), "application/octet-stream"
    if key[1].startswith("/v1/styles/{name}"):
        world.install_style()
    if key == ("POST", "/v1/styles/import") and positive:
        case.query = {**(case.query or {}), "replace": "true"}
        case.body, case.media_type = world.style_file(), "application/octet-stream"
    if key == ("POST", "/v1/models/upload") and positive:
        name, data = world.gguf_upload()
        case.query = {**(case.query or {}), "name": name}
        case.body, case.media_type = data, "application/octet-stream"


def _call(key: tuple[str, str], case, node) -> requests.Response | httpx.Response:
    if key not in SSE_STREAMS:
        return case.call(base_url=node.url, timeout=60, headers=node.headers)
    kwargs = case.as_transport_kwargs(base_url=node.url, headers=node.headers)
    with requests.request(**kwargs, stream=True, timeout=60) as r:
        first = b""
        if r.status_code == 200:
            for line in r.iter_lines():
                first += line + b"\n"
                if not line and first.strip():
                    break
        else:
            first = r.content
        answer = httpx.Response(
            r.status_code,
            headers=dict(r.headers),
            content=first,
            request=httpx.Request(kwargs["method"], kwargs["url"]),
        )
        answer._elapsed = r.elapsed  # what a fully read httpx response carries
        return answer


def _operations(schema):
    for result in schema.get_all_operations():
        op = result.ok()
        if (
            op.method.upper(),
            op.path,
        ) not in LEFT_OUT and ONLY in f"{op.method.upper()} {op.path}":
            yield op


def test_openapi_fuzz_answers_as_documented(node_under_test, tally):
    node = node_under_test
    world = World(node)
    doc = httpx.get(
        node.url + "/openapi.json", timeout=10, trust_env=False, headers=node.headers
    ).json()
    schemas = {
        mode: schemathesis.openapi.from_dict(
            _enrich(doc, world, mode is GenerationMode.POSITIVE), config=EXPECTED
        )
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    }
    by_mode = {
        mode: {(o.method.upper(), o.path): o for o in _operations(schema)}
        for mode, schema in schemas.items()
    }
    operations = list(by_mode[GenerationMode.POSITIVE].values())
    assert len(operations) >= (1 if ONLY else 15), [f"{o.method} {o.path}" for o in operations]

    t = tally(
        f"OpenAPI fuzz: {len(operations)} operations x {EXAMPLES} examples x "
        f"positive/negative, answers checked against the document"
    )
    statuses: Counter[str] = Counter()
    not_negative: Counter[str] = Counter()
    examples: Counter[tuple] = Counter()
    unsatisfiable: list[str] = []
    config_text = world.config_text()
    try:
        for first in operations:
            key = (first.method.upper(), first.path)
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                positive = mode is GenerationMode.POSITIVE
                op = by_mode[mode][key]
                checks = CHECKS + [
                    positive_data_acceptance if positive else negative_data_rejection
                ]
                not_here = NOT_HERE.get(key) if positive else None
                if not_here is not None:
                    checks = list(CHECKS)

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=op.as_strategy(generation_mode=mode))
                def run(case):
                    label = f"{key[0]} {op.path} [{mode.value}]"
                    examples[(key, mode.value)] += 1
                    _prepare(key, case, world, positive)
                    try:
                        response = _call(key, case, node)
                    except Exception as exc:  # noqa: BLE001 - no answer is a loss
                        statuses[f"{mode.value} none"] += 1
                        t.fail(f"{label}: no answer ({type(exc).__name__}: {str(exc)[:100]})")
                        return
                    status = response.status_code
                    statuses[f"{mode.value} {status // 100}xx"] += 1
                    try:
                        case.validate_response(response, checks=checks)
                    except (Failure, FailureGroup, AssertionError) as exc:  # a failed check
                        failures = list(getattr(exc, "exceptions", [exc]))
                        why = "; ".join(
                            " / ".join(x for x in str(f).strip().splitlines() if x.strip())[:400]
                            for f in failures
                        )
                        sent = case.body if isinstance(case.body, (dict, list, str)) else "(bytes)"
                        t.fail(
                            f"{label}: {status} {response.text[:160]!r} — {why} — sent "
                            f"{case.path_parameters or ''} {case.query or ''} {sent!r:.200}"
                        )
                    else:
                        if not_here is not None:
                            kind = (response.json().get("error") or {}).get("type")
                            if (status, kind) == not_here:
                                t.ok()
                            else:
                                t.fail(f"{label}: {status} {kind}, not {not_here}")
                        elif not positive and status // 100 != 4:
                            # schemathesis found the mutation valid once on the wire (a
                            # number sent as text, …): not an invalid example after all
                            not_negative[f"{key[0]} {op.path}"] += 1
                        else:
                            t.ok()
                    finally:
                        if key == ("PATCH", "/v1/config"):
                            world.restore_config(config_text)
                        if status == 202 and key[1] in ("/v1/songs", "/v1/songs/{song_id}/retry"):
                            world.cancel(response.json()["id"])  # a valid song: end it now

                try:
                    run()
                except Unsatisfiable:
                    unsatisfiable.append(f"{key[0]} {op.path} [{mode.value}]")
                    if positive:
                        t.fail(
                            f"{key[0]} {op.path}: no valid example can be made from the document"
                        )
                if not node.alive():
                    t.fail(f"the node died after {key[0]} {op.path} [{mode.value}]")
                    break
    finally:
        world.restore_config(config_text)
        world.close()
    t.note("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    t.note(
        f"no example could be made for {len(unsatisfiable)} operation(s) and mode(s) (an "
        f"operation without input has no invalid one): " + ", ".join(unsatisfiable)
        if unsatisfiable
        else "every operation had examples in both modes"
    )
    if not_negative:
        t.note(
            f"{sum(not_negative.values())} negative examples were valid once sent and are "
            f"not counted: " + ", ".join(f"{k} {v}" for k, v in sorted(not_negative.items()))
        )
    print("\nanswers:", dict(sorted(statuses.items())))
    assert node.alive()
    never = [
        f"{m} {p}"
        for m, p in by_mode[GenerationMode.POSITIVE]
        if not examples[((m, p), "positive")]
    ]
    assert not never, f"operations that never got a valid example: {never}"
    assert not t.lost, "\n".join(dict.fromkeys(t.lost))
