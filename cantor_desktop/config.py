"""node.toml: the one settings file shared by the app, the CLI and the node.

One registry (:data:`OPTIONS`) declares every key with its type, default and allowed values;
loading validates against it, the CLI and the app's Settings page use the same checks.

tomlkit keeps the user's comments, order and unknown keys. Every save is a locked
read-modify-write: under a file lock it re-reads the file from disk, applies only the keys
being changed, writes a temp file, fsyncs and renames. Two processes changing different keys
at once therefore never lose each other's change, and a reader never sees half a file.

A malformed file raises :class:`ConfigError` with line and column and is never overwritten.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from urllib.parse import urlparse

from .errors import CantorError, short_repr
from .files import write_atomic
from .song.request import SONG_FORMATS
from .system.paths import paths

if TYPE_CHECKING:
    import tomlkit
    import tomlkit.exceptions

BACKENDS = ("cuda12", "metal", "vulkan", "cpu")
"""Every backend, in preference order (GPU-specific first, CPU last)."""

FAMILIES = ("acestep",)
MANIFEST_ENV = "CANTOR_MANIFEST_URL"
BOM = "\ufeff"


class ConfigError(CantorError):
    """node.toml cannot be read or a value is not allowed. The message says where and why."""

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        line: int | None = None,
        col: int | None = None,
        path: Path | None = None,
    ):
        super().__init__(message)
        self.key = key
        self.line = line
        self.col = col
        self.path = path


# -- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    key: str  # dotted: "node.port"
    kind: type  # str, int or bool
    default: Callable[[], Any]
    help: str
    choices: tuple[str, ...] = ()
    choices_from: Callable[[], tuple[str, ...]] | None = None
    """Choices another module owns, asked for when first needed (importing that module for
    the registry would load it into every process that reads a setting)."""
    check: Callable[[Any], str | None] | None = None  # returns a problem, or None
    minimum: int | None = None
    maximum: int | None = None
    optional: bool = False  # absent is meaningful (no default written)
    shown: Callable[[Any], Any] | None = None
    """How a value appears in a message (a URL's password hidden), when not as it is."""
    local_only: bool = False
    """Set only on the node's own machine (node.toml or `cantor config set`), never over
    HTTP: what runs, where files go, and who may talk to the node."""

    def choice_list(self) -> tuple[str, ...]:
        """The values a string option may take; empty when any string is allowed."""
        return self.choices or (self.choices_from() if self.choices_from else ())

    def allowed(self) -> str:
        if choices := self.choice_list():
            return ", ".join(f'"{c}"' for c in choices)
        if self.kind is bool:
            return "true or false"
        if self.kind is int:
            return f"a whole number from {self.minimum} to {self.maximum}"
        if self.kind is list:
            return 'a list of names, e.g. ["studio.local"]'
        return "a string"

    def validate(self, value: Any) -> Any:
        """Return the value when allowed, else raise ConfigError naming the key."""

        def bad(reason: str = "") -> ConfigError:
            plain = _plain(value)
            if self.shown is not None and isinstance(plain, str):
                plain = self.shown(plain)
            got = short_repr(plain)
            why = f" ({reason})" if reason else ""
            return ConfigError(
                f"{self.key} = {got} is not allowed{why}; allowed: {self.allowed()}", key=self.key
            )

        plain = _plain(value)
        if self.kind is bool:
            if not isinstance(plain, bool):
                raise bad()
        elif self.kind is int:
            if isinstance(plain, bool) or not isinstance(plain, int):
                raise bad()
            if (self.minimum is not None and plain < self.minimum) or (
                self.maximum is not None and plain > self.maximum
            ):
                raise bad()
        elif self.kind is list:
            if not isinstance(plain, list) or not all(isinstance(v, str) for v in plain):
                raise bad()
            plain = list(plain)
        else:
            if not isinstance(plain, str):
                raise bad()
            choices = self.choice_list()
            if choices and plain not in choices:
                raise bad()
        if self.check is not None:
            problem = self.check(plain)
            if problem:
                raise bad(problem)
        return plain

    def parse(self, text: str) -> Any:
        """Turn a command-line string into a value of this option's type, then validate."""
        if self.kind is bool:
            lowered = text.strip().lower()
            if lowered in ("true", "on", "yes", "1"):
                value: Any = True
            elif lowered in ("false", "off", "no", "0"):
                value = False
            else:
                raise ConfigError(
                    f"{self.key} = {short_repr(text)} is not allowed; allowed: {self.allowed()}",
                    key=self.key,
                )
        elif self.kind is list:
            value = split_list(text)
        elif self.kind is int:
            try:
                value = int(text.strip())
            except ValueError:
                raise ConfigError(
                    f"{self.key} = {short_repr(text)} is not allowed; allowed: {self.allowed()}",
                    key=self.key,
                ) from None
        else:
            value = text
        return self.validate(value)


def split_list(text: str) -> list[str]:
    """A list setting typed as text: names separated by commas or spaces."""
    return [part for part in re.split(r"[,\s]+", text.strip()) if part]


def _check_host(value: str) -> str | None:
    if not value.strip() or any(ch.isspace() for ch in value):
        return "a host name or IP address without spaces"
    return None


def is_loopback_host(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_download_url(value: str) -> str | None:
    """https anywhere; plain http only to a loopback address."""
    parsed = urlparse(value)
    if parsed.scheme == "https" and parsed.hostname:
        return None
    if parsed.scheme == "http" and parsed.hostname and is_loopback_host(parsed.hostname):
        return None
    return "an https:// URL (plain http only to 127.0.0.1 or localhost)"


def _check_manifest_url(value: str) -> str | None:
    if value == "":
        return None
    problem = check_download_url(value)
    return f"empty (the manifest built into Cantor) or {problem}" if problem else None


def _check_node_url(value: str) -> str | None:
    if value == "":
        return None
    parsed = urlparse(value)
    if parsed.scheme in ("http", "https") and parsed.hostname:
        return None
    return "empty (the local node) or an http:// or https:// address"


def _check_pool_url(value: str) -> str | None:
    from .pool.address import check

    return check(value)


def _redact_url(value: str) -> str:
    from .pool.address import redact

    return redact(value)


def _check_optional_node_url(value: str) -> str | None:
    if value == "":
        return None
    return _check_node_url(value)


def _check_nonempty(value: str) -> str | None:
    return None if value.strip() else "it must not be empty"


def _check_host_names(names: list[str]) -> str | None:
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\.?", name):
            return f"{short_repr(name)} is not a host name"
    return None


def _export_formats() -> tuple[str, ...]:
    from .export import FORMATS

    return tuple(FORMATS)


def _export_check(field: str) -> Callable[[Any], str | None]:
    """The export module's own rule for one [export] field (imported when used: it is light)."""

    def check(value: Any) -> str | None:
        from . import export

        try:
            export.ExportOptions.parse(**{field: value})
        except export.ExportError as exc:
            return exc.message
        return None

    return check


OPTIONS: dict[str, Option] = {
    o.key: o
    for o in [
        Option(
            "node.host",
            str,
            lambda: "127.0.0.1",
            "Address the node listens on; anything but loopback requires a token.",
            check=_check_host,
            local_only=True,
        ),
        Option(
            "node.port",
            int,
            lambda: 7823,
            "Port of the node's HTTP API.",
            minimum=1,
            maximum=65535,
            local_only=True,
        ),
        Option(
            "node.keep_loaded",
            bool,
            lambda: False,
            "Keep the last model loaded between songs (applies from the next song).",
        ),
        Option(
            "node.allowed_hosts",
            list,
            lambda: [],
            "Host names (besides IP addresses and localhost) the node answers to, e.g. a "
            "name your other machines use for it.",
            check=_check_host_names,
            local_only=True,
        ),
        Option(
            "node.max_queue",
            int,
            lambda: 100,
            "Most songs waiting or running at once; more are refused until some finish.",
            minimum=1,
            maximum=10000,
        ),
        *[
            Option(
                f"backends.{fam}",
                str,
                lambda: "auto",
                f"Backend for {fam}: auto, or a pinned one.",
                choices=("auto",) + BACKENDS,
            )
            for fam in FAMILIES
        ],
        Option(
            "engines.manifest",
            str,
            lambda: "",
            "A published engine manifest, used only when signed by a trusted key (empty: the "
            "one built into Cantor).",
            check=_check_manifest_url,
            local_only=True,
        ),
        *[
            Option(
                f"engines.{fam}.path",
                str,
                lambda: "",
                f"An ace-server executable you supply for {fam}; used as is, never replaced.",
                optional=True,
                local_only=True,
            )
            for fam in FAMILIES
        ],
        Option(
            "models.default",
            str,
            lambda: "acestep-v15-turbo",
            "The model a song uses when it names none.",
            check=_check_nonempty,
        ),
        Option(
            "models.lm",
            str,
            lambda: "auto",
            "Language model size for vocals.",
            choices=("auto", "0.6B", "1.7B", "4B"),
        ),
        Option(
            "downloads.connections",
            int,
            lambda: 8,
            "Connections a model or engine download uses at once, each fetching its own "
            "part of a file; a model's files share them, the next file starting on those "
            "the one before it leaves free (1: one stream, one file after another).",
            minimum=1,
            maximum=32,
        ),
        Option(
            "songs.dir",
            str,
            lambda: str(paths().default_songs_dir),
            "Folder for finished songs.",
            check=_check_nonempty,
            local_only=True,
        ),
        Option(
            "songs.format", str, lambda: "wav24", "Audio format of new songs.", choices=SONG_FORMATS
        ),
        Option(
            "export.format",
            str,
            lambda: "wav24",
            "Format of exported songs.",
            choices_from=_export_formats,
        ),
        Option(
            "export.rate",
            int,
            lambda: 48000,
            "Sample rate of exported songs: 48000 or 44100.",
            minimum=44100,
            maximum=48000,
            check=_export_check("rate"),
        ),
        Option(
            "export.loudness",
            str,
            lambda: "off",
            "Loudness of exported songs: off, or a target in LUFS such as -14 (streaming).",
            check=_export_check("loudness"),
        ),
        Option(
            "export.peak",
            str,
            lambda: "-1",
            "True-peak ceiling of exported songs in dBTP (with a loudness target), e.g. -1.",
            check=_export_check("peak"),
        ),
        Option(
            "export.pattern",
            str,
            lambda: "{title}_{bpm}bpm_{key}_take{n}",
            "File name of exported songs: {title} {bpm} {key} {n} {seed} {model} {date} …",
            check=_export_check("pattern"),
        ),
        Option(
            "export.drag",
            bool,
            lambda: False,
            "Songs dragged out of the app are exported with these choices (false: the files "
            "as the node made them).",
        ),
        Option(
            "pool.url",
            str,
            lambda: "",
            "A pool of nodes to join: redis://[user@]HOST:6379/0 (rediss:// for TLS); empty: "
            "this node alone. `cantor pool join URL` sets it and keeps the password in the "
            "keyring.",
            check=_check_pool_url,
            shown=_redact_url,
            local_only=True,
        ),
        Option(
            "pool.name",
            str,
            lambda: "",
            "This node's name in its pool (empty: the machine's name).",
            local_only=True,
        ),
        Option(
            "pool.advertise",
            str,
            lambda: "",
            "Where the pool's other members reach this node, e.g. http://studio-b:7823 "
            "(empty: the address it listens on, or the one that routes to Redis).",
            check=_check_optional_node_url,
            local_only=True,
        ),
        Option(
            "pool.lease",
            int,
            lambda: 30,
            "Seconds a node that stopped answering keeps its song before another member "
            "takes it over.",
            minimum=2,
            maximum=3600,
            local_only=True,
        ),
        Option(
            "pool.shared_songs",
            bool,
            lambda: False,
            "songs.dir is a folder every member of the pool mounts at the same path.",
            local_only=True,
        ),
        Option(
            "pool.allow_insecure",
            bool,
            lambda: False,
            "Join the pool even where its Redis is on another machine with no password or "
            "without TLS (`cantor pool join` asks; anyone on that network can then read the "
            "pool's songs and write what its members read).",
            local_only=True,
        ),
        Option(
            "pool.ca",
            str,
            lambda: "",
            "A CA certificate file for a rediss:// pool whose Redis certificate the studio "
            "signs itself (empty: the system's).",
            local_only=True,
        ),
        Option(
            "app.language",
            str,
            lambda: "",
            "The app's language: empty for the system's, or en, de (Deutsch), ja (日本語). "
            "Takes effect when the app starts again.",
            choices=("", "en", "de", "ja"),
            local_only=True,
        ),
        Option(
            "app.node_url",
            str,
            lambda: "",
            "Node the app drives: empty for the local one, or http://host:port.",
            check=_check_node_url,
            local_only=True,
        ),
    ]
}


APP_TABLES = ("app", "export")
"""Tables of the app's own settings: kept in the app's node.toml even when it drives a node
on another machine (the export runs where the app runs)."""


def is_app_key(key: str) -> bool:
    return key.split(".", 1)[0] in APP_TABLES


def option(key: str) -> Option:
    try:
        return OPTIONS[key]
    except KeyError:
        known = ", ".join(sorted(OPTIONS))
        raise ConfigError(f"unknown setting {key!r}; known settings: {known}", key=key) from None


# -- reading and writing ----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """tomlkit items → plain Python values."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def _lookup(doc: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def read_text_values(text: str, path: Path | None = None) -> Mapping[str, Any]:
    """node.toml's values, for reading: the standard library's parser (tomlkit, which keeps
    comments for a save, is ~1 MiB and milliseconds more). What only tomllib refuses (TOML
    1.1, which tomlkit reads: a trailing comma or a line break in an inline table, ``\\e``)
    is read by tomlkit as before; what both refuse gets tomlkit's words and position."""
    try:
        return tomllib.loads(text.removeprefix(BOM))
    except (tomllib.TOMLDecodeError, RecursionError):
        return parse_text(text, path)  # the text as read: it strips one BOM too


def parse_text(text: str, path: Path | None = None) -> tomlkit.TOMLDocument:
    """Parse node.toml text for a save (tomlkit keeps its comments and order); a syntax
    error becomes ConfigError with line and column."""
    import tomlkit
    import tomlkit.exceptions

    name = str(path) if path else "node.toml"
    if text.startswith(BOM):
        text = text[len(BOM) :]
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        col = exc.col + 1  # tomlkit counts columns from 0; editors from 1
        raise ConfigError(
            f"{name}: line {exc.line}, column {col}: {_parse_reason(exc)}",
            line=exc.line,
            col=col,
            path=path,
        ) from None
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply to read", path=path) from None
    except Exception as exc:  # e.g. a duplicate key: tomlkit gives no position
        at_line, at_col = _position_from_tomllib(text)
        where = f"line {at_line}, column {at_col}: " if at_line else ""
        raise ConfigError(f"{name}: {where}{exc}", line=at_line, col=at_col, path=path) from None


def _position_from_tomllib(text: str) -> tuple[int | None, int | None]:
    """Ask the standard library's parser where the problem is (it says "at line L, column C")."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+), column (\d+)", str(exc))
        if found:
            return int(found.group(1)), int(found.group(2))
    except Exception:
        pass
    return None, None


def _parse_reason(exc: tomlkit.exceptions.ParseError) -> str:
    message = str(exc)
    cut = message.rfind(" at line ")
    return message[:cut] if cut > 0 else message


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{path}: line {line}, column {col}: not UTF-8 text (save node.toml as UTF-8)",
            line=line,
            col=col,
            path=path,
        ) from None


def validate_document(doc: Mapping[str, Any], path: Path | None = None) -> None:
    """Check every known key that is present; shape errors name the table."""
    for table in {k.split(".")[0] for k in OPTIONS}:
        if table in doc and not isinstance(doc[table], Mapping):
            raise ConfigError(
                f"[{table}] must be a table, not {type(_plain(doc[table])).__name__}",
                key=table,
                path=path,
            )
    for fam in FAMILIES:
        found, value = _lookup(doc, f"engines.{fam}")
        if found and not isinstance(value, Mapping):
            raise ConfigError(
                f"engines.{fam} must be a table with a path key", key=f"engines.{fam}", path=path
            )
    for key, opt in OPTIONS.items():
        found, value = _lookup(doc, key)
        if found:
            opt.validate(value)


@dataclass
class Config:
    """A validated node.toml in memory. Read values with :meth:`get`."""

    path: Path
    doc: Mapping[str, Any] = field(default_factory=dict)
    exists: bool = False

    def get(self, key: str) -> Any:
        opt = option(key)
        found, value = _lookup(self.doc, key)
        return _plain(value) if found else opt.default()

    def is_set(self, key: str) -> bool:
        option(key)
        return _lookup(self.doc, key)[0]

    def as_dict(self) -> dict[str, Any]:
        return {key: self.get(key) for key in OPTIONS}

    def manifest_url(self) -> str:
        return os.environ.get(MANIFEST_ENV) or self.get("engines.manifest")

    def pinned_backend(self, family: str = "acestep") -> str | None:
        value = self.get(f"backends.{family}")
        return None if value == "auto" else value

    def songs_dir(self) -> Path:
        return Path(self.get("songs.dir")).expanduser()


def load(path: Path | None = None) -> Config:
    """Read and validate node.toml. A missing file gives the defaults (nothing is written)."""
    path = path or paths().config_file
    if not path.exists():
        return Config(path=path)
    doc = read_text_values(_read_text(path), path)
    try:
        validate_document(doc, path)
    except ConfigError as exc:
        exc.path = path
        raise ConfigError(f"{path}: {exc}", key=exc.key, path=path) from None
    return Config(path=path, doc=doc, exists=True)


def load_or_defaults(path: Path | None = None) -> tuple[Config, ConfigError | None]:
    """For the app: the settings, or the defaults in memory plus what is wrong."""
    path = path or paths().config_file
    try:
        return load(path), None
    except ConfigError as exc:
        return Config(path=path), exc


_CURRENT: dict[str, tuple[tuple, Config, ConfigError | None]] = {}


def current(path: Path | None = None) -> tuple[Config, ConfigError | None]:
    """node.toml as it is now, parsed again only when the file changed (tomlkit parsing
    costs milliseconds; the node reads its settings for every song, the app on clicks)."""
    path = path or paths().config_file
    try:
        st = path.stat()
        key: tuple = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        key = (None, None, None)
    hit = _CURRENT.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    cfg, err = load_or_defaults(path)
    _CURRENT[str(path)] = (key, cfg, err)
    return cfg, err


def _lock(path: Path):
    """The file lock of a save (imported here: reading settings needs none)."""
    from filelock import FileLock

    return FileLock(str(path) + ".lock", timeout=30)


def _set_in(doc: tomlkit.TOMLDocument, key: str, value: Any) -> None:
    parts = key.split(".")
    node: Any = doc
    for part in parts[:-1]:
        if part not in node:
            import tomlkit

            table = tomlkit.table()
            node[part] = table
        node = node[part]
    if value is None:
        if parts[-1] in node:
            del node[parts[-1]]
    else:
        node[parts[-1]] = value


def update(changes: Mapping[str, Any], path: Path | None = None) -> Config:
    """Validate and save some keys (None removes one), keeping everything else in the file.

    Raises ConfigError, leaving the file byte-identical, when a value is not allowed or the
    file on disk is malformed.
    """
    import tomlkit

    path = path or paths().config_file
    checked = {
        key: (None if value is None else option(key).validate(value))
        for key, value in changes.items()
    }
    with _lock(path):
        if path.exists():
            raw = _read_text(path)
            has_bom = raw.startswith(BOM)
            doc = parse_text(raw, path)
            validate_document(doc, path)
        else:
            has_bom = False
            doc = tomlkit.document()
        for key, value in checked.items():
            _set_in(doc, key, value)
        text = tomlkit.dumps(doc)
        write_atomic(path, ((BOM if has_bom else "") + text).encode("utf-8"))
    return Config(path=path, doc=doc, exists=True)


def set_from_text(key: str, text: str, path: Path | None = None) -> Config:
    """`cantor config set KEY VALUE`: parse the string by the key's type, validate, save."""
    return update({key: option(key).parse(text)}, path)


def describe(keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The registry as data (for the app's Settings page and `cantor config`)."""
    out = []
    for key in keys or OPTIONS:
        opt = OPTIONS[key]
        out.append(
            {
                "key": key,
                "type": opt.kind.__name__,
                "help": opt.help,
                "choices": list(opt.choice_list()),
                "allowed": opt.allowed(),
                "minimum": opt.minimum,
                "maximum": opt.maximum,
                "local_only": opt.local_only,
            }
        )
    return out
