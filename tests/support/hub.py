"""A Hugging Face hub on 127.0.0.1 for model-library tests (built on FileServer).

Serves what Cantor asks a hub for:
- ``GET /api/models/{repo}/tree/main``: the file list, with ``size`` and ``lfs.oid`` (sha256);
- ``GET|HEAD /{repo}/resolve/main/{file}``: a 302 to ``/cdn/{repo}/{file}``, which serves the
  bytes with Range support and ``ETag: "<sha256>"`` like the real CDN.

Files are small header-only GGUFs (the architecture follows from the file name) padded with
random bytes so downloads have some size. Point Cantor at it with ``HF_ENDPOINT=hub.base_url``.

    with ModelHub() as hub:
        hub.add("acestep-v15-turbo-Q8_0.gguf")
        hub.gate("acestep-v15-turbo-Q8_0.gguf", token="hf_secret")   # 401/403 without it
        hub.advertise("vae-BF16.gguf", size=10**15)                     # lie in the tree
"""

from __future__ import annotations

import hashlib
import random

from cantor_desktop import gguf
from cantor_desktop.models import catalogue

from .http_files import FileServer

REPO = catalogue.REPO
_ARCH = {"dit": gguf.ARCH_DIT, "lm": gguf.ARCH_LM, "text_enc": gguf.ARCH_TEXT_ENC,
         "vae": gguf.ARCH_VAE}


def model_bytes(name: str, size: int = 64 * 1024, seed: int | None = None) -> bytes:
    """A header-only GGUF whose architecture matches the file name, padded to ``size``."""
    info = catalogue.classify_name(name)
    arch = _ARCH[info["kind"]] if info else gguf.ARCH_DIT
    head = gguf.header_bytes(arch)
    rng = random.Random(seed if seed is not None else name)
    return head + rng.randbytes(max(0, size - len(head)))


class ModelHub:
    def __init__(self, repo: str = REPO):
        self.repo = repo
        self.server = FileServer()
        self.files: dict[str, bytes] = {}
        self._advertised: dict[str, dict] = {}
        self.server.add_json(f"/api/models/{repo}/tree/main", lambda req: self.tree())
        self.server.redirect(f"/{repo}/resolve/main/", f"/cdn/{repo}/")

    # lifecycle
    def __enter__(self) -> "ModelHub":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def cdn_path(self, name: str) -> str:
        return f"/cdn/{self.repo}/{name}"

    def resolve_path(self, name: str) -> str:
        return f"/{self.repo}/resolve/main/{name}"

    # content
    def add(self, name: str, size: int = 64 * 1024, data: bytes | None = None) -> str:
        """Publish a file; returns its sha256."""
        data = data if data is not None else model_bytes(name, size)
        self.files[name] = data
        path = self.cdn_path(name)
        self.server.add_file(path, data)
        sha = hashlib.sha256(data).hexdigest()
        # the CDN's ETag of an LFS file is its sha256
        self.server._files[path].etag = f'"{sha}"'
        return sha

    def add_set(self, dit: str = "acestep-v15-turbo-Q8_0.gguf",
                lm: str = "acestep-5Hz-lm-0.6B-Q8_0.gguf", size: int = 64 * 1024) -> list[str]:
        names = [dit, "Qwen3-Embedding-0.6B-Q8_0.gguf", "vae-BF16.gguf", lm]
        for n in names:
            if n not in self.files:
                self.add(n, size)
        return names

    def sha256(self, name: str) -> str:
        return hashlib.sha256(self.files[name]).hexdigest()

    def advertise(self, name: str, *, size: int | None = None, sha256: str | None = None,
                  no_lfs: bool = False) -> None:
        """Make the tree listing say something else about a file (size, sha256, no lfs)."""
        self._advertised[name] = {"size": size, "sha256": sha256, "no_lfs": no_lfs}

    def gate(self, name: str, token: str) -> None:
        """The file needs ``Authorization: Bearer <token>`` (401 without, 403 wrong)."""
        self.server.require_token(self.cdn_path(name), token)

    def tree(self) -> list[dict]:
        out = []
        for name, data in sorted(self.files.items()):
            lie = self._advertised.get(name, {})
            size = lie.get("size") or len(data)
            sha = lie.get("sha256") or hashlib.sha256(data).hexdigest()
            item = {"type": "file", "path": name, "size": size,
                    "oid": hashlib.sha1(data).hexdigest()}
            if not lie.get("no_lfs"):
                item["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
            out.append(item)
        out.append({"type": "directory", "path": "extras", "size": 0, "oid": "0" * 40})
        out.append({"type": "file", "path": "README.md", "size": 10, "oid": "1" * 40})
        return out
