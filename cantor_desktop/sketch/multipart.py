"""multipart/form-data bodies as ace-server reads them (RFC 7578).

ace-server tells a *file* part from a plain *field* by its (non-empty) filename: ``audio``,
``src_latents``, ``ref_audio`` and ``ref_latents`` count only as files (a part without a
filename is ignored, and the job then lacks its source), while ``request`` may come either
way. When a name comes twice the first part counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .request import BadRequest


@dataclass(frozen=True)
class FormPart:
    name: str
    filename: str | None  # None or "": a plain field
    content_type: str
    data: bytes


def boundary_of(content_type: str) -> str:
    for item in content_type.split(";")[1:]:
        key, _, value = item.strip().partition("=")
        if key.strip().lower() == "boundary":
            return value.strip().strip('"')
    return ""


def _disposition(value: str) -> tuple[str | None, str | None]:
    """(name, filename) of a ``Content-Disposition: form-data; name=…; filename=…``."""
    name = filename = None
    for item in value.split(";")[1:]:
        key, eq, raw = item.strip().partition("=")
        if not eq:
            continue
        raw = raw.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            raw = raw[1:-1].replace('\\"', '"')
        key = key.strip().lower()
        if key == "name":
            name = raw
        elif key == "filename":
            filename = raw
    return name, filename


def parse(body: bytes, content_type: str) -> dict[str, FormPart]:
    """The parts of a multipart/form-data body by name (the first of a name wins)."""
    boundary = boundary_of(content_type)
    if not boundary:
        raise BadRequest("Invalid multipart body (no boundary)")
    delim = b"--" + boundary.encode("latin-1")
    view = memoryview(body)
    pos = body.find(delim)
    if pos < 0:
        raise BadRequest("Invalid multipart body")
    parts: dict[str, FormPart] = {}
    while True:
        pos += len(delim)
        if body[pos : pos + 2] == b"--":
            break  # the closing delimiter
        line_end = body.find(b"\r\n", pos)
        if line_end < 0:
            raise BadRequest("Invalid multipart body")
        head_end = body.find(b"\r\n\r\n", line_end)
        if head_end < 0:
            raise BadRequest("Invalid multipart body")
        head = body[line_end + 2 : head_end].decode("utf-8", "replace")
        nxt = body.find(b"\r\n" + delim, head_end + 4)
        if nxt < 0:
            raise BadRequest("Invalid multipart body")
        headers = {}
        for raw in head.split("\r\n"):
            key, colon, value = raw.partition(":")
            if colon:
                headers[key.strip().lower()] = value.strip()
        name, filename = _disposition(headers.get("content-disposition", ""))
        if name is not None and name not in parts:
            parts[name] = FormPart(
                name, filename, headers.get("content-type", ""), bytes(view[head_end + 4 : nxt])
            )
        pos = nxt + 2
    return parts


def file(parts: dict[str, FormPart], name: str) -> FormPart | None:
    """The part ``name`` when it came as a file (a non-empty filename), as ace-server's
    ``has_file``; None otherwise."""
    part = parts.get(name)
    return part if part is not None and part.filename else None


def field_or_file(parts: dict[str, FormPart], name: str) -> bytes | None:
    part = parts.get(name)
    return None if part is None else part.data
