"""Code signatures on macOS: an engine build that macOS will run, and words for one it kills.

On Apple Silicon the kernel runs only signed code: a binary with no signature, or with one
that no longer matches its bytes (a library whose paths were rewritten after linking, a
file changed in transit), is killed with SIGKILL the moment it starts or loads, and
prints nothing. So after unpacking an engine build on a Mac the store runs
:func:`prepare_build`:

1. ``codesign --verify --strict`` on every Mach-O file of the build (the engine, its
   libraries, any nested framework or helper), inside-out;
2. when all verify, nothing is changed (a publisher's signature is kept);
3. when any is unsigned or broken, every one is signed again ad hoc (``codesign --force
   --sign -``), inside-out — all of them, so a publisher-signed engine with library
   validation never meets an ad-hoc library — and verified again;
4. when that fails, :class:`SignError` says so in words, with codesign's own reason.

Signing ad hoc adds no trust and needs none: what vouches for the bytes is the sha256 from
the signed manifest, checked before the unpack. It only gives the kernel the signature it
needs to run them.

A build the user supplies (``engines.<family>.path``) is never changed; when one dies with
SIGKILL before a word, :func:`killed_reason` verifies it and names the command that signs
it for this Mac.

:func:`signing_order` is shared with the macOS release (``packaging/macos_release.py``),
which signs the app inside-out with a Developer ID. ``run`` (argv → (exit code or None,
output)) is injectable so the tests can play a Mac; ``platform`` decides whether this is one.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import macho
from ...errors import CantorError
from .exits import KILLED

CODESIGN = "/usr/bin/codesign"  # by full path: always there on macOS, never a PATH stand-in
BUNDLE_SUFFIXES = (".app", ".framework", ".bundle", ".xpc", ".appex", ".plugin")
TIMEOUT = 120.0  # one codesign call; a large library takes a second or two

Runner = Callable[[list[str]], "tuple[int | None, str]"]

VALID, UNSIGNED, INVALID, UNKNOWN = "valid", "unsigned", "invalid", "unknown"


class SignError(CantorError):
    """An engine build macOS would not run, and Cantor could not sign it for this Mac."""


def run_tool(argv: list[str], timeout: float = TIMEOUT) -> tuple[int | None, str]:
    """Run codesign; (exit code or None when it could not run, stderr + stdout)."""
    try:
        done = subprocess.run(
            argv,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"{argv[0]} could not run: {exc.strerror or exc}"
    return done.returncode, (done.stderr + done.stdout).strip()


# -- the command lines ---------------------------------------------------------------------


def verify_argv(path: str | os.PathLike) -> list[str]:
    """Every architecture, strict (Apple's own check before it runs code)."""
    return [CODESIGN, "--verify", "--all-architectures", "--strict", "--verbose=2", os.fspath(path)]


def adhoc_argv(path: str | os.PathLike) -> list[str]:
    """An ad-hoc signature for this Mac (no identity, no certificate)."""
    return [CODESIGN, "--force", "--sign", "-", os.fspath(path)]


def identity_argv(
    path: str | os.PathLike, identity: str, *, entitlements: str | os.PathLike | None = None
) -> list[str]:
    """A Developer ID signature as notarisation needs it: hardened runtime, a secure
    timestamp; the entitlements only on executables (a library has none). Never --deep."""
    argv = [CODESIGN, "--force", "--sign", identity, "--options", "runtime", "--timestamp"]
    if entitlements is not None:
        argv += ["--entitlements", os.fspath(entitlements)]
    return argv + [os.fspath(path)]


# -- what codesign said ----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    state: str  # valid | unsigned | invalid | unknown (codesign could not run)
    detail: str = ""  # codesign's own words (its last line that says something)


def verdict(code: int | None, output: str, path: str | os.PathLike = "") -> Verdict:
    """Read ``codesign --verify``: exit 0 is valid; "not signed at all" is unsigned; any
    other failure is a signature that does not hold ("invalid signature (code or signature
    have been modified)", "a sealed resource is missing or invalid", …). ``path`` is the
    file asked about: codesign starts its lines with it."""
    detail = _last_words(output, path)
    if code is None:
        return Verdict(UNKNOWN, detail or "codesign could not run")
    if code == 0:
        return Verdict(VALID, detail)
    if "not signed at all" in output:
        return Verdict(UNSIGNED, detail or "code object is not signed at all")
    return Verdict(INVALID, detail or f"codesign --verify failed (exit code {code})")


def _last_words(output: str, path: str | os.PathLike = "") -> str:
    """codesign's reason: its last line that says something, without the path it starts
    with ("/x/ace-server: invalid signature …" → "invalid signature …")."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    said = next((ln for ln in reversed(lines) if not ln.startswith("In architecture")), "")
    prefix = f"{os.fspath(path)}: " if path else ""
    return said[len(prefix) :] if prefix and said.startswith(prefix) else said


# -- which files, in which order -------------------------------------------------------------


def _bundle_executable(bundle: Path) -> Path | None:
    """The main binary a bundle's own signature covers (signed with the bundle)."""
    import plistlib

    if bundle.suffix == ".framework":
        return bundle / "Versions" / "Current" / bundle.stem
    for info in (bundle / "Contents" / "Info.plist", bundle / "Resources" / "Info.plist"):
        try:
            with open(info, "rb") as f:
                name = plistlib.load(f).get("CFBundleExecutable")
        except (OSError, ValueError, plistlib.InvalidFileException):
            continue
        if isinstance(name, str) and name:
            return (info.parent / "MacOS" / name) if info.parent.name == "Contents" else None
    return None


def signing_order(root: str | os.PathLike) -> list[Path]:
    """What to sign under ``root``, inside-out: every Mach-O file that is not a bundle's main
    binary (deepest first, executables after libraries), then every nested bundle (deepest
    first), then ``root`` itself when it is a bundle. Symbolic links are neither followed nor
    signed (a PyInstaller .app links Contents/MacOS into Contents/Frameworks)."""
    root = Path(root)
    bundles: list[Path] = []
    files: list[tuple[int, bool, str, Path]] = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        for d in list(dirs):
            if (here / d).is_symlink():
                dirs.remove(d)
            elif d.endswith(BUNDLE_SUFFIXES):
                bundles.append(here / d)
        for name in names:
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            found = macho.read(path)
            if found is not None:
                files.append((-len(path.parts), found.is_executable, str(path), path))
    mains = {
        p.resolve()
        for p in (_bundle_executable(b) for b in [*bundles, root] if b.suffix in BUNDLE_SUFFIXES)
        if p is not None and p.exists()
    }
    order = [path for *_, path in sorted(files) if path.resolve() not in mains]
    order += sorted(bundles, key=lambda b: (-len(b.parts), str(b)))
    if root.suffix in BUNDLE_SUFFIXES:
        order.append(root)
    return order


def is_executable_code(path: Path) -> bool:
    """An executable Mach-O or an app bundle: what gets the entitlements."""
    if path.is_dir():
        return path.suffix in (".app", ".xpc", ".appex")
    found = macho.read(path)
    return found is not None and found.is_executable


# -- an engine build -------------------------------------------------------------------------


@dataclass
class Prepared:
    """What :func:`prepare_build` did: ``kept`` (every signature held), ``signed`` (signed
    again ad hoc, with why), or ``skipped`` (not a Mac, or no Mach-O in the build)."""

    outcome: str
    files: list[Path] = field(default_factory=list)
    why: list[str] = field(default_factory=list)  # "libggml.dylib: invalid signature (…)"

    def describe(self) -> str:
        if self.outcome == "kept":
            return f"code signature verified ({len(self.files)} files)"
        if self.outcome == "signed":
            first = self.why[0] if self.why else ""
            more = f" and {len(self.why) - 1} more" if len(self.why) > 1 else ""
            return (
                f"signed ad hoc for this Mac ({len(self.files)} files; codesign said {first}{more})"
            )
        return "no code signature check (not macOS)"


def is_mac(platform: str | None = None) -> bool:
    return (platform or sys.platform) == "darwin"


def prepare_build(
    folder: str | os.PathLike,
    *,
    describe: str = "this engine build",
    platform: str | None = None,
    run: Runner | None = None,
) -> Prepared:
    """Make an unpacked engine build one macOS will run (see the module doc). Raises
    :class:`SignError` with the reason when it cannot; off macOS it does nothing."""
    if not is_mac(platform):
        return Prepared("skipped")
    run = run or run_tool
    order = signing_order(folder)
    if not order:
        return Prepared("skipped")
    broken: list[str] = []
    for path in order:
        found = verdict(*run(verify_argv(path)), path)
        if found.state == UNKNOWN:
            raise SignError(
                f"{describe}: cannot check its code signature, so macOS might stop it at "
                f"start without a word: {found.detail}"
            )
        if found.state != VALID:
            broken.append(f"{path.name}: {found.detail}")
    if not broken:
        return Prepared("kept", order)
    for path in order:
        code, output = run(adhoc_argv(path))
        if code != 0:
            raise SignError(
                f"{describe}: macOS would stop it at start ({broken[0]}), and signing it for "
                f"this Mac failed: codesign --sign - {path.name}: "
                f"{_last_words(output, path) or f'exit code {code}'}"
            )
    for path in order:
        found = verdict(*run(verify_argv(path)), path)
        if found.state != VALID:
            raise SignError(
                f"{describe}: macOS would stop it at start: {path.name}: {found.detail} "
                f"(still, after Cantor signed it for this Mac)"
            )
    return Prepared("signed", order, broken)


# -- a build that died without a word --------------------------------------------------------


@dataclass(frozen=True)
class Killed:
    reason: str  # in words, with what to do
    signature_broken: bool  # codesign said so: the cause is known, trying again won't help


def killed_reason(
    executable: str | os.PathLike,
    code: int | None,
    *,
    user_build: bool | None = None,
    platform: str | None = None,
    run: Runner | None = None,
) -> Killed | None:
    """Why macOS may have killed ``executable`` (SIGKILL before it printed anything), or
    None when that is not the case (not a Mac, another exit). A signature that does not
    hold is named with codesign's reason and what to do; otherwise the SIGKILL is only
    explained."""
    if not is_mac(platform) or code != KILLED:
        return None
    path = Path(executable)
    found = verdict(*(run or run_tool)(verify_argv(path)), path)
    quoted = shlex.quote(str(path))
    if found.state in (UNSIGNED, INVALID):
        sign = f"codesign --force --sign - {quoted} (and each library beside it)"
        fix = {
            True: f"sign it for this Mac with: {sign}",
            False: "Run: cantor backends --install to fetch and sign it again",
            None: f"for a build Cantor fetched, run: cantor backends --install; for your "
            f"own, sign it for this Mac with: {sign}",
        }[user_build]
        return Killed(
            f"macOS stopped it at start: its code signature does not hold ({found.detail}); {fix}",
            True,
        )
    if found.state == VALID:
        return Killed(
            "macOS stopped it with SIGKILL before it printed anything; its own signature "
            "holds, so a library it loads may not (check each file beside it with: "
            f"codesign --verify --strict FILE; folder {shlex.quote(str(path.parent))})",
            False,
        )
    return Killed(
        "macOS stopped it with SIGKILL before it printed anything, which is what a missing "
        f"or broken code signature does; check with: codesign --verify --strict {quoted}",
        False,
    )
