"""The macOS release steps after PyInstaller: sign inside-out, notarise and staple, assess.

    python packaging/macos_release.py sign APP --identity ID --entitlements FILE
    python packaging/macos_release.py notarize PATH --profile PROFILE   (.app or .dmg)
    python packaging/macos_release.py assess PATH [--notarized]
    python packaging/macos_release.py check APP --arch arm64

``installer/macos/make_dmg.sh`` runs them in this order: sign the .app, verify it, notarise
and staple the .app, assess it, make the .dmg from the stapled .app, sign the .dmg,
notarise and staple the .dmg, assess it.

- **sign**: every Mach-O file and nested bundle first, the .app last
  (``cantor_desktop/system/procs/codesign.py`` ``signing_order``), each with hardened runtime and a
  secure timestamp, the entitlements on executables only. Never ``codesign --deep`` (Apple:
  it signs what it finds with one set of options, and misses code outside the standard
  places); the check afterwards is ``codesign --verify --deep --strict``, which Apple does
  recommend.
- **notarize**: a .app goes up as a zip made by ``ditto`` (``notarytool`` takes zip, dmg,
  pkg); ``notarytool submit --wait --output-format json``; anything but "Accepted" fails
  the build with the notary's log (it names each file and why); then ``stapler staple`` and
  ``stapler validate`` on the .app or .dmg itself, so Gatekeeper needs no network.
- **assess**: ``spctl --assess`` as Gatekeeper will judge a download: ``--type execute`` for
  the .app, ``--type open --context context:primary-signature`` for the .dmg.
- **check**: every Mach-O file holds the build's architecture (one build per architecture;
  packaging/README.md says why), and lists binaries that ask for a newer macOS than the
  Info.plist's LSMinimumSystemVersion.

:func:`min_macos` (used by the spec) gives LSMinimumSystemVersion: Qt's own minimum for the
locked PySide6 (:data:`QT_MIN_MACOS`), raised to the newest macOS any bundled wheel is
tagged for (numpy's Accelerate wheels are tagged 14.0: a build made on macOS 14 needs 14).

Runs with the build's Python; the commands go through ``run`` (argv → (exit code, output)),
so the tests drive every step with a pretend Mac and check the exact command lines.
"""

from __future__ import annotations

import argparse
import json
import os
import plistlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cantor_desktop.system import macho
from cantor_desktop.system.procs import codesign

QT_MIN_MACOS = (13, 0)  # Qt 6.11 (PySide6 6.11.3 in uv.lock): macOS 13 Ventura or newer
LOCAL_NETWORK_USE = (
    "Cantor connects to a Cantor node on another computer of your local network when you "
    "choose one in Settings (a studio machine with a GPU, say)."
)

Runner = Callable[[list[str]], "tuple[int | None, str]"]


class ReleaseError(RuntimeError):
    """A release step failed; the message says which and why."""


def run_tool(argv: list[str]) -> tuple[int | None, str]:
    print("+", " ".join(argv), flush=True)
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        return None, f"{argv[0]}: {exc.strerror or exc}"
    output = (done.stdout + done.stderr).strip()
    if output:
        print(output, flush=True)
    return done.returncode, output


def _must(run: Runner, argv: list[str], what: str) -> str:
    code, output = run(argv)
    if code != 0:
        raise ReleaseError(f"{what} failed ({' '.join(argv[:3])} …): {output or code}")
    return output


# -- the Info.plist ----------------------------------------------------------------------------


def info_plist(name: str, version: str, min_macos: str) -> dict:
    """The keys Cantor.app's Info.plist carries beyond PyInstaller's own."""
    return {
        "CFBundleName": name,
        "CFBundleDisplayName": name,
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "LSUIElement": False,
        "LSMinimumSystemVersion": min_macos,
        "LSApplicationCategoryType": "public.app-category.music",
        "NSHighResolutionCapable": True,
        # follow the system's light or dark appearance (the default since 10.14; said
        # plainly so no later edit opts the app out)
        "NSRequiresAquaSystemAppearance": False,
        # macOS 15 asks before an app reaches another machine on the local network; a node
        # on this Mac (loopback) needs no permission
        "NSLocalNetworkUsageDescription": LOCAL_NETWORK_USE,
        "NSHumanReadableCopyright": "MIT licence",
    }


def _wheel_macos(tags: Iterable[str], arch: str) -> tuple[int, int] | None:
    """The oldest macOS among a wheel's tags for ``arch`` (universal2 counts for both)."""
    found = []
    for tag in tags:
        for platform in tag.split("-")[-1].split("."):
            m = re.fullmatch(r"macosx_(\d+)_(\d+)_(\w+)", platform)
            if m and m.group(3) in (arch, "universal2"):
                found.append((int(m.group(1)), int(m.group(2))))
    return min(found) if found else None


def min_macos(
    binaries: Iterable[str | os.PathLike], arch: str, distributions=None
) -> tuple[str, dict[str, str]]:
    """(LSMinimumSystemVersion, {distribution: its tag's macOS} for those that raise it above
    Qt's minimum). ``binaries`` are the bundled files' sources; each is traced to the wheel
    that installed it through the wheels' RECORD (importlib.metadata)."""
    import importlib.metadata as md

    wanted = {os.path.realpath(b) for b in binaries}
    floor = QT_MIN_MACOS
    raised: dict[str, str] = {}
    for dist in distributions if distributions is not None else md.distributions():
        wheel = dist.read_text("WHEEL") or ""
        tags = [ln.split(":", 1)[1].strip() for ln in wheel.splitlines() if ln.startswith("Tag:")]
        needs = _wheel_macos(tags, arch)
        if needs is None or needs <= QT_MIN_MACOS:
            continue
        located = (os.path.realpath(str(dist.locate_file(f))) for f in dist.files or ())
        if not any(path in wanted for path in located):
            continue
        raised[dist.metadata["Name"]] = f"{needs[0]}.{needs[1]}"
        floor = max(floor, needs)
    return f"{floor[0]}.{floor[1]}", raised


# -- sign ----------------------------------------------------------------------------------------


def sign(app: Path, identity: str, entitlements: Path, run: Runner = run_tool) -> list[Path]:
    """Sign ``app`` inside-out with a Developer ID, then verify it strictly."""
    if not identity or identity == "-":
        raise ReleaseError("sign: a Developer ID identity is needed (CANTOR_CODESIGN_IDENTITY)")
    order = codesign.signing_order(app)
    for path in order:
        argv = codesign.identity_argv(
            path, identity, entitlements=entitlements if codesign.is_executable_code(path) else None
        )
        _must(run, argv, f"signing {path.relative_to(app.parent)}")
    verify(app, run)
    return order


def verify(app: Path, run: Runner = run_tool) -> None:
    """``codesign --verify --deep --strict``: every nested signature, as Gatekeeper checks."""
    _must(
        run,
        [codesign.CODESIGN, "--verify", "--deep", "--strict", "--verbose=2", str(app)],
        f"verifying the signature of {app.name}",
    )


# -- notarise and staple -------------------------------------------------------------------------


def notarize(path: Path, profile: str, run: Runner = run_tool) -> str:
    """Submit ``path`` (.app zipped with ditto, or a .dmg), wait, fail with the notary's log
    unless it was accepted, then staple the ticket to ``path`` and validate it."""
    with tempfile.TemporaryDirectory(prefix="cantor-notary-") as tmp:
        upload = path
        if path.suffix == ".app":
            upload = Path(tmp) / f"{path.stem}.zip"
            _must(
                run,
                ["/usr/bin/ditto", "-c", "-k", "--keepParent", str(path), str(upload)],
                f"zipping {path.name} for the notary",
            )
        code, output = run(
            [
                "/usr/bin/xcrun",
                "notarytool",
                "submit",
                str(upload),
                "--keychain-profile",
                profile,
                "--wait",
                "--output-format",
                "json",
            ]
        )
    answer = _json_in(output)
    status, ident = answer.get("status"), answer.get("id")
    if status != "Accepted":
        log = ""
        if ident:
            _code, log = run(
                ["/usr/bin/xcrun", "notarytool", "log", str(ident), "--keychain-profile", profile]
            )
        raise ReleaseError(
            f"the notary did not accept {path.name}: {status or 'no answer'}"
            f"{' (' + answer['message'] + ')' if answer.get('message') else ''}"
            f"{'; exit code ' + str(code) if code else ''}"
            + (f"\n{_issues(log)}" if log else (f"\n{output}" if not answer else ""))
        )
    _must(run, ["/usr/bin/xcrun", "stapler", "staple", str(path)], f"stapling {path.name}")
    _must(run, ["/usr/bin/xcrun", "stapler", "validate", str(path)], f"validating {path.name}")
    return str(ident)


def _json_in(output: str) -> dict:
    """The JSON object notarytool printed (it may print progress lines before it)."""
    start = output.find("{")
    try:
        found = json.loads(output[start:]) if start >= 0 else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _issues(log: str) -> str:
    """The notary log's issues, one per line: "path: message"."""
    issues = _json_in(log).get("issues") or []
    lines = [
        f"  {item.get('path', '?')}: {item.get('message', '')}"
        for item in issues
        if isinstance(item, dict)
    ]
    return "\n".join(lines) if lines else log


# -- assess ----------------------------------------------------------------------------------------


def assess_argv(path: Path) -> list[str]:
    if path.suffix == ".dmg":
        return [
            "/usr/sbin/spctl",
            "--assess",
            "--type",
            "open",
            "--context",
            "context:primary-signature",
            "--verbose=4",
            str(path),
        ]
    return ["/usr/sbin/spctl", "--assess", "--type", "execute", "--verbose=4", str(path)]


def assess(path: Path, run: Runner = run_tool) -> str:
    """Gatekeeper's judgement ("accepted source=Notarized Developer ID"); fails otherwise."""
    return _must(run, assess_argv(path), f"Gatekeeper's assessment (spctl) of {path.name}")


# -- check -----------------------------------------------------------------------------------------


def check(app: Path, arch: str) -> list[str]:
    """Every Mach-O file holds ``arch`` (ReleaseError naming those that do not); returns
    notes on binaries asking for a newer macOS than the Info.plist says."""
    with open(app / "Contents" / "Info.plist", "rb") as f:
        declared = str(plistlib.load(f).get("LSMinimumSystemVersion", "0"))
    floor = tuple(int(n) for n in declared.split("."))
    wrong, notes = [], []
    for folder, dirs, names in os.walk(app):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in names:
            path = Path(folder) / name
            found = None if path.is_symlink() else macho.read(path)
            if found is None:
                continue
            rel = str(path.relative_to(app))
            if arch not in found.arches:
                wrong.append(f"{rel} ({', '.join(found.arches)})")
            if found.min_macos and found.min_macos[:2] > floor[:2]:
                notes.append(f"{rel} asks for macOS {macho.version_text(found.min_macos)}")
    if wrong:
        raise ReleaseError(f"not built for {arch}: " + "; ".join(wrong))
    return notes


# -- the command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="macos_release.py")
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("sign")
    p.add_argument("app", type=Path)
    p.add_argument("--identity", required=True)
    p.add_argument("--entitlements", type=Path, required=True)
    p = sub.add_parser("notarize")
    p.add_argument("path", type=Path)
    p.add_argument("--profile", required=True)
    p = sub.add_parser("assess")
    p.add_argument("path", type=Path)
    p = sub.add_parser("verify")
    p.add_argument("app", type=Path)
    p = sub.add_parser("check")
    p.add_argument("app", type=Path)
    p.add_argument("--arch", required=True)
    args = parser.parse_args(argv)
    try:
        if args.step == "sign":
            done = sign(args.app, args.identity, args.entitlements)
            print(f"macos_release: signed {len(done)} items inside-out; verified")
        elif args.step == "notarize":
            ident = notarize(args.path, args.profile)
            print(f"macos_release: {args.path.name} notarised ({ident}) and stapled")
        elif args.step == "assess":
            print(f"macos_release: {assess(args.path)}")
        elif args.step == "verify":
            verify(args.app)
        else:
            for note in check(args.app, args.arch):
                print(f"macos_release: note: {note}")
            print(f"macos_release: every binary holds {args.arch}")
    except ReleaseError as exc:
        print(f"macos_release: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
