"""ace-server's request fields: defaults, validation messages, sparse output."""

from __future__ import annotations

import json
import re

DEFAULTS: dict = {
    "caption": "",
    "lyrics": "",
    "bpm": 0,
    "duration": 0,
    "keyscale": "",
    "timesignature": "",
    "vocal_language": "",
    "seed": -1,
    "lm_seed": -1,
    "lm_batch_size": 1,
    "synth_batch_size": 1,
    "lm_temperature": 0.85,
    "lm_cfg_scale": 2.0,
    "lm_top_p": 0.9,
    "lm_top_k": 0,
    "lm_negative_prompt": "",
    "use_cot_caption": True,
    "audio_codes": "",
    "inference_steps": 0,
    "guidance_scale": 0.0,
    "shift": 0.0,
    "dcw_scaler": 0.0,
    "dcw_high_scaler": 0.0,
    "dcw_mode": "low",
    "solver": "euler",
    "stork_substeps": 10,
    "custom_timesteps": "",
    "audio_cover_strength": 1.0,
    "cover_noise_strength": 0.0,
    "repainting_start": 0.0,
    "repainting_end": -1.0,
    "latent_shift": 0.0,
    "latent_rescale": 1.0,
    "task_type": "text2music",
    "track": "",
    "lm_mode": "generate",
    "output_format": "mp3",
    "peak_clip": 10,
    "mp3_bitrate": 128,
    "synth_model": "",
    "lm_model": "",
    "adapter": "",
    "adapter_scale": 1.0,
    "vae": "",
}
ALWAYS_KEPT = ("caption", "seed", "solver", "lm_mode", "output_format", "task_type")
LM_MODES = {"generate": 0, "inspire": 1, "format": 2}
OUTPUT_FORMATS = ("mp3", "wav16", "wav24", "wav32")
TASKS = ("text2music", "cover", "cover-nofsq", "repaint", "lego", "extract", "complete")
SOURCE_TASKS = TASKS[1:]
CAPTIONLESS_TASKS = ("lego", "extract", "complete")  # /synth takes them without a caption
MAX_TRACKS = 9
SYNTH_DEFAULT_DURATION = 30.0
INSTRUMENTAL = "[Instrumental]"

_INT_FIELDS = {
    "bpm",
    "seed",
    "lm_seed",
    "lm_batch_size",
    "synth_batch_size",
    "lm_top_k",
    "inference_steps",
    "mp3_bitrate",
    "stork_substeps",
    "peak_clip",
}
_FLOAT_FIELDS = {
    "duration",
    "lm_temperature",
    "lm_cfg_scale",
    "lm_top_p",
    "guidance_scale",
    "shift",
    "dcw_scaler",
    "dcw_high_scaler",
    "audio_cover_strength",
    "cover_noise_strength",
    "repainting_start",
    "repainting_end",
    "latent_shift",
    "latent_rescale",
    "adapter_scale",
}


class BadRequest(ValueError):
    """A 4xx answer: ``status`` and the ``{"error": message}`` text."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def parse_json(body: bytes):
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("Invalid JSON") from None


def normalise(obj, *, caption_required: bool = True) -> dict:
    """A request object merged over the defaults, with numbers coerced; raises BadRequest.
    ``caption_required=False``: the caller checks the caption (/synth takes lego, extract and
    complete without one; /understand and /vae never need one)."""
    if not isinstance(obj, dict):
        raise BadRequest("Invalid JSON")
    req = dict(DEFAULTS)
    for key, value in obj.items():
        if value is None and key in DEFAULTS:
            continue  # null: the default
        if key in _INT_FIELDS:
            try:
                value = int(float(value)) if isinstance(value, str) else int(value)
            except (TypeError, ValueError, OverflowError):
                raise BadRequest(f"Invalid {key}") from None
        elif key in _FLOAT_FIELDS:
            try:
                value = float(value)
                if value != value or value in (float("inf"), float("-inf")):
                    raise ValueError
            except (TypeError, ValueError):
                raise BadRequest(f"Invalid {key}") from None
        elif key in DEFAULTS and isinstance(DEFAULTS[key], str):
            if not isinstance(value, str):
                value = str(value)
        elif key == "use_cot_caption" and isinstance(value, str):
            value = value in ("true", "1")  # ace-server reads "true" and "1"
        req[key] = value
    if caption_required:
        check_caption(req)
    if req["lm_mode"] not in LM_MODES:
        raise BadRequest("Invalid lm_mode (use: generate, inspire, format)")
    if req["output_format"] not in OUTPUT_FORMATS:
        raise BadRequest("Invalid output_format (use: mp3, wav16, wav24, wav32)")
    return req


def check_caption(req: dict, synth: bool = False) -> None:
    """ "Caption is required", except (``synth``) for lego, extract and complete."""
    if not str(req["caption"]).strip() and not (synth and req["task_type"] in CAPTIONLESS_TASKS):
        raise BadRequest("Caption is required")


def sparse(req: dict) -> dict:
    """Fields equal to their default are left out, except the ones ace-server always keeps."""
    out = {}
    for key, value in req.items():
        if key in ALWAYS_KEPT or key not in DEFAULTS or value != DEFAULTS[key]:
            out[key] = value
    return out


def is_instrumental(lyrics: str) -> bool:
    return not lyrics.strip() or lyrics.strip().lower() == INSTRUMENTAL.lower()


_TS = re.compile(r"^\s*(\d+)")


def time_signature(value: str) -> int:
    """ "3" or "3/4" -> 3; anything else -> 4."""
    m = _TS.match(str(value or ""))
    n = int(m.group(1)) if m else 4
    return n if n in (2, 3, 4, 6) else 4
