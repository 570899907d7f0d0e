"""The one client of a Cantor node (httpx, SSE included).

The CLI (`cantor sing`, `cantor upgrade`), the Qt app and the node's own supervisor
(node_process) talk to a node only through this module; every :class:`NodeClient` method
mirrors one endpoint of the node's API (``node/routes/``, one module a resource). A node
error becomes :class:`NodeError` carrying the node's message, the HTTP status and the field
it named (status 0: the node could not be reached). Streams (song events, model pull,
backend install/update) are async generators of ``(event, data)`` pairs; wrap one in
``contextlib.aclosing`` when you may stop reading before its final event, so its HTTP
response is closed by the task that opened it.

Requests go only to the node they were meant for: no redirect is followed and no proxy is
taken from the environment; certificates are checked for an ``https://`` node (certifi's
authorities, httpx's default), and the certificate store is not even loaded for plain http.

The token goes only to a node that has proved it holds it (:mod:`.proof`): a client proves
the node before its first request with the token, again after the node could not be reached
and at most every :data:`PROOF_TTL_S` while it works. Anything else on the node's address is
a stranger (:class:`StrangerNode`): named, sent nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, cast
from urllib.parse import quote, urlsplit

import httpx

from .. import __version__, config
from ..auth import access, proof
from ..errors import CantorError
from ..models.events import PullEvent
from ..system.net import http_url
from ..song.record import FINAL_EVENTS, check_song_id, safe_file_name

DEFAULT_TIMEOUT = 30.0
"""Seconds a request may wait for the node's next bytes (streams and long jobs: no limit)."""
CONNECT_TIMEOUT = 5.0
"""Seconds to make a connection: a node that does not accept within them is unreachable."""
NO_READ_TIMEOUT = httpx.Timeout(None, connect=CONNECT_TIMEOUT)
"""For streams and long jobs (a song's events, an upload, the LM): connect in time, then
wait for the node as long as it takes."""


class NodeError(CantorError):
    """The node refused or failed a request, or could not be reached (status 0)."""

    def __init__(
        self,
        message: str,
        status: int = 0,
        field: str | None = None,
        type_: str | None = None,
        body: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field
        self.type = type_
        self.body = body or {}

    @property
    def unreachable(self) -> bool:
        return self.status == 0


class StrangerNode(NodeError):
    """Something answers at the node's address but cannot prove it holds the token: it was
    sent nothing, and no node is started on top of it."""

    def __init__(self, url: str):
        super().__init__(stranger_words(url), 0, None, "stranger")
        self.url = url

    @property
    def unreachable(self) -> bool:
        return False


def stranger_words(url: str) -> str:
    """What the user is told about a stranger at ``url``."""
    parts = urlsplit(url)
    if config.is_loopback_host(parts.hostname or ""):
        return (
            f"something else answers on port {parts.port}; it is not this Cantor's node: it "
            f"could not prove it holds this Cantor's token (another program, another Cantor "
            f"home's node, or a token given in CANTOR_NODE_TOKEN that is not this node's), "
            f"so it was sent none. Stop it, or give Cantor another port: cantor config set "
            f"node.port PORT"
        )
    return (
        f"the node at {url} could not prove it holds the token you gave: the token is not "
        f"that node's (`cantor node token` there prints it), or the node is older than this "
        f"Cantor (upgrade it); the token was not sent"
    )


def local_url(cfg: config.Config | None = None) -> str:
    """The URL of this machine's node as node.toml configures it."""
    if cfg is None:
        cfg, _err = config.current()
    return http_url(cfg.get("node.host"), cfg.get("node.port"))


def local_token() -> str | None:
    """The token of this home's node (None until a node has made one)."""
    try:
        return access.read_token()
    except access.TokenError:
        return None


PROOF_TTL_S = 5.0
"""A node is proved again before the token goes out when its last proof is this old."""


class NodeAuth:
    """The bearer token on every request, sent only to a node that proved it holds it.

    Without a token given, the token of this home's node is looked up when first needed,
    and again once after a 401 (the node may have made it after this client started: the
    app's first run). The lookups run off the event loop: the OS keyring can take a while
    (D-Bus, an unlock prompt), and the window must not wait."""

    OPEN = ("/v1/health",)
    """Answered without a token: no need to look one up (nor open the keyring) for them."""

    def __init__(self, token: str | None, discover: bool, url: str):
        self.token = token
        self.discover = discover
        self.url = url
        self._proven: tuple[str, float] | None = None  # (token, when) of the last proof

    async def headers(self, path: str) -> dict[str, str]:
        if path in self.OPEN and self.token is None:
            return {}
        if self.token is None and self.discover:
            self.token = await asyncio.to_thread(local_token)
        if not self.token:
            return {}
        await self.prove()
        return {"Authorization": f"Bearer {self.token}"}

    async def prove(self) -> None:
        """Make sure the node at the URL holds the token before it is sent (StrangerNode
        when it does not; NodeError "unreachable" when nothing answers)."""
        token = self.token
        now = asyncio.get_running_loop().time()
        if (
            token
            and self._proven
            and self._proven[0] == token
            and now - self._proven[1] < PROOF_TTL_S
        ):
            return
        found, why = await _who_answers(self.url, CONNECT_TIMEOUT, token)
        if found == OURS and token:
            self._proven = (token, asyncio.get_running_loop().time())
            return
        self._proven = None
        if found == STRANGER:
            raise StrangerNode(self.url)
        raise NodeError(f"cannot reach the node at {self.url}: {why}")

    def forget(self) -> None:
        """The node could not be reached: prove it again before the next token goes out
        (whatever answers next may be another program)."""
        self._proven = None

    async def renewed(self) -> bool:
        """After a 401: True when this home's node has a token other than the one sent."""
        if not self.discover:
            return False
        fresh = await asyncio.to_thread(local_token)
        if fresh and fresh != self.token:
            self.token = fresh
            return True
        return False


OURS, STRANGER, NO_NODE = "ours", "stranger", "none"
CONNECT_TIMEOUT = 5.0
BUSY_RETRIES = 3


def http_client(
    url: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The httpx client for the node at ``url`` (paths are relative to it).

    ``trust_env=False``: no proxy, ``.netrc`` or ``SSL_CERT_FILE`` from the environment —
    a ``HTTP_PROXY`` set for the browser must not carry the node's token to the proxy, nor
    send a request for 127.0.0.1 through it. Redirects are not followed (httpx's default,
    relied on): a node never redirects, and the token goes only to the node it was meant
    for. Certificates are checked for ``https://`` (certifi's authorities); for plain http
    the store is not loaded (~3 MiB and ~20 ms a client, for a loopback node that never uses
    it). ``timeout``: for each read and write; a connection is made within
    :data:`CONNECT_TIMEOUT` (or ``timeout``, when shorter)."""
    connect = CONNECT_TIMEOUT if timeout is None else min(CONNECT_TIMEOUT, timeout)
    return httpx.AsyncClient(
        base_url=url,
        trust_env=False,
        follow_redirects=False,
        verify=httpx.URL(url).scheme != "http",
        timeout=httpx.Timeout(timeout, connect=connect),
        headers={"User-Agent": f"cantor/{__version__}"},
        transport=transport,
    )


def unreachable_words(exc: httpx.RequestError) -> str:
    """Why a request found no node, in words: a timeout by its kind and length, else the
    operating system's own reason (httpx's "All connection attempts failed" names only its
    kind; "Connection refused" is underneath)."""
    try:
        limits = exc.request.extensions.get("timeout", {})
    except RuntimeError:  # failed before a request was made
        limits = {}
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {_seconds(limits.get('connect'))}"
    if isinstance(exc, httpx.ReadTimeout):
        return f"the node sent nothing for {_seconds(limits.get('read'))}"
    if isinstance(exc, httpx.WriteTimeout):
        return f"the node took nothing of the request for {_seconds(limits.get('write'))}"
    reason: BaseException | None = exc
    while reason is not None:
        if isinstance(reason, OSError) and reason.errno is not None:
            return str(reason)
        reason = reason.__cause__ or reason.__context__
    return str(exc) or type(exc).__name__


def _seconds(limit: float | None) -> str:
    return f"{limit:g} s" if limit is not None else "too long"


async def which_node(url: str, timeout: float = 1.0, token: str | None = None) -> str:
    """Who answers at ``url``: :data:`OURS` (a node that proved it holds ``token`` — by
    default, for an address on this machine, this home's token), :data:`STRANGER` (anything
    else that answers: another account's program, another Cantor home's node, a node that
    cannot prove it; never sent the token), or :data:`NO_NODE`.

    The proof is :mod:`.proof`'s: a fresh challenge to the tokenless health check, answered
    with a MAC under the token of the challenge and the port the node answered on (on this
    machine, the port asked). On Linux a listener of this machine's port that belongs to
    another user is a stranger before anything is sent."""
    return (await _who_answers(url, timeout, token))[0]


async def _who_answers(url: str, timeout: float, token: str | None) -> tuple[str, str]:
    """Who answers at ``url`` (:func:`which_node`), and why when nothing does (the
    transport's words)."""
    from ..system.net import listening_uids

    parts = urlsplit(url)
    local = config.is_loopback_host(parts.hostname or "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if local:
        owners = await asyncio.to_thread(listening_uids, port)
        if sys.platform != "win32" and owners and owners != {os.getuid()}:
            return STRANGER, ""
        if token is None:
            token = await asyncio.to_thread(local_token)
    challenge = proof.new_challenge()
    body: Any = None
    for attempt in range(BUSY_RETRIES):
        try:
            async with http_client(url, timeout=timeout) as http:
                response = await http.get("/v1/health", params={proof.QUERY: challenge})
                body = response.json() if response.status_code == 200 else None
        except httpx.RequestError as exc:
            return NO_NODE, unreachable_words(exc)
        except ValueError:
            return STRANGER, ""  # something answers, not with a node's JSON
        if response.status_code != 503:
            break
        await asyncio.sleep(0.2 * (attempt + 1))  # a node busy with strangers: ask again
    else:
        return NO_NODE, "it is too busy to answer (503)"
    if not isinstance(body, dict) or body.get("status") != "ok" or not token:
        return STRANGER, ""
    answered_port = body.get("port")
    if not isinstance(answered_port, int) or (local and answered_port != port):
        return STRANGER, ""
    proved = proof.verify(token, challenge, answered_port, body.get("proof"))
    return (OURS if proved else STRANGER), ""


def _error_from(response: httpx.Response) -> NodeError:
    if response.is_redirect:
        where = response.headers.get("location", "elsewhere")
        return NodeError(
            f"the node sent this request on to {where}: Cantor follows no redirect from a "
            "node (give the node's own address)",
            response.status_code,
        )
    try:
        body = response.json()
        err = body.get("error", {}) if isinstance(body, dict) else {}
        if isinstance(err, str):
            err = {"message": err}
    except ValueError:
        body, err = {}, {}
    message = err.get("message") or response.text.strip() or response.reason_phrase
    return NodeError(
        message,
        response.status_code,
        err.get("field"),
        err.get("type"),
        err if isinstance(err, dict) else {},
    )


async def parse_sse(lines: AsyncIterator[str]) -> AsyncGenerator[tuple[str, Any], None]:
    """Server-Sent Events lines → (event, data); data is JSON-decoded when it is JSON."""
    event = "message"
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    payload: Any = json.loads(text)
                except ValueError:
                    payload = text
                yield event, payload
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        text = "\n".join(data)
        try:
            yield event, json.loads(text)
        except ValueError:
            yield event, text


class NodeClient:
    """Async client of one node. Use as ``async with NodeClient(url) as node: …``.

    ``token``: the node's token. Left out for a node on this machine (a loopback address),
    the client finds this home's token itself; a node elsewhere needs it given."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.base_url = (base_url or local_url()).rstrip("/")
        discover = token is None and config.is_loopback_host(urlsplit(self.base_url).hostname or "")
        self._auth = NodeAuth(token, discover, self.base_url)
        self._http = http_client(self.base_url, timeout=timeout, transport=transport)

    @property
    def token(self) -> str | None:
        return self._auth.token

    def use_token(self, token: str) -> None:
        """The node's token, learnt after this client was made (a child node reports it)."""
        self._auth.token = token

    async def identify(self) -> str:
        """:func:`which_node` for this client's node and token (the token found first, for
        this home's node): OURS, STRANGER or NO_NODE; a node found to be ours is proved."""
        if self._auth.token is None and self._auth.discover:
            self._auth.token = await asyncio.to_thread(local_token)
        try:
            await self._auth.prove()
        except StrangerNode:
            return STRANGER
        except NodeError:
            return NO_NODE
        return OURS

    async def __aenter__(self) -> "NodeClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- plumbing ------------------------------------------------------------------------

    async def _send(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        """Send with the token, and once more with this home's newer token after a 401 (when
        the body can be sent again); the response's body is not read yet (close it)."""
        replayable = not hasattr(kw.get("content"), "__aiter__")
        for attempt in (1, 2):
            sent = {**(headers or {}), **await self._auth.headers(path)}
            request = self._http.build_request(method, path, headers=sent, **kw)
            try:
                response = await self._http.send(request, stream=True)
            except httpx.RequestError:
                self._auth.forget()
                raise
            if response.status_code == 401 and attempt == 1 and replayable:
                try:
                    renewed = await self._auth.renewed()
                except BaseException:
                    await response.aclose()
                    raise
                if renewed:
                    await response.aclose()
                    continue
            return response
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def _opened(self, method: str, path: str, **kw: Any) -> AsyncIterator[httpx.Response]:
        """A streamed response, closed when the block ends; a refusal as NodeError."""
        response = await self._send(method, path, **kw)
        try:
            if response.status_code >= 300:
                await response.aread()
                raise _error_from(response)
            yield response
        finally:
            await response.aclose()

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = await self._send(method, path, **kw)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.RequestError as exc:
            raise NodeError(
                f"cannot reach the node at {self.base_url}: {unreachable_words(exc)}"
            ) from exc
        if response.status_code >= 300:
            raise _error_from(response)
        return response

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        response = await self._request(method, path, **kw)
        try:
            return response.json()
        except ValueError:
            raise NodeError(
                f"the node answered {path} with something that is not JSON", response.status_code
            ) from None

    async def _stream(
        self, method: str, path: str, *, final: tuple[str, ...] = (), **kw: Any
    ) -> AsyncGenerator[tuple[str, Any], None]:
        """One SSE response as ``(event, data)`` pairs.

        The response is opened and closed by the task iterating the stream: a final event
        is yielded only after the response is closed, and a consumer that stops early (or
        is cancelled) closes it when it closes the generator. Callers that may stop before
        the end must close the generator in their own task:
        ``async with contextlib.aclosing(node.events(id)) as events: async for …``.
        """
        last: tuple[str, Any] | None = None
        _loop_closes_async_generators()
        try:
            async with self._opened(method, path, timeout=NO_READ_TIMEOUT, **kw) as response:
                lines = cast(AsyncGenerator[str, None], response.aiter_lines())
                events = parse_sse(lines)
                try:
                    async for event, data in events:
                        if event in final:
                            last = (event, data)
                            break
                        yield event, data
                finally:
                    await events.aclose()
                    await lines.aclose()
        except httpx.RequestError as exc:
            raise NodeError(f"lost the node at {self.base_url}: {unreachable_words(exc)}") from None
        if last is not None:
            yield last  # the response is already closed: nothing left to leak

    # -- node ----------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        return await self._json("GET", "/v1/health")

    async def system(self) -> dict[str, Any]:
        return await self._json("GET", "/v1/system")

    async def pool(self, brief: bool = False, songs: bool = True) -> dict[str, Any]:
        """The pool this node is a member of (``GET /v1/pool``): its members, lanes and
        songs by state (``songs=False``: without them, which costs a look at every song;
        ``brief``: only its state, which the node knows without asking Redis); NodeError
        404 when the node is in none."""
        params = {"brief": "true"} if brief else {} if songs else {"songs": "false"}
        return await self._json("GET", "/v1/pool", params=params or None)

    async def restart(self) -> dict[str, Any]:
        """Ask the node to restart once its running songs end."""
        return await self._json("POST", "/v1/node/restart")

    async def shutdown(self) -> dict[str, Any]:
        """Ask the node to stop now: it ends its songs and engines and exits."""
        return await self._json("POST", "/v1/node/shutdown")

    # -- models --------------------------------------------------------------------------

    async def models(self, all: bool = False) -> dict[str, Any]:
        """The library; ``all=True`` also lists catalogue models that can be pulled."""
        return await self._json("GET", "/v1/models", params={"all": "true"} if all else None)

    async def pull(self, name: str) -> AsyncIterator[PullEvent]:
        """A model download's progress as :class:`PullEvent`; ends with ``done`` or
        ``failed`` (the node's own failure, e.g. the hub refused)."""
        stream = self._stream(
            "POST", "/v1/models/pull", json={"name": name}, final=("done", "error")
        )
        async with contextlib.aclosing(stream) as events:
            async for event, data in events:
                try:
                    yield PullEvent.from_sse(event, data, model=name)
                except ValueError:
                    continue  # a step a newer node knows and this client does not

    async def delete_model(self, name: str) -> dict[str, Any]:
        return await self._json("DELETE", f"/v1/models/{_segment(name)}")

    async def discard_parts(self, name: str) -> dict[str, Any]:
        """Delete what a failed or stopped download left (``.part`` files):
        ``{"name", "deleted", "freed_bytes"}``; NodeError 409 while it still downloads."""
        return await self._json("DELETE", f"/v1/models/{_segment(name)}/parts")

    async def import_model(self, path: str | os.PathLike) -> dict[str, Any]:
        """Adopt a .gguf file on the node's own machine (a node of this machine only)."""
        return (await self._json("POST", "/v1/models/import", json={"path": os.fspath(path)}))[
            "imported"
        ]

    async def find_models(self, folders: list[str] | None = None) -> list[dict[str, Any]]:
        """ACE-Step files other tools downloaded on the node's machine (the Hugging Face
        cache, acestep.cpp's models folder, ``folders``): each with its ``state``."""
        body = {"folders": folders} if folders else {}
        return (await self._json("POST", "/v1/models/find", json=body))["found"]

    async def adopt_models(
        self, paths: list[str], *, folders: list[str] | None = None, copy: bool = False
    ) -> list[dict[str, Any]]:
        """Take found files into the node's library (checked, then linked or copied): what
        became of each (``how``: linked, copied, refused, already there; ``note``)."""
        body: dict[str, Any] = {"paths": paths, "copy": copy}
        if folders:
            body["folders"] = folders
        return (await self._json("POST", "/v1/models/adopt", json=body, timeout=NO_READ_TIMEOUT))[
            "adopted"
        ]

    async def upload_model(
        self,
        path: str | os.PathLike,
        *,
        name: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        chunk: int = 1 << 20,
    ) -> dict[str, Any]:
        """Send a .gguf file to the node, which keeps it in its library folder (for a node
        on another machine). ``on_progress(sent, total)`` after each chunk."""
        path = Path(path)
        return (
            await self._send_file("/v1/models/upload", path, name or path.name, on_progress, chunk)
        )["imported"]

    async def _send_file(
        self,
        endpoint: str,
        path: Path,
        name: str,
        on_progress: Callable[[int, int], None] | None,
        chunk: int = 1 << 20,
    ) -> Any:
        """POST a file's bytes (``application/octet-stream``, ``?name=``), read in a worker
        thread as it goes; the node's JSON answer.

        A node that refuses the file from its head alone (too large for it, a token it does
        not take) answers at once and hangs up. httpx reads that answer only if it arrived
        before the write failed (httpcore reads a response after a write error, but over
        asyncio the bytes not yet read go with the connection): the error then says the
        upload broke off, how far it got, and where the reason is."""
        total = path.stat().st_size
        sent = 0

        async def body():
            nonlocal sent
            with open(path, "rb") as fh:
                while True:
                    data = await asyncio.to_thread(fh.read, chunk)
                    if not data:
                        return
                    sent += len(data)
                    yield data
                    if on_progress is not None:
                        on_progress(sent, total)

        # closed here, even when the node answers before reading it all (a refusal)
        async with contextlib.aclosing(body()) as content:
            try:
                return await self._json(
                    "POST",
                    endpoint,
                    params={"name": name},
                    content=content,
                    timeout=NO_READ_TIMEOUT,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(total),
                    },
                )
            except NodeError as exc:
                cause = exc.__cause__
                if not sent or not isinstance(cause, httpx.RequestError):
                    raise
                raise NodeError(
                    f"the upload of {path.name} to the node at {self.base_url} broke off after "
                    f"{_size(sent)} of {_size(total)} ({unreachable_words(cause)}); "
                    "the node may have refused it (a file too large for it, a token it does "
                    "not take): its log says why"
                ) from None

    # -- adapters ------------------------------------------------------------------------

    async def adapters(self) -> dict[str, Any]:
        """The node's LoRA adapters: ``{"adapters": [...], "folder"}``."""
        return await self._json("GET", "/v1/adapters")

    async def add_adapter(self, path: str | os.PathLike, name: str | None = None) -> dict[str, Any]:
        """Copy a .safetensors adapter or a PEFT folder on the node's own machine into its
        adapters (a node of this machine only); the adapter as the node keeps it."""
        body: dict[str, Any] = {"path": os.fspath(path)}
        if name:
            body["name"] = name
        return (await self._json("POST", "/v1/adapters", json=body, timeout=NO_READ_TIMEOUT))[
            "added"
        ]

    async def upload_adapter(
        self,
        path: str | os.PathLike,
        *,
        name: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Send a .safetensors adapter to a node on another machine (``name``: default the
        file's name, without .safetensors and made acceptable)."""
        from ..models.adapters import name_from

        path = Path(path)
        return (
            await self._send_file("/v1/adapters/upload", path, name or name_from(path), on_progress)
        )["added"]

    async def remove_adapter(self, name: str) -> dict[str, Any]:
        """Delete an adapter on the node; NodeError 409 while a song uses it."""
        return await self._json("DELETE", f"/v1/adapters/{_segment(name)}")

    async def hf_token(self) -> dict[str, Any]:
        """Whether the node's machine has a Hugging Face token (never the token itself)."""
        return await self._json("GET", "/v1/hub/token")

    async def set_hf_token(self, token: str) -> dict[str, Any]:
        return await self._json("PUT", "/v1/hub/token", json={"token": token})

    async def remove_hf_token(self) -> dict[str, Any]:
        return await self._json("DELETE", "/v1/hub/token")

    # -- songs ---------------------------------------------------------------------------

    async def queue_song(self, request: dict[str, Any], node: str | None = None) -> dict[str, Any]:
        """Queue a song: ``{"id", "state", "model"[, "note"]}`` — a note when the node chose
        for the user (the Sketch on a machine with no ACE-Step model yet). In a pool,
        ``node`` (a member's name or id) sends it to that member; None: any member."""
        params = {"node": node} if node else None
        answer = await self._json("POST", "/v1/songs", json=request, params=params)
        check_song_id(answer.get("id"))
        return answer

    async def submit_song(self, request: dict[str, Any], node: str | None = None) -> str:
        return (await self.queue_song(request, node))["id"]

    async def songs(self, state: str | None = None) -> list[dict[str, Any]]:
        params = {"state": state} if state else None
        return (await self._json("GET", "/v1/songs", params=params))["songs"]

    async def song(self, song_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/songs/{check_song_id(song_id)}")

    def events(self, song_id: str) -> AsyncIterator[tuple[str, Any]]:
        """The song's events, its current state first; ends after done/failed/cancelled."""
        return self._stream("GET", f"/v1/songs/{check_song_id(song_id)}/events", final=FINAL_EVENTS)

    async def audio(self, song_id: str, dest: Path | str, take: int = 1) -> Path:
        """Download a take to ``dest`` (a file, or a folder to keep the node's file name)."""
        check_song_id(song_id)
        dest = Path(dest)
        try:
            async with self._opened(
                "GET", f"/v1/songs/{song_id}/audio", params={"take": take}, timeout=NO_READ_TIMEOUT
            ) as response:
                if dest.is_dir():
                    dest = dest / (_filename(response) or song_id)
                dest.parent.mkdir(parents=True, exist_ok=True)
                part = dest.with_name(dest.name + ".part")
                try:
                    with open(part, "wb") as fh:
                        async for chunk in response.aiter_bytes():
                            fh.write(chunk)
                except BaseException:
                    part.unlink(missing_ok=True)  # never left to be taken for a whole take
                    raise
                part.replace(dest)
        except httpx.RequestError as exc:
            raise NodeError(f"lost the node at {self.base_url}: {unreachable_words(exc)}") from None
        return dest

    # -- styles --------------------------------------------------------------------------
    async def styles(self) -> list[dict[str, Any]]:
        """Every style the node keeps, each with what the node lacks for it (``missing``)."""
        return (await self._json("GET", "/v1/styles"))["styles"]

    async def save_style(self, name: str, **body: Any) -> dict[str, Any]:
        """Keep a style (``fields``, ``seed``, ``from`` a song, ``reference``, ``replace``)."""
        return await self._json("POST", "/v1/styles", json={"name": name, **body})

    async def remove_style(self, name: str) -> dict[str, Any]:
        return await self._json("DELETE", f"/v1/styles/{_segment(name)}")

    async def rename_style(self, name: str, new: str) -> dict[str, Any]:
        return await self._json("POST", f"/v1/styles/{_segment(name)}/rename", json={"name": new})

    async def export_style(self, name: str) -> bytes:
        """The style as one file (a zip with its reference sound)."""
        response = await self._request(
            "GET", f"/v1/styles/{_segment(name)}/file", timeout=NO_READ_TIMEOUT
        )
        return response.content

    async def import_style(self, data: bytes, *, replace: bool = False) -> dict[str, Any]:
        return await self._json(
            "POST",
            "/v1/styles/import",
            params={"replace": "true" if replace else "false"},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
            timeout=NO_READ_TIMEOUT,
        )

    async def upload(
        self,
        path: Path | str,
        name: str | None = None,
        *,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Send an audio file to the node (to edit or to learn from); its upload record."""
        path = Path(path)
        return await self._send_file("/v1/uploads", path, name or path.name, on_progress)

    async def delete_upload(self, upload_id: str) -> dict[str, Any]:
        """Remove an upload (and what engines encoded of it)."""
        return await self._json("DELETE", f"/v1/uploads/{_segment(upload_id)}")

    async def lm(
        self, *, mode: str, caption: str, lyrics: str = "", model: str | None = None
    ) -> dict[str, Any]:
        """The language model's help: ``inspire`` or ``format`` (see the node's /v1/lm)."""
        body = {"mode": mode, "caption": caption, "lyrics": lyrics}
        if model:
            body["model"] = model
        return await self._json("POST", "/v1/lm", json=body, timeout=NO_READ_TIMEOUT)

    async def understand(self, source: dict[str, Any], model: str | None = None) -> dict[str, Any]:
        """Caption, lyrics, BPM, key, time signature, duration and language of a take
        (``{"song": id, "take": n}``) or an upload (``{"upload": id}``)."""
        body: dict[str, Any] = {"source": source}
        if model:
            body["model"] = model
        return await self._json("POST", "/v1/understand", json=body, timeout=NO_READ_TIMEOUT)

    def all_events(self) -> AsyncIterator[tuple[str, Any]]:
        """Every song's events for as long as the node runs (``hello`` first): see
        :class:`cantor_desktop.song.record.SongEvent`."""
        return self._stream("GET", "/v1/events")

    async def change_song(
        self, song_id: str, *, title: str | None = None, favourite: bool | None = None
    ) -> dict[str, Any]:
        """Rename a song ("" gives it back its caption) or mark it; the song as it is now."""
        body: dict[str, Any] = {}
        if title is not None:
            body["title"] = title
        if favourite is not None:
            body["favourite"] = favourite
        return await self._json("PATCH", f"/v1/songs/{check_song_id(song_id)}", json=body)

    async def cancel(self, song_id: str) -> dict[str, Any]:
        return await self._json("POST", f"/v1/songs/{check_song_id(song_id)}/cancel")

    async def delete_song(self, song_id: str, delete_files: bool = False) -> dict[str, Any]:
        """Forget a finished (done, failed or cancelled) song; NodeError 409 while it is
        queued or running (cancel it first). ``delete_files`` also deletes its audio files
        and sidecars. Returns ``{"id", "forgotten", "files_deleted", "files_kept"}``."""
        params = {"delete_files": "true"} if delete_files else None
        return await self._json("DELETE", f"/v1/songs/{check_song_id(song_id)}", params=params)

    async def retry(self, song_id: str) -> str:
        return (await self._json("POST", f"/v1/songs/{check_song_id(song_id)}/retry"))["id"]

    async def generate(self, **fields: Any) -> tuple[bytes, str]:
        """Lemonade-style one-shot: audio bytes and their content type."""
        response = await self._request(
            "POST", "/v1/audio/generations", json=fields, timeout=NO_READ_TIMEOUT
        )
        return response.content, response.headers.get("content-type", "")

    # -- config --------------------------------------------------------------------------

    async def config(self) -> dict[str, Any]:
        return await self._json("GET", "/v1/config")

    async def patch_config(self, changes: dict[str, Any]) -> dict[str, Any]:
        return await self._json("PATCH", "/v1/config", json=changes)

    # -- backends ------------------------------------------------------------------------

    async def backends(self) -> dict[str, Any]:
        return await self._json("GET", "/v1/backends")

    def use_backend(self, backend: str, family: str = "acestep") -> AsyncIterator[tuple[str, Any]]:
        """Fetch, trial-load and pin ``backend`` ("auto" unpins); ends with done or error."""
        return self._stream(
            "POST",
            "/v1/backends/use",
            json={"family": family, "backend": backend},
            final=("done", "error"),
        )

    def install_backend(self, family: str = "acestep") -> AsyncIterator[tuple[str, Any]]:
        """Install the best backend that works on the node's machine (like --install)."""
        return self._stream(
            "POST", "/v1/backends/install", json={"family": family}, final=("done", "error")
        )

    def update_backends(self) -> AsyncIterator[tuple[str, Any]]:
        return self._stream("POST", "/v1/backends/update", final=("done", "error"))


def _loop_closes_async_generators() -> None:
    """Make sure async generators left unfinished are closed on the running loop.

    A stream is read through a chain of async generators (events, lines, bytes); one that a
    consumer drops without closing stays suspended until garbage collection. asyncio's own
    loops install hooks that close such generators in a task on the loop; qasync's loop does
    not, so Python would close them synchronously, outside any task. When the thread has no hooks (or those of a loop that is closed
    now), install the running loop's, as ``asyncio.BaseEventLoop.run_forever`` does."""
    import asyncio
    import sys

    loop = asyncio.get_running_loop()
    hooks = sys.get_asyncgen_hooks()
    owner = getattr(hooks.finalizer, "__self__", None)
    if hooks.finalizer is not None and not (
        isinstance(owner, asyncio.AbstractEventLoop) and owner is not loop and owner.is_closed()
    ):
        return  # the loop's own hooks, or someone else's: leave them
    firstiter = getattr(loop, "_asyncgen_firstiter_hook", None)
    finalizer = getattr(loop, "_asyncgen_finalizer_hook", None)
    if firstiter is not None and finalizer is not None:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count} bytes"


def _segment(name: str) -> str:
    """A name as one segment of a path: a model named after a file ("my song é.gguf", or
    one with a "?" or "#") reaches the node whole, never cut into a query or a fragment."""
    return quote(name, safe="")


def _filename(response: httpx.Response) -> str:
    disposition = response.headers.get("content-disposition", "")
    for part in disposition.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "filename*" and value.lower().startswith("utf-8''"):
            from urllib.parse import unquote

            return safe_file_name(unquote(value[7:]))
        if key == "filename":
            return safe_file_name(value.strip('"'))
    return ""
