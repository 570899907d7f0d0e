"""Build Cantor's Windows installer, a per-user MSI, from the PyInstaller folder.

    python installer/windows/build_msi.py [BUNDLE] [OUT] [--version X.Y.Z]

BUNDLE defaults to dist/cantor (with cantor-desktop.exe and cantor.exe), OUT to dist; the
version to the checkout's ``cantor_desktop.__version__`` (the bundle is built from it).
Needs msitools' ``wixl`` and ``wixl-heat`` (Debian: ``apt-get install wixl``); runs on
Linux, where CI builds it, and wherever wixl runs. Writes ``OUT/cantor-<v>-windows-x64.msi``
and prints its path. ``cantor.wxs`` beside this file says what the installer does.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOP = HERE.parents[1]


def msi_version(version: str) -> str:
    """Windows Installer's x.y.z (each field a number; 1.2.3.dev4 → 1.2.3). Major upgrades
    compare the first three fields only."""
    fields = re.findall(r"\d+", version)[:3]
    if not fields:
        raise SystemExit(f"build_msi: {version!r} is not a version")
    return ".".join((fields + ["0", "0"])[:3])


def checkout_version() -> str:
    text = (TOP / "cantor_desktop" / "__init__.py").read_text()
    return re.search(r'__version__\s*=\s*"([^"]+)"', text).group(1)


def build(bundle: Path, out: Path, version: str) -> Path:
    for tool in ("wixl", "wixl-heat"):
        if shutil.which(tool) is None:
            raise SystemExit(f"build_msi: no {tool}; install msitools' wixl (apt-get install wixl)")
    for exe in ("cantor-desktop.exe", "cantor.exe"):
        if not (bundle / exe).is_file():
            raise SystemExit(f"build_msi: {bundle} has no {exe}: build the Windows bundle first")
    version = msi_version(version)
    out.mkdir(parents=True, exist_ok=True)
    msi = out / f"cantor-{version}-windows-x64.msi"
    files = sorted(str(p) for p in bundle.rglob("*") if p.is_file())
    with tempfile.TemporaryDirectory(prefix="cantor-msi-") as tmp:
        # wixl takes sources relative to where it runs: links to the bundle and the icon
        (Path(tmp) / "bundle").symlink_to(bundle)
        (Path(tmp) / "cantor.ico").symlink_to(TOP / "resources" / "icons" / "cantor.ico")
        shutil.copy2(HERE / "cantor.wxs", Path(tmp) / "cantor.wxs")
        harvested = Path(tmp) / "bundle.wxs"
        heat = subprocess.run(
            [
                "wixl-heat",
                "--prefix",
                f"{bundle}/",
                "--var",
                "var.Bundle",
                "--directory-ref",
                "INSTALLDIR",
                "--component-group",
                "Bundle",
                "--win64",
            ],
            input="\n".join(files) + "\n",
            capture_output=True,
            text=True,
            check=True,
        )
        harvested.write_text(heat.stdout)
        subprocess.run(
            [
                "wixl",
                "--arch",
                "x64",
                "-D",
                "Win64=yes",
                "-D",
                f"Version={version}",
                "-D",
                "Bundle=bundle",
                "-D",
                "Icon=cantor.ico",
                "-o",
                str(msi),
                "cantor.wxs",
                "bundle.wxs",
            ],
            check=True,
            cwd=tmp,
        )
    return msi


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="build_msi.py", description=__doc__.split("\n")[0])
    parser.add_argument("bundle", nargs="?", default=str(TOP / "dist" / "cantor"))
    parser.add_argument("out", nargs="?", default=str(TOP / "dist"))
    parser.add_argument("--version", default=None, help="default: cantor_desktop.__version__")
    args = parser.parse_args(argv)
    msi = build(
        Path(args.bundle).resolve(), Path(args.out).resolve(), args.version or checkout_version()
    )
    print(msi)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
