"""The engine manifest: which engine builds exist, per family, backend, OS and architecture.

Format: docs/manifest.md. The copy shipped in the package (``data/engines.json``) is the
default and needs no network. A published one (``CANTOR_MANIFEST_URL``, else node.toml
``engines.manifest``; empty = none) is fetched only by install, ``--use`` and ``--update``,
and is used only when ``<URL>.sig`` holds a valid ed25519 signature of its exact bytes by a
trusted key (:mod:`.manifest_keys`); an unsigned, tampered or wrongly-keyed one is refused
(:class:`ManifestRefused`) and the built-in one stays in force. Every redirect hop of the
fetch must be an allowed URL, and the body and the signature are streamed with a size cap.
The last published copy verified is kept in the cache (with its signature, checked again on
every read) so ``cantor backends`` can show ``update_available`` without the network.

Every build must carry a sha256 (a build without one is refused, :class:`UnverifiedBuild`)
and be hosted where the shipped manifest's builds are (the engine's own release host) or on
loopback (tests).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
from packaging.version import InvalidVersion, Version

from .. import config
from . import signing_keys
from ..errors import CantorError
from ..system.paths import paths
from ..files import write_atomic

SCHEMA = 1
OSES = ("linux", "windows", "macos")
ARCHES = ("x86_64", "arm64")
ARCHIVES = ("tar.gz", "zip")
DEVICE_ENV = {"cuda12": "CUDA0", "vulkan": "Vulkan0", "metal": "MTL0", "cpu": "CPU"}
"""The GGML_BACKEND value that selects each backend's device (ggml's device names)."""
MAX_MANIFEST_BYTES = 4 * 2**20
MAX_SIGNATURE_BYTES = 1024
MAX_REDIRECTS = 5
FETCH_TIMEOUT = 20.0
BUILTIN_SOURCE = "builtin"
NO_PUBLISHED_MANIFEST = (
    "No signed engine manifest is published: new engine builds come with "
    "new versions of Cantor. Checked against the manifest built into "
    "this version."
)


class ManifestError(CantorError):
    """The manifest cannot be read, or one of its builds is not acceptable."""


class ManifestUnreachable(ManifestError):
    """The published manifest or its signature could not be fetched (network, HTTP status)."""


class ManifestRefused(ManifestError):
    """A fetched manifest without a valid signature by a trusted key: never used."""


class UnverifiedBuild(ManifestError):
    """A build without a sha256: refused (never offered, never installed)."""

    def __init__(self, message: str, key: tuple[str, str, str, str]):
        super().__init__(message)
        self.key = key  # (family, backend, os, arch)


@dataclass(frozen=True)
class Build:
    family: str
    backend: str
    os: str
    arch: str
    version: str
    url: str
    sha256: str
    size: int | None
    archive: str  # "tar.gz" | "zip"
    executable: str  # path of ace-server inside the archive, "/"-separated
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.family} {self.backend} {self.version} ({self.os} {self.arch})"


@dataclass
class Manifest:
    builds: list[Build]
    source: str  # "builtin", or the URL it came from
    published: str = ""
    refused: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    """(family, backend, os, arch) → why a listed build was refused (no sha256)."""

    def families(self) -> list[str]:
        return sorted({b.family for b in self.builds})

    def builds_for(self, family: str, backend: str, os: str, arch: str) -> list[Build]:
        """Builds for this machine, newest version first."""
        found = [
            b
            for b in self.builds
            if (b.family, b.backend, b.os, b.arch) == (family, backend, os, arch)
        ]
        return sorted(found, key=lambda b: version_key(b.version), reverse=True)

    def best(self, family: str, backend: str, os: str, arch: str) -> Build | None:
        found = self.builds_for(family, backend, os, arch)
        return found[0] if found else None

    def refusal(self, family: str, backend: str, os: str, arch: str) -> str | None:
        """Why the manifest's build for this machine was refused, when it was."""
        return self.refused.get((family, backend, os, arch))


def version_key(version: str) -> Version:
    """A build's version in PEP 440 order (``packaging.version``), a leading "v" allowed:
    v0.1.10 after v0.1.9, v0.2.0-rc1 before v0.2.0. ManifestError when it is not one."""
    try:
        return Version(version)
    except InvalidVersion:
        raise ManifestError(
            f"version {version!r} is not a version: numbers with dots, a pre-release such as "
            f"-rc1 after them (PEP 440)"
        ) from None


def _need(entry: dict, key: str, where: str, kind: type | tuple = str) -> Any:
    if key not in entry:
        raise ManifestError(f'{where}: missing "{key}"')
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ManifestError(f'{where}: "{key}" has the wrong type ({type(value).__name__})')
    return value


def _parse_build(family: str, index: int, entry: Any) -> Build:
    where = f"{family} build #{index + 1}"
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: must be an object")
    backend = _need(entry, "backend", where)
    where = f"{family} build #{index + 1} ({backend} {entry.get('os')} {entry.get('arch')})"
    if backend not in config.BACKENDS:
        raise ManifestError(
            f"{where}: unknown backend {backend!r}; one of {', '.join(config.BACKENDS)}"
        )
    os_name = _need(entry, "os", where)
    arch = _need(entry, "arch", where)
    sha = entry.get("sha256")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", sha or ""):
        raise UnverifiedBuild(
            f"{where}: refused, it has no sha256 (64 hex digits); a build "
            f"that cannot be verified is never installed",
            (family, backend, str(os_name), str(arch)),
        )
    if os_name not in OSES:
        raise ManifestError(f"{where}: unknown os {os_name!r}; one of {', '.join(OSES)}")
    if arch not in ARCHES:
        raise ManifestError(f"{where}: unknown arch {arch!r}; one of {', '.join(ARCHES)}")
    url = _need(entry, "url", where)
    problem = config.check_download_url(url) or _check_build_host(url)
    if problem:
        raise ManifestError(f"{where}: url {url!r} is not allowed: {problem}")
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise ManifestError(f'{where}: "size" must be a positive whole number or null')
    archive = entry.get("archive") or ("zip" if url.endswith(".zip") else "tar.gz")
    if archive not in ARCHIVES:
        raise ManifestError(f"{where}: archive {archive!r} is not one of {', '.join(ARCHIVES)}")
    executable = _need(entry, "executable", where)
    parts = executable.replace("\\", "/").split("/")
    if executable.startswith(("/", "\\")) or ".." in parts or not executable.strip():
        raise ManifestError(
            f"{where}: executable {executable!r} must be a relative path inside the archive"
        )
    env = entry.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ManifestError(f'{where}: "env" must map names to strings')
    version = _need(entry, "version", where)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}", version):
        raise ManifestError(f"{where}: version {version!r} must be letters, digits, . _ + -")
    try:
        version_key(version)
    except ManifestError as exc:
        raise ManifestError(f"{where}: {exc}") from None
    return Build(
        family=family,
        backend=backend,
        os=os_name,
        arch=arch,
        version=version,
        url=url,
        sha256=sha.lower(),
        size=size,
        archive=archive,
        executable="/".join(parts),
        env=dict(env),
    )


def _builtin_bytes() -> bytes:
    return resources.files("cantor_desktop").joinpath("data/engines.json").read_bytes()


@functools.lru_cache(maxsize=1)
def build_hosts() -> tuple[str, ...]:
    """The hosts the shipped manifest downloads builds from (the engine's release host)."""
    data = json.loads(_builtin_bytes().decode("utf-8-sig"))
    hosts = {
        urlparse(b["url"]).hostname.lower()
        for fam in data["families"].values()
        for b in fam["builds"]
    }
    return tuple(sorted(hosts))


def _check_build_host(url: str) -> str | None:
    host = (urlparse(url).hostname or "").lower()
    if host in build_hosts() or config.is_loopback_host(host):
        return None
    return (
        f"builds are downloaded only from {', '.join(build_hosts())} (the hosts the "
        f"manifest shipped with Cantor names) or loopback, not {host}"
    )


def parse(data: Any, source: str) -> Manifest:
    """Validate a manifest document (already JSON-decoded). Raises ManifestError."""
    if not isinstance(data, dict):
        raise ManifestError(f"manifest from {source}: must be a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ManifestError(
            f"manifest from {source}: schema {schema!r} is not {SCHEMA}; "
            f"this version of Cantor cannot read it"
        )
    families = data.get("families")
    if not isinstance(families, dict):
        raise ManifestError(f'manifest from {source}: missing "families" object')
    builds: list[Build] = []
    refused: dict[tuple[str, str, str, str], str] = {}
    for family, body in families.items():
        entries = body.get("builds") if isinstance(body, dict) else None
        if not isinstance(entries, list):
            raise ManifestError(f'manifest from {source}: {family} must have a "builds" list')
        for i, entry in enumerate(entries):
            try:
                builds.append(_parse_build(family, i, entry))
            except UnverifiedBuild as exc:
                refused[exc.key] = f"manifest from {source}: {exc}"
            except ManifestError as exc:
                raise ManifestError(f"manifest from {source}: {exc}") from None
    return Manifest(
        builds=builds, source=source, published=str(data.get("published", "")), refused=refused
    )


def parse_bytes(raw: bytes, source: str) -> Manifest:
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"manifest from {source}: not valid JSON ({exc})") from None
    return parse(data, source)


def load_builtin() -> Manifest:
    """The copy shipped inside the package."""
    return parse_bytes(_builtin_bytes(), BUILTIN_SOURCE)


def builds_for(
    family: str, backend: str, os: str, arch: str, manifest: Manifest | None = None
) -> list[Build]:
    """Builds for family × backend on this OS and arch, newest first (default: the manifest
    in force without the network, see :func:`current`)."""
    return (manifest or current()).builds_for(family, backend, os, arch)


def manifest_url() -> str:
    """CANTOR_MANIFEST_URL, else node.toml engines.manifest; "" = the built-in manifest only
    (also when node.toml is broken)."""
    cfg, _problem = config.load_or_defaults()
    return cfg.manifest_url()


def _cache_file(url: str) -> Path:
    return paths().manifest_cache_file(hashlib.sha256(url.encode()).hexdigest()[:16])


def _sig_file(cache: Path) -> Path:
    return cache.with_name(cache.name + ".sig")


async def _get_capped(client: httpx.AsyncClient, url: str, cap: int, what: str) -> bytes:
    """GET ``url``, checking every redirect hop, streaming the body and stopping past ``cap``
    bytes: memory stays bounded whatever the server sends."""
    request = client.build_request("GET", url, headers={"Accept-Encoding": "identity"})
    for _hop in range(MAX_REDIRECTS + 1):
        resp = await client.send(request, stream=True, follow_redirects=False)
        try:
            if resp.is_redirect:
                nxt = resp.next_request
                if nxt is None:
                    raise ManifestUnreachable(f"{what} {url}: a redirect without a Location")
                problem = config.check_download_url(str(nxt.url))
                if problem:
                    raise ManifestRefused(
                        f"{what} {url}: refused, it redirects to {nxt.url}, "
                        f"which is not allowed; expected {problem}"
                    )
                request = nxt
                continue
            if resp.status_code != 200:
                raise ManifestUnreachable(f"{what} {url}: HTTP {resp.status_code}")
            encoding = resp.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise ManifestRefused(
                    f"{what} {url}: refused, it is sent {encoding}-encoded; serve it as is"
                )
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap:
                raise ManifestRefused(
                    f"{what} {url}: refused, it is larger than {cap} bytes ({declared} declared)"
                )
            body = bytearray()
            async for chunk in resp.aiter_raw():
                body += chunk
                if len(body) > cap:
                    raise ManifestRefused(
                        f"{what} {url}: refused, it is larger than {cap} "
                        f"bytes (cut off while streaming)"
                    )
            return bytes(body)
        finally:
            await resp.aclose()
    raise ManifestUnreachable(f"{what} {url}: more than {MAX_REDIRECTS} redirects")


def _verified(raw: bytes, sig: bytes, url: str) -> Manifest:
    try:
        signing_keys.verify(raw, sig)
    except signing_keys.SignatureRefused as exc:
        raise ManifestRefused(f"manifest {url}: refused, {exc}") from None
    return parse_bytes(raw, url)


async def fetch(
    url: str | None = None,
    *,
    client: httpx.AsyncClient | None = None,
    timeout: float = FETCH_TIMEOUT,
) -> Manifest:
    """Fetch the published manifest and its signature, verify and validate it; keep a copy
    (with the signature) for offline status. ManifestRefused when it is not signed by a
    trusted key, ManifestUnreachable when it cannot be fetched."""
    url = url if url is not None else manifest_url()
    if not url:
        raise ManifestError(
            "no engine manifest URL is set (node.toml engines.manifest, "
            "CANTOR_MANIFEST_URL): " + NO_PUBLISHED_MANIFEST
        )
    problem = config.check_download_url(url)
    if problem:
        raise ManifestError(f"manifest URL {url!r} is not allowed: {problem}")
    own = client is None
    client = client or httpx.AsyncClient(timeout=timeout)
    try:
        async with asyncio.timeout(3 * timeout):  # a server dripping bytes ends too
            raw = await _get_capped(client, url, MAX_MANIFEST_BYTES, "manifest")
            try:
                sig = await _get_capped(client, url + ".sig", MAX_SIGNATURE_BYTES, "signature")
            except ManifestUnreachable as exc:
                raise ManifestRefused(
                    f"manifest {url}: refused, it has no signature ({exc}); "
                    f"an unsigned manifest is never used"
                ) from None
    except httpx.HTTPError as exc:
        raise ManifestUnreachable(
            f"manifest {url}: cannot fetch it ({exc or type(exc).__name__})"
        ) from None
    except TimeoutError:
        raise ManifestUnreachable(f"manifest {url}: not fetched within {3 * timeout:g} s") from None
    finally:
        if own:
            await client.aclose()
    manifest = _verified(raw, sig, url)
    cache = _cache_file(url)
    try:
        write_atomic(_sig_file(cache), sig)
        write_atomic(cache, raw)
    except OSError:
        pass
    return manifest


def cached(url: str | None = None) -> Manifest | None:
    """The last published manifest fetched from ``url``, if one is on disk and still verifies
    with today's trusted keys."""
    url = url if url is not None else manifest_url()
    if not url:
        return None
    path = _cache_file(url)
    try:
        return _verified(path.read_bytes(), _sig_file(path).read_bytes(), url)
    except (OSError, ManifestError):
        return None


def current() -> Manifest:
    """For status without the network: the last fetched published copy, else the builtin."""
    return cached() or load_builtin()


async def fetch_or_fallback() -> tuple[Manifest, str]:
    """For install and --use: the published manifest, or the built-in one (no published
    one set, or the published one refused), or offline the last verified copy, with a note
    saying which."""
    url = manifest_url()
    if not url:
        return load_builtin(), ""
    try:
        return await fetch(url), ""
    except ManifestUnreachable as exc:
        fallback = cached(url)
        if fallback is not None:
            return fallback, f"{exc}; using the copy fetched earlier"
        return load_builtin(), f"{exc}; using the manifest built into Cantor"
    except ManifestError as exc:
        return load_builtin(), f"{exc}; using the manifest built into Cantor"
