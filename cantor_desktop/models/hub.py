"""Talking to a Hugging Face hub (or the mirror named by HF_ENDPOINT).

Only what Cantor needs: the repository tree (exact sizes and, for LFS files, the sha256),
the resolve URL of a file, the sha256 a resolve answer carries in its ETag, and the token
(HF_TOKEN, else the one `cantor login` stored in the keyring).
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import httpx

from .. import config
from ..system import secrets
from ..errors import CantorError

DEFAULT_ENDPOINT = "https://huggingface.co"
ENDPOINT_ENV = "HF_ENDPOINT"
TOKEN_ENV = "HF_TOKEN"
TREE_TIMEOUT = 5.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class HubError(CantorError):
    """The hub could not be asked (bad endpoint, network, unexpected answer)."""


def endpoint() -> str:
    """The hub address: HF_ENDPOINT when set (https, or http to loopback), else huggingface.co."""
    value = (os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).strip().rstrip("/")
    problem = config.check_download_url(value)
    if problem:
        raise HubError(f"{ENDPOINT_ENV}={value!r} is not allowed: it must be {problem}")
    return value


def token() -> str | None:
    """HF_TOKEN from the environment, else the keyring's token, else None."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    try:
        return secrets.get_secret(secrets.HF_TOKEN)
    except secrets.NoKeyringError:
        return None


TOKEN_SHAPE = re.compile(r"[\x21-\x7e]{8,512}")
"""What a Hugging Face token looks like here: 8 to 512 printable characters, no spaces."""


def token_status() -> dict:
    """Whether a token is set (never the token): ``{"set", "source", "note"}``; ``source`` is
    "environment" (HF_TOKEN, which wins), "keyring" or None."""
    if os.environ.get(TOKEN_ENV, "").strip():
        return {
            "set": True,
            "source": "environment",
            "note": f"{TOKEN_ENV} is set in the node's environment; it wins over the keyring",
        }
    try:
        stored = secrets.get_secret(secrets.HF_TOKEN) is not None
    except secrets.NoKeyringError as exc:
        return {"set": False, "source": None, "note": str(exc)}
    return {"set": stored, "source": "keyring" if stored else None, "note": ""}


def store_token(value: str) -> None:
    """Keep ``value`` as the token in this machine's keyring. ValueError when it does not
    look like a token; secrets.NoKeyringError when no keyring can hold it."""
    if not isinstance(value, str) or not TOKEN_SHAPE.fullmatch(value.strip()):
        raise ValueError(
            "token: a Hugging Face token is 8 to 512 printable characters without spaces (hf_…)"
        )
    secrets.set_secret(secrets.HF_TOKEN, value.strip())


def forget_token() -> bool:
    """Remove the keyring's token; True when there was one."""
    return secrets.delete_secret(secrets.HF_TOKEN)


def auth_headers() -> dict[str, str]:
    tok = token()
    return {"Authorization": f"Bearer {tok}"} if tok else {}


def tree_url(repo: str, revision: str = "main") -> str:
    return f"{endpoint()}/api/models/{repo}/tree/{quote(revision, safe='')}"


def resolve_url(repo: str, path: str, revision: str = "main") -> str:
    return f"{endpoint()}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"


def sha256_from_etag(value: str | None) -> str | None:
    """An ETag that is a sha256 (what the hub sends for LFS files), else None."""
    if not value:
        return None
    tag = value.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    tag = tag.strip('"').lower()
    return tag if _SHA256.match(tag) else None


async def fetch_tree(
    repo: str,
    revision: str = "main",
    *,
    timeout: float = TREE_TIMEOUT,
    client: httpx.AsyncClient | None = None,
) -> list[dict]:
    """Every file of the repository's top level: [{"path", "size", "sha256" (or None)}].

    Follows the `Link: rel="next"` pages the hub uses for long listings.
    """
    url: str | None = tree_url(repo, revision)
    own = client is None
    client = client or httpx.AsyncClient(timeout=timeout, follow_redirects=True)
    files: list[dict] = []
    try:
        while url:
            try:
                response = await client.get(url, headers=auth_headers(), timeout=timeout)
            except httpx.HTTPError as exc:
                raise HubError(f"cannot reach {endpoint()}: {exc}") from None
            if response.status_code != 200:
                raise HubError(f"{url} answered {response.status_code}")
            try:
                items = response.json()
            except ValueError:
                raise HubError(f"{url} did not answer JSON") from None
            if not isinstance(items, list):
                raise HubError(f"{url} did not answer a list of files")
            for item in items:
                if not isinstance(item, dict) or item.get("type") != "file":
                    continue
                path, size = item.get("path"), item.get("size")
                if not isinstance(path, str) or not isinstance(size, int):
                    continue
                lfs = item.get("lfs")
                if not isinstance(lfs, dict):
                    lfs = {}
                sha = lfs.get("oid") if isinstance(lfs.get("oid"), str) else None
                if sha is not None and not _SHA256.match(sha.lower()):
                    sha = None
                files.append(
                    {
                        "path": path,
                        "size": int(lfs.get("size", size)),
                        "sha256": sha.lower() if sha else None,
                    }
                )
            url = response.links.get("next", {}).get("url")
    finally:
        if own:
            await client.aclose()
    return files


async def probe_sha256(
    url: str, *, timeout: float = TREE_TIMEOUT, client: httpx.AsyncClient | None = None
) -> str | None:
    """The sha256 a resolve URL announces (X-Linked-Etag or ETag), without downloading."""
    own = client is None
    client = client or httpx.AsyncClient(timeout=timeout)
    try:
        response = await client.head(
            url, headers=auth_headers(), timeout=timeout, follow_redirects=False
        )
        for header in ("x-linked-etag", "etag"):
            sha = sha256_from_etag(response.headers.get(header))
            if sha:
                return sha
        if response.is_redirect:
            response = await client.head(
                url, headers=auth_headers(), timeout=timeout, follow_redirects=True
            )
            return sha256_from_etag(response.headers.get("etag"))
        return None
    except httpx.HTTPError:
        return None
    finally:
        if own:
            await client.aclose()
