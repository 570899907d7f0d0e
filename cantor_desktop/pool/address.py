"""The pool's address: ``redis://[user[:password]@]HOST[:PORT][/DB]`` (``rediss://`` for TLS).

The password is a secret: it never goes into node.toml (``cantor pool join`` keeps it in
the OS keyring) and never into a log or a message (:func:`redact`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from ..errors import CantorError

SCHEMES = ("redis", "rediss")
POOL_ENV = "CANTOR_POOL_URL"
"""Set by ``cantor node --pool URL`` for the node it runs (wins over ``[pool] url``)."""
INSECURE_ENV = "CANTOR_POOL_ALLOW_INSECURE"
"""Set by ``cantor node --pool URL --allow-insecure``: that run joins an exposed pool."""
DEFAULT_PORT = 6379


class PoolAddressError(CantorError, ValueError):
    """A pool URL that cannot be used; the message says why (never the password)."""


@dataclass(frozen=True)
class PoolAddress:
    scheme: str
    host: str
    port: int
    db: int
    user: str | None = None
    password: str | None = None

    @property
    def tls(self) -> bool:
        return self.scheme == "rediss"

    def url(self, *, password: bool = False) -> str:
        """The URL; with ``password`` the one redis-py connects with (never shown)."""
        cred = ""
        if self.user or (password and self.password):
            cred = quote(self.user or "", safe="")
            if password and self.password:
                cred += ":" + quote(self.password, safe="")
            cred += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{cred}{host}:{self.port}/{self.db}"

    def shown(self) -> str:
        """For people and logs: the user, never the password."""
        return self.url(password=False)

    def without_password(self) -> PoolAddress:
        return PoolAddress(self.scheme, self.host, self.port, self.db, self.user, None)

    def with_password(self, password: str | None) -> PoolAddress:
        return PoolAddress(self.scheme, self.host, self.port, self.db, self.user, password)

    @property
    def key(self) -> str:
        """A name for this pool's secrets (the keyring entry of its password)."""
        return f"{self.user or ''}@{self.host}:{self.port}/{self.db}"


def parse(url: str) -> PoolAddress:
    """The pool URL, checked; PoolAddressError naming what is wrong."""
    text = (url or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise PoolAddressError(f"pool URL {redact(text)!r}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise PoolAddressError(
            f"pool URL {redact(text)!r}: must start with redis:// (or rediss:// for TLS)"
        )
    if not parts.hostname:
        raise PoolAddressError(f"pool URL {redact(text)!r}: names no host")
    if parts.query or parts.fragment:
        raise PoolAddressError(f"pool URL {redact(text)!r}: takes no ?query or #fragment")
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise PoolAddressError(
            f"pool URL {redact(text)!r}: the path is the database number, e.g. /0"
        )
    return PoolAddress(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port or DEFAULT_PORT,
        db=int(path or 0),
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages about a bad URL too)."""
    scheme, sep, rest = (url or "").partition("://")
    if not sep:
        return url
    cred, at, host = rest.rpartition("@")
    if not at:
        return url
    user, colon, _password = cred.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"


def check(url: str) -> str | None:
    """The config registry's check of ``pool.url``: None when usable, else the problem."""
    if url == "":
        return None
    try:
        found = parse(url)
    except PoolAddressError as exc:
        return str(exc)
    if found.password is not None:
        return (
            "keep the password out of node.toml: `cantor pool join URL` asks for it and "
            "keeps it in the OS keyring"
        )
    return None


def is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def exposure(address: PoolAddress, has_password: bool) -> str | None:
    """What joining the pool at ``address`` exposes to the network, in a sentence; None
    when nothing (Redis on this machine, or TLS with a password)."""
    if is_loopback(address.host):
        return None
    where = f"{address.host}:{address.port}"
    bits = []
    if not has_password:
        bits.append(
            f"Redis at {where} asks for no password: anyone who can reach it can read the "
            "pool's songs and write records every member reads"
        )
    if not address.tls:
        bits.append(
            f"redis:// is not encrypted: anyone on the network between this machine and "
            f"{where} can read the songs' requests"
            + (" and the Redis password" if has_password else "")
            + " and change what the members read (rediss:// encrypts it)"
        )
    return "; ".join(bits) + "." if bits else None


def password_on_command_line(where: str) -> str:
    """The refusal of a password written into a pool URL on a command line."""
    return (
        f"{where}: leave the password out of the URL — a command line can be read by every "
        "user of this machine while the command runs. Give it when asked, with "
        "--password-stdin or in CANTOR_POOL_PASSWORD."
    )
