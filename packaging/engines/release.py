#!/usr/bin/env python3
"""Write Cantor's engine manifest for a folder of built engine archives, and sign it.

    packaging/engines/release.py ARCHIVES_DIR --key KEYFILE [--out DIR] [--base-url URL]
                                 [--published DATE]
    packaging/engines/release.py ARCHIVES_DIR --key-env VAR ...
    packaging/engines/release.py ARCHIVES_DIR --bundle DIR

``--bundle DIR`` makes the folder a package carries its engines in instead (no key: the
package itself is signed): the archives copied into DIR and ``DIR/bundled.json``, the same
rows with their family and file name (cantor_desktop/install/bundled.py reads them).

Each archive must be named as build.py names it, ``ace-server-<commit>-<target>.<tar.gz|zip>``
with a target build.py knows, and hold a ``BUILD.json`` for that target; anything else is
refused. One manifest row per archive (family ``acestep``): the target's backend, OS and
architecture, the build's engine version, the download URL (the project's GitHub release,
``source.json`` ``release_url``, or ``--base-url``/<asset> for tests), sha256, size, archive
kind, executable and ``{"GGML_BACKEND": <device>}``. The manifest is checked by loading it
with ``cantor_desktop.install.manifest`` and signed with ``cantor_desktop.install.signing_keys`` (the scheme
of packaging/manifest_key.py): ``OUT/engines.json`` and ``OUT/engines.json.sig``.

KEYFILE holds the private key (base64 of its 32 raw bytes); ``--key-env VAR`` reads the same
text from an environment variable instead, so a CI secret never touches the disk.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import io
import json
import os
import re
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from cantor_desktop.install import manifest  # noqa: E402
from cantor_desktop.install import signing_keys  # noqa: E402


def _load_build():
    """packaging/engines/build.py (the target table), under a name no package takes."""
    name = "cantor_engines_build"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "build.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


build = _load_build()

FAMILY = "acestep"
NAME = re.compile(
    r"^ace-server-(?P<commit>[0-9a-f]{7,40})-(?P<target>[a-z0-9-]+)\.(?P<ext>tar\.gz|zip)$"
)
BACKEND_ORDER = ("cuda12", "metal", "vulkan", "cpu")


class ReleaseError(Exception):
    """An archive or the manifest is not acceptable; the message says why."""


def read_build_json(path: Path, kind: str) -> dict:
    """The BUILD.json inside an engine archive."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as zf:
                raw = zf.read("BUILD.json")
        else:
            with tarfile.open(path, "r:gz") as tar:
                member = tar.extractfile("BUILD.json")
                if member is None:
                    raise KeyError("BUILD.json")
                raw = member.read()
    except KeyError:
        raise ReleaseError(f"{path.name}: no BUILD.json inside") from None
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise ReleaseError(f"{path.name}: cannot read it ({exc})") from None
    return json.load(io.BytesIO(raw))


def row_for(path: Path, base_url: str | None = None) -> dict:
    """The manifest row of one archive. ReleaseError when its name does not say a target
    build.py knows, or its BUILD.json disagrees with its name."""
    m = NAME.match(path.name)
    target = build.TARGETS.get(m.group("target")) if m else None
    if m is None or target is None:
        raise ReleaseError(
            f"{path.name}: the name does not say its target; expected "
            f"ace-server-<commit>-<target>.<tar.gz|zip> with a target of "
            f"{', '.join(build.TARGETS)}"
        )
    if m.group("ext") != target.archive:
        raise ReleaseError(f"{path.name}: a {target.name} build is a {target.archive}")
    record = read_build_json(path, target.archive)
    if record.get("target") != target.name or not str(record.get("acestep_commit", "")).startswith(
        m.group("commit")
    ):
        raise ReleaseError(
            f"{path.name}: its BUILD.json says target {record.get('target')!r}, commit "
            f"{record.get('acestep_commit')!r}: not what its name says"
        )
    return {
        "backend": target.backend,
        "os": target.os,
        "arch": target.arch,
        "version": record["engine_version"],
        "url": asset_url(path.name, record["engine_version"], base_url),
        "sha256": build.sha256_file(path),
        "size": path.stat().st_size,
        "archive": target.archive,
        "executable": target.executable,
        "env": {"GGML_BACKEND": manifest.DEVICE_ENV[target.backend]},
    }


def asset_url(name: str, version: str, base_url: str | None) -> str:
    if base_url:
        return f"{base_url.rstrip('/')}/{name}"
    return build.load_source()["release_url"].format(version=version, asset=name)


def manifest_document(archives: list[Path], base_url: str | None, published: str) -> dict:
    rows = []
    for path in sorted(archives):
        rows.append(row_for(path, base_url))
    seen: dict[tuple, str] = {}
    for row in rows:
        key = (row["backend"], row["os"], row["arch"], row["version"])
        if key in seen:
            raise ReleaseError(f"two archives for {' '.join(key)}: {seen[key]} and {row['url']}")
        seen[key] = row["url"]
    rows.sort(key=lambda r: (BACKEND_ORDER.index(r["backend"]), r["os"], r["arch"], r["version"]))
    return {
        "schema": manifest.SCHEMA,
        "published": published,
        "families": {FAMILY: {"builds": rows}},
    }


BUNDLE_INDEX = "bundled.json"


def write_bundle(archives: list[Path], out: Path) -> Path:
    """The engines a package carries: each archive copied into ``out`` and its row (the
    manifest's, with ``family`` and ``file``) in ``out/bundled.json``."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in sorted(archives):
        row = row_for(path)
        shutil.copyfile(path, out / path.name)
        rows.append({"family": FAMILY, **row, "file": path.name})
    index = out / BUNDLE_INDEX
    index.write_text(json.dumps({"schema": manifest.SCHEMA, "builds": rows}, indent=2) + "\n")
    return index


def write_signed(doc: dict, key_text: str, out: Path) -> tuple[Path, Path]:
    """Write ``engines.json`` and ``engines.json.sig`` into ``out`` after checking that Cantor
    reads the manifest and that the signature verifies with the key's public half."""
    raw = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
    loaded = manifest.parse_bytes(raw, "release.py")
    if loaded.refused or len(loaded.builds) != len(doc["families"][FAMILY]["builds"]):
        raise ReleaseError(f"cantor_desktop.install.manifest refused builds: {loaded.refused}")
    try:
        key = signing_keys.load_private_key(key_text)
    except ValueError as exc:
        raise ReleaseError(f"the private key: {exc}") from None
    sig = signing_keys.sign(raw, key)
    trusted = [signing_keys.TrustedKey("release key", signing_keys.public_key_text(key))]
    signing_keys.verify(raw, sig, trusted)
    out.mkdir(parents=True, exist_ok=True)
    target, sig_path = out / "engines.json", out / "engines.json.sig"
    target.write_bytes(raw)
    sig_path.write_bytes(sig)
    return target, sig_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archives", type=Path, help="folder of build.py's archives")
    keys = ap.add_mutually_exclusive_group(required=True)
    keys.add_argument("--key", type=Path, help="private key file")
    keys.add_argument("--key-env", help="environment variable holding the private key")
    keys.add_argument("--bundle", type=Path, help="write the folder a package carries instead")
    ap.add_argument("--out", type=Path, default=build.DEFAULT_OUT)
    ap.add_argument("--base-url", help="download URL prefix instead of the GitHub release")
    ap.add_argument(
        "--published",
        default=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        help="the manifest's published field (default: today, UTC)",
    )
    args = ap.parse_args(argv)
    archives = [p for p in args.archives.iterdir() if p.name.endswith((".tar.gz", ".zip"))]
    if not archives:
        print(f"release.py: no .tar.gz or .zip in {args.archives}", file=sys.stderr)
        return 1
    if args.bundle is not None:
        try:
            index = write_bundle(archives, args.bundle)
        except ReleaseError as exc:
            print(f"release.py: {exc}", file=sys.stderr)
            return 1
        print(f"{index} written ({len(archives)} builds to carry)")
        return 0
    if args.key is not None:
        key_text = args.key.read_text(encoding="ascii")
    else:
        key_text = os.environ.get(args.key_env, "")
        if not key_text.strip():
            print(f"release.py: {args.key_env} is empty", file=sys.stderr)
            return 1
    try:
        doc = manifest_document(archives, args.base_url, args.published)
        target, sig = write_signed(doc, key_text, args.out)
    except (ReleaseError, manifest.ManifestError, signing_keys.SignatureRefused) as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 1
    for row in doc["families"][FAMILY]["builds"]:
        print(f"{row['backend']:7} {row['os']:8} {row['arch']:7} {row['version']}  {row['url']}")
    print(f"{target} and {sig.name} written ({len(doc['families'][FAMILY]['builds'])} builds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
