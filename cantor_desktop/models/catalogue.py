"""The ACE-Step 1.5 catalogue: which GGUF files exist, what kind each is, how big.

A model the user picks is a DiT file (named by its stem, e.g. ``acestep-v15-turbo-Q8_0``;
without a quantisation the name means Q8_0). Its companions — the text encoder, the VAE and a
language model for vocals — come with it.

Sources, best first: the live Hugging Face tree (exact sizes, sha256 = ``lfs.oid``), the copy
of it saved at the last successful fetch, the built-in ``data/catalogue.json`` (approximate
sizes, no sha256). All three are the same shape: a list of files; what a file is follows from
its name.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import config
from ..system.paths import paths
from . import hub
from ..files import write_atomic

FAMILY = "acestep"
REPO = "Serveurperso/ACE-Step-1.5-GGUF"
REVISION = "main"
DEFAULT_QUANT = "Q8_0"
SKETCH = "sketch"
SKETCH_DISPLAY = "Sketch — built-in, no AI model"

KINDS = ("dit", "text_enc", "vae", "lm")
KIND_LABELS = {"dit": "DiT", "text_enc": "text encoder", "vae": "VAE", "lm": "language model"}
LM_SIZES = ("0.6B", "1.7B", "4B")
GIB = 1024**3

_QUANT = r"(?P<quant>BF16|F16|F32|Q\d_K_[SML]|Q\d_K|Q\d_\d|IQ\d_\w+)"
_PATTERNS = {
    "dit": re.compile(rf"^acestep-v15-(?P<variant>[a-z0-9][a-z0-9-]*?)-{_QUANT}\.gguf$"),
    "lm": re.compile(rf"^acestep-5Hz-lm-(?P<size>\d+(?:\.\d+)?B)-{_QUANT}\.gguf$"),
    "text_enc": re.compile(rf"^Qwen3-Embedding-0\.6B-{_QUANT}\.gguf$"),
    "vae": re.compile(rf"^vae-{_QUANT}\.gguf$"),
}
_NAME_WITH_QUANT = re.compile(rf"^acestep-v15-(?P<variant>[a-z0-9][a-z0-9-]*?)-{_QUANT}$")
_NAME_NO_QUANT = re.compile(r"^acestep-v15-(?P<variant>[a-z0-9][a-z0-9-]*)$")


class UnknownModel(ValueError, LookupError):
    """The name is not a model of the catalogue (the message lists what is)."""


@dataclass(frozen=True)
class FileEntry:
    """One downloadable file of the repository."""

    name: str
    kind: str  # dit | lm | text_enc | vae
    quant: str
    size: int  # bytes (approximate when ``approximate``)
    sha256: str | None = None
    approximate: bool = False
    variant: str | None = None  # DiT only: turbo, sft, xl-turbo …
    lm_size: str | None = None  # LM only: 0.6B, 1.7B, 4B

    @property
    def stem(self) -> str:
        return self.name[: -len(".gguf")]


def classify_name(filename: str) -> dict | None:
    """What a file of this family is, from its name alone: {kind, quant, variant, lm_size}."""
    for kind, pattern in _PATTERNS.items():
        m = pattern.match(filename)
        if m:
            groups = m.groupdict()
            return {
                "kind": kind,
                "quant": groups["quant"],
                "variant": groups.get("variant"),
                "lm_size": groups.get("size"),
            }
    return None


def parse_model_name(name: str) -> tuple[str, str]:
    """``acestep-v15-turbo`` → ("turbo", "Q8_0"); ``…-turbo-Q6_K`` → ("turbo", "Q6_K")."""
    text = name.strip()
    if text.endswith(".gguf"):
        text = text[: -len(".gguf")]
    m = _NAME_WITH_QUANT.match(text)
    if m:
        return m.group("variant"), m.group("quant")
    m = _NAME_NO_QUANT.match(text)
    if m:
        return m.group("variant"), DEFAULT_QUANT
    raise UnknownModel(
        f"{name!r} is not an ACE-Step model name; names look like "
        f"acestep-v15-turbo or acestep-v15-turbo-Q8_0 (or {SKETCH!r})"
    )


def canonical_name(name: str) -> str:
    """The full model name: the DiT file's stem with its quantisation."""
    if name.strip() == SKETCH:
        return SKETCH
    variant, quant = parse_model_name(name)
    return f"acestep-v15-{variant}-{quant}"


def canonical_model(name: str) -> str:
    """The name a model goes by between members of a pool and in a song's request: its
    :func:`canonical_name`, or the name as given when it is no model of the catalogue."""
    try:
        return canonical_name(name)
    except Exception:
        return name


def display_name(variant: str | None, quant: str | None) -> str:
    """ "ACE-Step 1.5 XL Turbo (Q8_0)", "ACE-Step 1.5 Turbo shift 3 (Q6_K)"."""
    if not variant:
        return "ACE-Step 1.5"
    words = variant.split("-")
    xl = words and words[0] == "xl"
    if xl:
        words = words[1:]
    text = " ".join("SFT" if w == "sft" else w for w in words)
    text = re.sub(r"shift(\d+)", r"shift \1", text)
    text = text[:1].upper() + text[1:]
    label = f"ACE-Step 1.5 {'XL ' if xl else ''}{text}".strip()
    return f"{label} ({quant})" if quant else label


def lm_size_for_ram(ram_bytes: int | None) -> str:
    """The language model a machine can hold beside the DiT: <12 GiB 0.6B, <24 GiB 1.7B, else 4B."""
    if not ram_bytes:
        return "1.7B"
    if ram_bytes < 12 * GIB:
        return "0.6B"
    if ram_bytes < 24 * GIB:
        return "1.7B"
    return "4B"


def total_ram() -> int | None:
    """Installed memory in bytes, as the hardware probe reads it (None when unknown)."""
    from ..system.hardware import total_ram as probe_total_ram

    return probe_total_ram()


def configured_lm_size() -> tuple[str, bool]:
    """(size, explicit): node.toml ``models.lm``; "auto" picks by installed memory."""
    cfg, _problem = config.load_or_defaults()
    value = cfg.get("models.lm")
    if value and value != "auto":
        return value, True
    return lm_size_for_ram(total_ram()), False


@dataclass
class Catalogue:
    """The files of one repository, classified. ``source``: hub | cache | builtin."""

    family: str = FAMILY
    repo: str = REPO
    revision: str = REVISION
    source: str = "builtin"
    files: dict[str, FileEntry] = field(default_factory=dict)

    @classmethod
    def from_files(
        cls,
        items: list[dict],
        *,
        source: str,
        approximate: bool,
        repo: str = REPO,
        revision: str = REVISION,
    ) -> "Catalogue":
        files: dict[str, FileEntry] = {}
        for item in items:
            name = item.get("path")
            if not isinstance(name, str) or "/" in name:
                continue  # ace-server reads one flat folder: only top-level files count
            info = classify_name(name)
            if info is None:
                continue
            sha = item.get("sha256")
            files[name] = FileEntry(
                name=name,
                kind=info["kind"],
                quant=info["quant"],
                size=int(item.get("size") or 0),
                sha256=sha if isinstance(sha, str) and sha else None,
                approximate=approximate,
                variant=info["variant"],
                lm_size=info["lm_size"],
            )
        return cls(repo=repo, revision=revision, source=source, files=files)

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "repo": self.repo,
            "revision": self.revision,
            "sizes_approximate": any(f.approximate for f in self.files.values()),
            "files": [
                {"path": f.name, "size": f.size, "sha256": f.sha256} for f in self.files.values()
            ],
        }

    def get(self, filename: str) -> FileEntry | None:
        return self.files.get(filename)

    def of_kind(self, kind: str) -> list[FileEntry]:
        return sorted((f for f in self.files.values() if f.kind == kind), key=lambda f: f.name)

    def dits(self) -> list[FileEntry]:
        return self.of_kind("dit")

    def dit_for(self, name: str) -> FileEntry:
        """The DiT file a model name means; UnknownModel (listing the choices) when none."""
        full = canonical_name(name)
        entry = self.files.get(f"{full}.gguf")
        if entry is None:
            variant, quant = parse_model_name(name)
            same = [f.quant for f in self.dits() if f.variant == variant]
            if same:
                raise UnknownModel(f"{full} does not exist; {variant} comes in {', '.join(same)}")
            variants = sorted({f.variant for f in self.dits() if f.variant})
            raise UnknownModel(
                f"unknown model {name!r}; known variants: {', '.join(variants)} (and {SKETCH!r})"
            )
        return entry

    def text_encoder_for(self, dit: FileEntry) -> list[FileEntry]:
        """Text encoders in preference order: BF16 beside a BF16 DiT, Q8_0 otherwise."""
        first = "BF16" if dit.quant in ("BF16", "F16", "F32") else DEFAULT_QUANT
        return sorted(self.of_kind("text_enc"), key=lambda f: (f.quant != first, f.name))

    def vaes(self) -> list[FileEntry]:
        return sorted(self.of_kind("vae"), key=lambda f: (f.quant != "BF16", f.name))

    def lms(self, size: str | None = None) -> list[FileEntry]:
        """Language models (of one size), Q8_0 first."""
        found = [f for f in self.of_kind("lm") if size is None or f.lm_size == size]
        return sorted(found, key=lambda f: (f.quant != DEFAULT_QUANT, f.name))


def builtin() -> Catalogue:
    """The copy shipped in the package (approximate sizes, no sha256)."""
    text = resources.files("cantor_desktop").joinpath("data/catalogue.json").read_text("utf-8")
    doc = json.loads(text)
    return Catalogue.from_files(
        doc["files"],
        source="builtin",
        approximate=bool(doc.get("sizes_approximate", True)),
        repo=doc.get("repo", REPO),
        revision=doc.get("revision", REVISION),
    )


def cache_file() -> Path:
    return paths().catalogue_file(FAMILY)


def cached() -> Catalogue | None:
    """The tree saved at the last successful fetch from this endpoint, if any."""
    path = cache_file()
    try:
        doc = json.loads(path.read_text("utf-8"))
        if doc.get("endpoint") != _endpoint_or_none():
            return None
        return Catalogue.from_files(
            doc["files"],
            source="cache",
            approximate=False,
            repo=doc.get("repo", REPO),
            revision=doc.get("revision", REVISION),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _endpoint_or_none() -> str | None:
    try:
        return hub.endpoint()
    except hub.HubError:
        return None


def load() -> Catalogue:
    """Offline: the saved live tree when there is one, else the built-in copy."""
    return cached() or builtin()


async def refresh(*, timeout: float = hub.TREE_TIMEOUT) -> Catalogue:
    """Ask the hub for the live tree (short timeout), save it, and return it.

    When the hub cannot be reached, the saved tree or the built-in copy answers instead
    (its ``source`` says which).
    """
    try:
        items = await hub.fetch_tree(REPO, REVISION, timeout=timeout)
    except hub.HubError:
        return load()
    live = Catalogue.from_files(items, source="hub", approximate=False)
    if not live.dits():
        return load()
    doc = live.to_json()
    doc["endpoint"] = hub.endpoint()
    doc["sizes_approximate"] = False
    write_atomic(cache_file(), (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    return live


REFRESH_EVERY_S = 3600.0
RETRY_AFTER_S = 600.0
_failed_at: dict[str, float] = {}  # endpoint → when asking it last failed (monotonic)


async def fresh(*, max_age: float = REFRESH_EVERY_S, timeout: float = 3.0) -> Catalogue:
    """The catalogue to list what can be pulled: the saved live tree while it is younger
    than ``max_age``, else the hub is asked again (briefly; a hub that did not answer is
    not asked again for :data:`RETRY_AFTER_S`), so the models the hub lists — the XL DiTs
    among them — show with their real sizes."""
    endpoint = _endpoint_or_none()
    saved = cached()
    if saved is not None:
        try:
            if time.time() - cache_file().stat().st_mtime < max_age:
                return saved
        except OSError:
            pass
    if (
        endpoint is None
        or time.monotonic() - _failed_at.get(endpoint, -RETRY_AFTER_S) < RETRY_AFTER_S
    ):
        return load()
    _failed_at[endpoint] = time.monotonic()
    found = await refresh(timeout=timeout)
    if found.source == "hub":
        _failed_at.pop(endpoint, None)
    return found
