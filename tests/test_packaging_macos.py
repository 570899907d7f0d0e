"""The macOS release steps (packaging/macos_release.py) against a pretend Mac: the exact
command lines of signing inside-out, notarising and stapling the .app and the .dmg, and
Gatekeeper's assessment; each failure named; the Info.plist keys; the minimum macOS traced
to the wheels; one architecture per build. What only a Mac proves: packaging/README.md."""

from __future__ import annotations

import json
import os
import plistlib
import sys
from pathlib import Path

import pytest
from support.macos_code import FakeCodesign, fat, thin, write

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))

import macos_release

ID = "Developer ID Application: Cantor Project (A1B2C3D4E5)"
ENT = ROOT / "installer" / "macos" / "entitlements.plist"


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "Cantor.app"
    c = app / "Contents"
    write(c / "MacOS" / "cantor-desktop", thin(filetype="executable"), 0o755)
    write(c / "Frameworks" / "libpython3.11.dylib", thin())
    write(c / "Frameworks" / "numpy" / "_core" / "_multiarray.so", thin(filetype="bundle"))
    fw = c / "Frameworks" / "PySide6" / "Qt" / "lib" / "QtCore.framework"
    write(fw / "Versions" / "A" / "QtCore", thin())
    (fw / "Versions" / "Current").symlink_to("A")
    write(c / "Resources" / "base_library.zip", b"PK\x05\x06" + b"\0" * 18)
    (c / "MacOS" / "libpython3.11.dylib").symlink_to("../Frameworks/libpython3.11.dylib")
    with open(c / "Info.plist", "wb") as f:
        plistlib.dump({"CFBundleExecutable": "cantor-desktop", "LSMinimumSystemVersion": "13.0"}, f)
    return app


class Mac:
    """Answers for ditto, notarytool, stapler and spctl; codesign by FakeCodesign."""

    def __init__(self, notary: dict | None = None, spctl: tuple[int, str] | None = None):
        self.codesign = FakeCodesign()
        self.calls: list[list[str]] = []
        self.notary = notary or {"id": "2efe2717-52ef-43a5-96dc-0797e4ca1041", "status": "Accepted"}
        self.spctl = spctl or (0, "accepted\nsource=Notarized Developer ID")
        self.log = {
            "status": "Invalid",
            "issues": [
                {
                    "path": "Cantor.zip/Cantor.app/Contents/Frameworks/libpython3.11.dylib",
                    "message": "The signature does not include a secure timestamp.",
                }
            ],
        }

    def __call__(self, argv: list[str]) -> tuple[int | None, str]:
        self.calls.append(list(argv))
        tool = argv[0]
        if tool == "/usr/bin/codesign":
            return self.codesign(argv)
        if tool == "/usr/bin/ditto":
            Path(argv[-1]).write_bytes(b"PK")
            return 0, ""
        if argv[:3] == ["/usr/bin/xcrun", "notarytool", "submit"]:
            accepted = self.notary.get("status") == "Accepted"
            text = "Conducting pre-submission checks…\n" + json.dumps(self.notary)
            return (0 if accepted else 1), text
        if argv[:3] == ["/usr/bin/xcrun", "notarytool", "log"]:
            return 0, json.dumps(self.log)
        if argv[:2] == ["/usr/bin/xcrun", "stapler"]:
            return 0, "The staple and validate action worked!"
        if tool == "/usr/sbin/spctl":
            return self.spctl
        return 127, f"unexpected: {argv}"


def test_the_app_is_signed_inside_out_with_runtime_timestamp_and_entitlements(tmp_path):
    app = _app(tmp_path)
    mac = Mac()
    macos_release.sign(app, ID, ENT, run=mac)
    signing = [c for c in mac.calls if "--sign" in c]
    signed = [str(Path(c[-1]).relative_to(tmp_path)) for c in signing]
    assert signed == [
        "Cantor.app/Contents/Frameworks/numpy/_core/_multiarray.so",
        "Cantor.app/Contents/Frameworks/libpython3.11.dylib",
        "Cantor.app/Contents/Frameworks/PySide6/Qt/lib/QtCore.framework",
        "Cantor.app",
    ]
    base = ["/usr/bin/codesign", "--force", "--sign", ID, "--options", "runtime", "--timestamp"]
    for argv in signing[:-1]:  # libraries, extensions, frameworks: no entitlements
        assert argv[:-1] == base
    assert signing[-1] == base + ["--entitlements", str(ENT), str(app)]
    assert not any("--deep" in c for c in signing)  # never signed with --deep …
    assert mac.calls[-1] == [  # … but verified with it, strictly, last
        "/usr/bin/codesign",
        "--verify",
        "--deep",
        "--strict",
        "--verbose=2",
        str(app),
    ]


def test_a_failed_signature_stops_the_release_naming_the_file(tmp_path):
    app = _app(tmp_path)
    mac = Mac()
    lib = str(app / "Contents" / "Frameworks" / "libpython3.11.dylib")
    mac.codesign.refuse_signing[lib] = "The timestamp service is not available."
    with pytest.raises(macos_release.ReleaseError, match=r"signing Cantor\.app/Contents/"
                       r"Frameworks/libpython3\.11\.dylib failed .*timestamp service"):  # fmt: skip
        macos_release.sign(app, ID, ENT, run=mac)
    with pytest.raises(macos_release.ReleaseError, match="a Developer ID identity is needed"):
        macos_release.sign(app, "-", ENT, run=mac)


def test_the_app_and_the_dmg_are_each_notarised_then_stapled(tmp_path):
    app = _app(tmp_path)
    dmg = write(tmp_path / "Cantor-0.9-macos-arm64.dmg", b"koly")
    mac = Mac()
    assert macos_release.notarize(app, "cantor-notary", run=mac) == mac.notary["id"]
    zipped = mac.calls[0][-1]
    assert mac.calls[0] == ["/usr/bin/ditto", "-c", "-k", "--keepParent", str(app), zipped]
    assert zipped.endswith("/Cantor.zip")
    assert mac.calls[1:] == [
        ["/usr/bin/xcrun", "notarytool", "submit", zipped, "--keychain-profile", "cantor-notary",
         "--wait", "--output-format", "json"],
        ["/usr/bin/xcrun", "stapler", "staple", str(app)],  # the ticket on the .app itself
        ["/usr/bin/xcrun", "stapler", "validate", str(app)],
    ]  # fmt: skip
    assert not os.path.exists(zipped)  # the upload is not left behind
    mac.calls.clear()
    macos_release.notarize(dmg, "cantor-notary", run=mac)
    assert mac.calls == [
        ["/usr/bin/xcrun", "notarytool", "submit", str(dmg), "--keychain-profile",
         "cantor-notary", "--wait", "--output-format", "json"],
        ["/usr/bin/xcrun", "stapler", "staple", str(dmg)],
        ["/usr/bin/xcrun", "stapler", "validate", str(dmg)],
    ]  # fmt: skip


def test_a_rejected_submission_fails_with_the_notarys_reasons_and_nothing_is_stapled(tmp_path):
    app = _app(tmp_path)
    mac = Mac(notary={"id": "4b1c", "status": "Invalid", "message": "Processing complete"})
    with pytest.raises(macos_release.ReleaseError) as err:
        macos_release.notarize(app, "cantor-notary", run=mac)
    assert str(err.value) == (
        "the notary did not accept Cantor.app: Invalid (Processing complete); exit code 1\n"
        "  Cantor.zip/Cantor.app/Contents/Frameworks/libpython3.11.dylib: The signature does "
        "not include a secure timestamp."
    )
    assert ["/usr/bin/xcrun", "notarytool", "log", "4b1c", "--keychain-profile",
            "cantor-notary"] in mac.calls  # fmt: skip
    assert not any("stapler" in c for c in mac.calls)


def test_gatekeeper_assesses_the_app_to_run_and_the_dmg_to_open(tmp_path):
    mac = Mac()
    app, dmg = tmp_path / "Cantor.app", tmp_path / "Cantor.dmg"
    assert "Notarized Developer ID" in macos_release.assess(app, run=mac)
    macos_release.assess(dmg, run=mac)
    assert mac.calls == [
        ["/usr/sbin/spctl", "--assess", "--type", "execute", "--verbose=4", str(app)],
        ["/usr/sbin/spctl", "--assess", "--type", "open", "--context",
         "context:primary-signature", "--verbose=4", str(dmg)],
    ]  # fmt: skip
    refused = Mac(spctl=(3, f"{app}: rejected\nsource=Unnotarized Developer ID"))
    with pytest.raises(macos_release.ReleaseError, match="Unnotarized Developer ID"):
        macos_release.assess(app, run=refused)


def test_the_info_plist_says_where_the_app_runs_and_what_it_asks():
    plist = macos_release.info_plist("Cantor", "0.9.0", "14.0")
    assert plist["LSMinimumSystemVersion"] == "14.0"
    assert plist["NSRequiresAquaSystemAppearance"] is False  # Dark Mode follows the system
    assert "local network" in plist["NSLocalNetworkUsageDescription"]
    assert not any("Microphone" in k or "Camera" in k for k in plist)  # Cantor records nothing
    plistlib.dumps(plist)  # a valid property list


def _dist(site: Path, name: str, tag: str, files: list[str]):
    """A wheel installed into ``site``: its files, RECORD and WHEEL (with its tag)."""
    import importlib.metadata as md

    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
    for f in files:
        write(site / f, thin())
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return next(d for d in md.distributions(path=[str(site)]) if d.metadata["Name"] == name)


def test_the_minimum_macos_is_qts_raised_by_a_bundled_wheel_tagged_newer(tmp_path):
    site = tmp_path / "site-packages"
    numpy = _dist(site, "numpy", "cp311-cp311-macosx_14_0_arm64", ["numpy/_core/_m.so"])
    shiboken = _dist(site, "shiboken6", "cp310-abi3-macosx_13_0_universal2", ["shiboken6/S.so"])
    scipy = _dist(site, "scipy", "cp311-cp311-macosx_15_0_arm64", ["scipy/_s.so"])
    psutil = _dist(
        site, "psutil", "cp36-abi3-macosx_10_9_x86_64.macosx_11_0_arm64", ["psutil/_p.so"]
    )
    dists = [numpy, shiboken, scipy, psutil]
    bundled = [site / "numpy/_core/_m.so", site / "shiboken6/S.so", site / "psutil/_p.so"]
    # scipy is installed but not bundled (the spec excludes it): it does not count
    assert macos_release.min_macos(bundled, "arm64", dists) == ("14.0", {"numpy": "14.0"})
    assert macos_release.min_macos(bundled[1:], "arm64", dists) == ("13.0", {})
    assert macos_release.min_macos(bundled, "x86_64", dists) == ("13.0", {})


def test_a_binary_of_the_other_architecture_fails_the_check_and_newer_ones_are_noted(tmp_path):
    app = _app(tmp_path)
    assert macos_release.check(app, "arm64") == []
    write(app / "Contents/Frameworks/shiboken6/libshiboken6.dylib", fat(thin("x86_64", minos=(15, 0, 0)), thin("arm64", minos=(15, 0, 0))))  # fmt: skip
    assert macos_release.check(app, "arm64") == [
        "Contents/Frameworks/shiboken6/libshiboken6.dylib asks for macOS 15.0"
    ]
    write(app / "Contents/Frameworks/psutil/_psutil_osx.abi3.so", thin("x86_64", "bundle"))
    with pytest.raises(macos_release.ReleaseError, match=r"not built for arm64: Contents/"
                       r"Frameworks/psutil/_psutil_osx\.abi3\.so \(x86_64\)"):  # fmt: skip
        macos_release.check(app, "arm64")


def test_make_dmg_runs_every_step_in_order():
    """The script's own order (it runs on macOS only): check, sign, notarise and assess the
    .app, then the .dmg from it: signed, verified, notarised, assessed."""
    text = (ROOT / "installer" / "macos" / "make_dmg.sh").read_text()
    steps = [
        '"${release[@]}" check "$app"',
        '"${release[@]}" sign "$app"',
        '"${release[@]}" notarize "$app"',
        '"${release[@]}" assess "$app"',
        "hdiutil create",
        'codesign --force --timestamp --sign "$identity" "$dmg"',
        'codesign --verify --strict --verbose=2 "$dmg"',
        '"${release[@]}" notarize "$dmg"',
        '"${release[@]}" assess "$dmg"',
        'hdiutil verify "$dmg"',
    ]
    where = [text.index(step) for step in steps]
    assert where == sorted(where)
    commands = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    assert not any("--deep" in ln for ln in commands)  # the .app's check is macos_release's
    spec = (ROOT / "packaging" / "cantor.spec").read_text()
    assert "entitlements_file=ENTITLEMENTS" in spec and "target_arch=MAC_ARCH" in spec


def test_the_dmg_is_named_for_the_architecture_of_the_python_that_built_it(tmp_path):
    """An x86-64 Python under Rosetta builds an x86_64 app on an arm64 Mac: the .dmg's
    name and its check take the building Python's architecture, not the shell's."""
    import subprocess

    text = (ROOT / "installer" / "macos" / "make_dmg.sh").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("arch=")]
    assert lines == ['arch="$("$py" -c \'import platform; print(platform.machine())\')"']
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho x86_64\n")  # what an x86-64 Python says under Rosetta
    fake.chmod(0o755)
    py = str(fake)
    got = subprocess.run(
        ["bash", "-c", f"py={py}; {lines[0]}; echo $arch"], capture_output=True, text=True
    ).stdout.strip()
    assert got == "x86_64"
