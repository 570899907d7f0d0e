"""A Hugging Face hub on 127.0.0.1 for model-library tests, and its CDN on another server.

It behaves as huggingface.co does for what Cantor asks of it:

- ``GET /api/models/{repo}/tree/main`` (the hub): the file list, with ``size`` and
  ``lfs.oid`` (sha256). Public, gated repository or not.
- ``GET|HEAD /{repo}/resolve/main/{file}`` (the hub): where a gated file is gated — 401
  without ``Authorization: Bearer <token>``, 403 with a wrong one — and then a 302 to the
  CDN, carrying ``X-Linked-Etag: "<sha256>"``, ``X-Linked-Size``, ``ETag`` and
  ``X-Repo-Commit`` as the hub does for LFS files (what ``huggingface_hub``'s
  ``hf_hub_download`` reads from its HEAD before it follows the redirect). The CDN is another server (another port: another origin), and the redirect
  is a signed URL: the token stays with the hub.
- ``GET|HEAD /{repo}/{file}?X-Amz-Signature=…`` (the CDN, ``hub.cdn``): the bytes with
  Range support and ``ETag: "<sha256>"``. Like a signed S3/CloudFront URL it refuses a
  request without the signature (403) and one that also carries an ``Authorization``
  header (400: one way to authenticate only), so a client that forwarded the hub token
  would fail here, and every request the CDN saw is in ``hub.cdn.requests``.

Files are small header-only GGUFs (the architecture follows from the file name) padded with
random bytes so downloads have some size, or a file on disk (``add(name, path=...)``, for
the benchmarks' gigabytes). Point Cantor (or ``huggingface_hub``) at it with
``HF_ENDPOINT=hub.base_url``. ``hub.cdn.shape(rate=..., first_byte=...)`` makes the CDN
behave like one far away: each connection capped, each answer late.

    with ModelHub() as hub:
        hub.add("acestep-v15-turbo-Q8_0.gguf")
        hub.gate("acestep-v15-turbo-Q8_0.gguf", token="hf_secret")   # 401/403 without it
        hub.advertise("vae-BF16.gguf", size=10**15)                     # lie in the tree
        hub.cdn.throttle(hub.cdn_path("vae-BF16.gguf"), 1_000_000)     # faults: on the CDN
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cantor_desktop.models import gguf
from cantor_desktop.models import catalogue

from .http_files import FileServer, Request

REPO = catalogue.REPO
_ARCH = {
    "dit": gguf.ARCH_DIT,
    "lm": gguf.ARCH_LM,
    "text_enc": gguf.ARCH_TEXT_ENC,
    "vae": gguf.ARCH_VAE,
}
SIGNATURE = "X-Amz-Signature"
COMMIT = "c4a7f0d3e5b6a7980112233445566778899aabbc"  # the revision "main" resolves to


def model_bytes(name: str, size: int = 64 * 1024, seed: int | None = None) -> bytes:
    """A header-only GGUF whose architecture matches the file name, padded to ``size``."""
    info = catalogue.classify_name(name)
    arch = _ARCH[info["kind"]] if info else gguf.ARCH_DIT
    head = gguf.header_bytes(arch)
    rng = random.Random(seed if seed is not None else name)
    return head + rng.randbytes(max(0, size - len(head)))


def _cdn_guard(req: Request) -> tuple[int, bytes] | None:
    """What a signed-URL CDN refuses: no signature, or a second way to authenticate."""
    if req.header("authorization") is not None:
        return 400, b"Only one auth mechanism allowed\n"
    if not parse_qs(urlsplit(req.path).query).get(SIGNATURE):
        return 403, b"Access Denied: no signature\n"
    return None


class ModelHub:
    def __init__(self, repo: str = REPO):
        self.repo = repo
        self.server = FileServer()  # huggingface.co: the API and /resolve
        self.cdn = FileServer()  # the CDN: another server, another origin
        self.cdn.guard = _cdn_guard
        self.files: dict[str, bytes | Path] = {}
        self._facts: dict[str, tuple[str, int]] = {}  # name → (sha256, size)
        self._advertised: dict[str, dict] = {}
        self.server.add_json(f"/api/models/{repo}/tree/main", lambda req: self.tree())

    # lifecycle
    def __enter__(self) -> "ModelHub":
        self.cdn.start()
        self.server.start()
        self.server.redirect(f"/{self.repo}/resolve/main/", self._signed_url, headers=self._linked)
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()
        self.cdn.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def cdn_path(self, name: str) -> str:
        """The file's path on the CDN (``hub.cdn``): for its faults and its request log."""
        return f"/{self.repo}/{name}"

    def resolve_path(self, name: str) -> str:
        """The file's path on the hub (``hub.server``)."""
        return f"/{self.repo}/resolve/main/{name}"

    def _signed_url(self, rest: str) -> str:
        """Where /resolve sends a client: the file on the CDN, signed in the query."""
        name = urlsplit(rest).path
        sig = hashlib.sha256(f"{self.repo}/{name}".encode()).hexdigest()
        return f"{self.cdn.base_url}/{self.repo}/{name}?{SIGNATURE}={sig}&Expires=3600"

    def _linked(self, path: str) -> dict[str, str]:
        """The redirect's LFS headers, as the hub sends them."""
        name = path.rsplit("/", 1)[-1]
        if name not in self.files:
            return {}
        sha, size = self._facts[name]
        return {
            "X-Linked-Etag": f'"{sha}"',
            "X-Linked-Size": str(size),
            "ETag": f'"{sha}"',
            "X-Repo-Commit": COMMIT,
        }

    # content
    def add(
        self,
        name: str,
        size: int = 64 * 1024,
        data: bytes | None = None,
        path: Path | None = None,
    ) -> str:
        """Publish a file (made up, ``data``, or the file at ``path``); returns its sha256."""
        if path is not None:
            source: bytes | Path = Path(path)
            sha = _sha256_of_file(Path(path))
            length = Path(path).stat().st_size
        else:
            source = data if data is not None else model_bytes(name, size)
            sha = hashlib.sha256(source).hexdigest()
            length = len(source)
        self.files[name] = source
        self._facts[name] = (sha, length)
        cdn_path = self.cdn_path(name)
        self.cdn.add_file(cdn_path, source)
        # the CDN's ETag of an LFS file is its sha256
        self.cdn._files[cdn_path].etag = f'"{sha}"'
        return sha

    def add_set(
        self,
        dit: str = "acestep-v15-turbo-Q8_0.gguf",
        lm: str = "acestep-5Hz-lm-0.6B-Q8_0.gguf",
        size: int = 64 * 1024,
    ) -> list[str]:
        names = [dit, "Qwen3-Embedding-0.6B-Q8_0.gguf", "vae-BF16.gguf", lm]
        for n in names:
            if n not in self.files:
                self.add(n, size)
        return names

    def sha256(self, name: str) -> str:
        return self._facts[name][0]

    def advertise(
        self, name: str, *, size: int | None = None, sha256: str | None = None, no_lfs: bool = False
    ) -> None:
        """Make the tree listing say something else about a file (size, sha256, no lfs)."""
        self._advertised[name] = {"size": size, "sha256": sha256, "no_lfs": no_lfs}

    def gate(self, name: str, token: str) -> None:
        """Resolving the file needs ``Authorization: Bearer <token>`` (401 without, 403
        wrong), at the hub; the CDN it then sends the client to never wants the token."""
        self.server.require_token(self.resolve_path(name), token)

    def tree(self) -> list[dict]:
        out = []
        for name in sorted(self.files):
            real_sha, real_size = self._facts[name]
            lie = self._advertised.get(name, {})
            size = lie.get("size") or real_size
            sha = lie.get("sha256") or real_sha
            item = {
                "type": "file",
                "path": name,
                "size": size,
                "oid": hashlib.sha1(real_sha.encode()).hexdigest(),  # the git blob's id
            }
            if not lie.get("no_lfs"):
                item["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
            out.append(item)
        out.append({"type": "directory", "path": "extras", "size": 0, "oid": "0" * 40})
        out.append({"type": "file", "path": "README.md", "size": 10, "oid": "1" * 40})
        return out


def _sha256_of_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()
