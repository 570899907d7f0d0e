"""The engine builds that come inside Cantor's package, so the first ACE-Step song needs only
a model: the CPU build in the Windows and Linux packages, the Metal build in the Mac app.

A package holds them in ``engines/`` beside its code (``sys._MEIPASS`` in the frozen app;
``CANTOR_BUNDLED_ENGINES`` names such a folder for a run from source and for tests): the
archives as the release made them and ``bundled.json``, one manifest row per archive (the
same row the engine manifest publishes for those bytes) plus its file name.

A bundled build is installed into the engine store like a downloaded one the first time the
store has no build of its backend (:func:`adopt`): its sha256 checked, unpacked, trial-loaded
before it is used. From then on it is a build like any other: ``cantor backends`` lists it
("came with Cantor"), ``--update`` replaces it with a newer one, and one whose trial rejected
it here is not unpacked again (the backend falls through to the next, or to a download).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from ..system import hardware
from . import engine_store
from .engine_store import InstalledBuild
from .manifest import Build, ManifestError, version_key

log = logging.getLogger(__name__)

FOLDER_ENV = "CANTOR_BUNDLED_ENGINES"
INDEX = "bundled.json"
URL_PREFIX = "bundled:"
"""A bundled build's ``url``: where it came from, for people (``bundled:FILE``)."""


def folder() -> Path | None:
    """Where this package keeps its engines, or None when it carries none."""
    given = os.environ.get(FOLDER_ENV, "").strip()
    if given:
        return Path(given)
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "engines"
    return None


def builds() -> list[tuple[Build, Path]]:
    """Every build the package carries, with its archive (rows that cannot be read are
    logged and left out)."""
    base = folder()
    if base is None:
        return []
    try:
        index = json.loads((base / INDEX).read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("bundled engines: %s cannot be read: %s", base / INDEX, exc)
        return []
    out = []
    for row in index.get("builds", []) if isinstance(index, dict) else []:
        try:
            build = Build(
                family=str(row["family"]),
                backend=str(row["backend"]),
                os=str(row["os"]),
                arch=str(row["arch"]),
                version=str(row["version"]),
                url=URL_PREFIX + str(row["file"]),
                sha256=str(row["sha256"]).lower(),
                size=int(row["size"]) if row.get("size") is not None else None,
                archive=str(row["archive"]),
                executable=str(row["executable"]),
                env={str(k): str(v) for k, v in (row.get("env") or {}).items()},
            )
            version_key(build.version)
        except (KeyError, TypeError, ValueError, ManifestError) as exc:
            log.warning("bundled engines: a row of %s is not a build: %s", base / INDEX, exc)
            continue
        out.append((build, base / str(row["file"])))
    return out


def carried(family: str, backend: str, hw: hardware.Hardware) -> tuple[Build, Path] | None:
    """The build of ``family`` × ``backend`` the package carries for this machine."""
    return next(
        (
            (b, p)
            for b, p in builds()
            if (b.family, b.backend, b.os, b.arch) == (family, backend, hw.os, hw.arch)
        ),
        None,
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def adopt(family: str, backend: str, hw: hardware.Hardware) -> InstalledBuild | None:
    """Install the carried build of ``backend`` when the store has none (and no user build
    stands in), unless a trial here rejected those very bytes; None when nothing was done."""
    found = carried(family, backend, hw)
    if found is None:
        return None
    build, archive = found
    if engine_store.user_build(family, backend) is not None:
        return None
    entry = engine_store.inspect(family, backend)
    if entry.build is not None or entry.problem:
        return None
    record = engine_store.trial_record(family, backend, engine_store.build_key(build))
    if record is not None and record.rejected and record.applies(hw.backends[backend].evidence):
        return None  # it did not load here: the backend falls through, as for a download
    try:
        sha = _sha256(archive)
    except OSError as exc:
        log.warning("bundled engine %s cannot be read: %s", archive, exc)
        return None
    if sha != build.sha256:
        log.error(
            "bundled engine %s has sha256 %s, not %s: not installed", archive, sha, build.sha256
        )
        return None
    log.info("installing the %s engine that came with Cantor (%s)", backend, build.version)
    try:
        return engine_store.install_archive(build, archive)
    except engine_store.StoreError as exc:
        log.error("the bundled %s engine could not be installed: %s", backend, exc)
        return None


def adopt_all(hw: hardware.Hardware) -> list[InstalledBuild]:
    """:func:`adopt` for every build the package carries for this machine."""
    done = []
    for build, _archive in builds():
        if (build.os, build.arch) == (hw.os, hw.arch):
            installed = adopt(build.family, build.backend, hw)
            if installed is not None:
                done.append(installed)
    return done


def is_bundled(build: InstalledBuild) -> bool:
    return build.url.startswith(URL_PREFIX)
