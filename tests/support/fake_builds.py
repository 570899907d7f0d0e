"""Engine builds, a manifest server and simulated machines for the backends tests.

Builds are real tar.gz/zip archives holding an executable ``ace-server`` shell script:

- ``working``: execs the built-in sketch engine (``selfexec.self_argv("sketch-server")``) with
  "$@": ace-server's command line and log lines; only the CPU device exists there.
- ``gpu(devices)``: execs a tiny ace-server-like test engine (``GPU_ENGINE`` below) that owns
  the given devices (e.g. "CPU,Vulkan0"), so a simulated GPU machine has a GPU build that
  works. It prints the same device and FATAL lines as ace-server. With ``software`` (a
  device's name) its Vulkan0 is a CPU-type device, as Mesa's llvmpipe is to the real
  engine: hidden ("ggml_vulkan: No devices found.") unless GGML_VK_VISIBLE_DEVICES names
  it, then listed with ggml's warning that its type is CPU (the lines the real engine
  printed on lavapipe: ../shared/engines/README.md).
- ``cuda_broken(line)``: prints a CUDA error line and exits 1 at once.
- ``never_ready``: sleeps; never answers /health.
- ``fallback``: the sketch engine forced to the CPU whatever it is asked (a silent fall-back).

Unsafe archives (absolute path, ``..``, symlink out, hard link out, zip bomb, a link chain
out, setuid modes, too many entries, a huge zip link) are made by :func:`unsafe_archive`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shlex
import stat
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from cantor_desktop.system import selfexec

from .http_files import FileServer
from .signed_manifests import serve_signed

GPU_ENGINE = r"""
import json, os, secrets, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEVICES = sys.argv[1].split(",")
SOFTWARE = os.environ.get("FAKE_SOFTWARE_VULKAN", "")
args = sys.argv[2:]
opts = {}
i = 0
while i < len(args):
    if args[i] in ("--models", "--host", "--port", "--adapters"):
        opts[args[i]] = args[i + 1]; i += 2
    elif args[i] == "--keep-loaded":
        i += 1
    else:
        print(f"Unknown option: {args[i]}", file=sys.stderr, flush=True); sys.exit(1)
def log(line): print(line, file=sys.stderr, flush=True)
if SOFTWARE and os.environ.get("GGML_VK_VISIBLE_DEVICES") is None:
    log("ggml_vulkan: No devices found.")
    DEVICES = [d for d in DEVICES if not d.startswith("Vulkan")]
elif SOFTWARE:
    log(f"ggml_vulkan: 0 = {SOFTWARE} | uma: 1 | fp16: 1 | bf16: 0 | warp size: 8 | "
        "shared memory: 32768 | int dot: 0 | matrix cores: none")
    log("ggml_vulkan: Warning: Device type is CPU. This is probably not the device you want.")
log(f"[Server] Scanning models in {opts.get('--models')}")
log(f"[Server] Listening on {opts.get('--host', '127.0.0.1')}:{opts.get('--port', '8080')}")

class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body); self.wfile.flush()
    def do_GET(self):
        self._json(200, {"status": "ok"}) if self.path == "/health" else self._json(404, {"error": "Not found"})
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0); self.rfile.read(n)
        job = secrets.token_hex(8)
        self._json(200, {"id": job})
        log(f"[Server] Job {job} created (LM, mode=0)")
        want = os.environ.get("GGML_BACKEND") or DEVICES[-1]
        if want not in DEVICES:
            log(f"[Load] FATAL: GGML_BACKEND={want} not found. Available: {', '.join(DEVICES)}")
            os._exit(1)
        log(f"[Load] LM backend: {want} (test engine)")
        log("[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found")
        os._exit(1)

ThreadingHTTPServer(("127.0.0.1", int(opts.get("--port", "8080"))), H).serve_forever()
"""


def _sh(lines: list[str]) -> bytes:
    return ("#!/bin/sh\n" + "\n".join(lines) + "\n").encode()


def working_script() -> bytes:
    argv = " ".join(shlex.quote(a) for a in selfexec.self_argv("sketch-server"))
    return _sh([f'exec {argv} "$@"'])


def fallback_script() -> bytes:
    argv = " ".join(shlex.quote(a) for a in selfexec.self_argv("sketch-server"))
    return _sh(["GGML_BACKEND=CPU", "export GGML_BACKEND", f'exec {argv} "$@"'])


def gpu_script(engine_path: Path, devices: str, software: str = "") -> bytes:
    lines = [f"FAKE_SOFTWARE_VULKAN={shlex.quote(software)}", "export FAKE_SOFTWARE_VULKAN"]
    return _sh(
        (lines if software else [])
        + [
            f"exec {shlex.quote(sys.executable)} {shlex.quote(str(engine_path))} "
            f'{shlex.quote(devices)} "$@"'
        ]
    )


def cuda_broken_script(
    line: str = "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU",
) -> bytes:
    return _sh([f"echo {shlex.quote(line)} >&2", "echo 'second line' >&2", "exit 1"])


def never_ready_script() -> bytes:
    return _sh(["echo '[Server] Scanning models' >&2", "exec sleep 600"])


def make_archive(
    path: Path,
    files: dict[str, bytes],
    kind: str = "tar.gz",
    exec_names: tuple[str, ...] = ("ace-server",),
) -> Path:
    """A tar.gz or zip with the given files (``exec_names`` mode 0755, others 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "tar.gz":
        with tarfile.open(path, "w:gz") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o755 if name in exec_names else 0o644
                tf.addfile(info, io.BytesIO(data))
    else:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                info = zipfile.ZipInfo(name)
                mode = 0o755 if name in exec_names else 0o644
                info.external_attr = (stat.S_IFREG | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
    return path


MANY_ENTRIES = 20_000
HUGE_LINK = 48 * 2**20  # under the ratio check's free allowance: only the link cap stops it


def unsafe_archive(path: Path, how: str, kind: str = "tar.gz") -> Path:
    """An archive that tries to write outside its folder (or a bomb). ``how`` ∈ absolute,
    dotdot, symlink_out, symlink_abs, hardlink_out, bomb, symlink_then_write (tar only),
    link_chain (``a -> .`` then ``a/a/esc -> ../../etc``), link_chain_write (the same, then a
    file written through ``esc``), setuid (mode 0o6777 files: unpacked, masked to 0o755),
    many (20 000 empty files), huge_link (zip only: a 48 MiB "symlink" entry), long_name (a
    60 000-character name; tar: a GNU long-name record), huge_long_name and huge_pax (tar
    only: a 300 MB GNU long name, a 300 MB pax header, which tarfile reads whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "tar.gz" and how in ("huge_long_name", "huge_pax"):
        return _huge_metadata_tar(
            path, tarfile.GNUTYPE_LONGNAME if how == "huge_long_name" else tarfile.XHDTYPE
        )
    payload = b"escaped\n"
    if kind == "zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("ace-server", working_script())

            def link(name: str, target: bytes | str) -> None:
                info = zipfile.ZipInfo(name)
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, target)

            if how == "absolute":
                info = zipfile.ZipInfo("placeholder")
                info.filename = "/tmp/cantor-escape-abs"
                zf.writestr(info, payload)
            elif how == "dotdot":
                zf.writestr("../escaped.txt", payload)
            elif how in ("symlink_out", "symlink_abs"):
                info = zipfile.ZipInfo("link")
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, "../.." if how == "symlink_out" else "/etc")
            elif how == "bomb":
                zf.writestr("zeros.bin", b"\0" * (80 * 2**20))
            elif how in ("link_chain", "link_chain_write"):
                link("a", ".")
                link("a/a/esc", "../../etc")
                if how == "link_chain_write":
                    zf.writestr("a/a/esc/escaped.txt", payload)
            elif how == "setuid":
                for name in ("suid", "lib/sgid"):
                    info = zipfile.ZipInfo(name)
                    info.create_system = 3
                    info.external_attr = (stat.S_IFREG | 0o6777) << 16
                    zf.writestr(info, payload)
            elif how == "many":
                for i in range(MANY_ENTRIES):
                    zf.writestr(f"f/{i}", b"")
            elif how == "huge_link":
                link("lib", b"a" * HUGE_LINK)
            elif how == "long_name":
                zf.writestr("n" * LONG_NAME, payload)
            else:
                raise ValueError(how)
        return path
    with tarfile.open(path, "w:gz") as tf:

        def add(
            name: str,
            data: bytes = b"",
            type_=tarfile.REGTYPE,
            linkname: str = "",
            size: int | None = None,
            fileobj=None,
        ):
            info = tarfile.TarInfo(name)
            info.type = type_
            info.linkname = linkname
            info.mode = 0o755
            info.size = len(data) if size is None else size
            tf.addfile(info, fileobj or (io.BytesIO(data) if type_ == tarfile.REGTYPE else None))

        add("ace-server", working_script())
        if how == "absolute":
            add("/tmp/cantor-escape-abs", payload)
        elif how == "dotdot":
            add("sub/../../escaped.txt", payload)
        elif how == "symlink_out":
            add("lib", type_=tarfile.SYMTYPE, linkname="../..")
        elif how == "symlink_abs":
            add("lib", type_=tarfile.SYMTYPE, linkname="/etc")
        elif how == "symlink_then_write":
            add("lib", type_=tarfile.SYMTYPE, linkname="..")
            add("lib/escaped.txt", payload)
        elif how == "hardlink_out":
            add("passwd", type_=tarfile.LNKTYPE, linkname="../../etc/passwd")
        elif how == "bomb":
            add("zeros.bin", fileobj=_Zeros(80 * 2**20), size=80 * 2**20)
        elif how in ("link_chain", "link_chain_write"):
            add("a", type_=tarfile.SYMTYPE, linkname=".")
            add("a/a/esc", type_=tarfile.SYMTYPE, linkname="../../etc")
            if how == "link_chain_write":
                add("a/a/esc/escaped.txt", payload)
        elif how == "setuid":
            for name in ("suid", "lib/sgid"):
                info = tarfile.TarInfo(name)
                info.mode = 0o6777
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
        elif how == "many":
            for i in range(MANY_ENTRIES):
                info = tarfile.TarInfo(f"f/{i}")
                tf.addfile(info, io.BytesIO(b""))
        elif how == "long_name":
            info = tarfile.TarInfo("n" * LONG_NAME)
            info.size = len(payload)
            tf.format = tarfile.GNU_FORMAT
            tf.addfile(info, io.BytesIO(payload))
        else:
            raise ValueError(how)
    return path


HUGE_METADATA = 300 * 2**20
LONG_NAME = 60_000


def _huge_metadata_tar(path: Path, type_: bytes) -> Path:
    """A tar.gz whose second entry's GNU long name (or pax header) is HUGE_METADATA bytes,
    streamed into gzip (never held whole here either), then a file it names."""
    import gzip

    def header(name: str, size: int, kind: bytes) -> bytes:
        info = tarfile.TarInfo(name)
        info.type, info.size, info.mode = kind, size, 0o644
        return info.tobuf(format=tarfile.GNU_FORMAT)

    script = working_script()
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(header("ace-server", len(script), tarfile.REGTYPE))
        out.write(script + b"\0" * (-len(script) % 512))
        name = "././@LongLink" if type_ == tarfile.GNUTYPE_LONGNAME else "././@PaxHeader"
        out.write(header(name, HUGE_METADATA, type_))
        record = b"a" * 2**20 if type_ == tarfile.GNUTYPE_LONGNAME else b"8 a=bcd\n" * 131072
        for _ in range(HUGE_METADATA // len(record)):
            out.write(record)
        out.write(header("after", 3, tarfile.REGTYPE) + b"abc" + b"\0" * 509 + b"\0" * 1024)
    return path


class _Zeros(io.RawIOBase):
    def __init__(self, n: int):
        self.left = n

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return b"\0" * n


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class BuildServer:
    """A FileServer on 127.0.0.1 publishing test builds and a manifest at /manifest.json,
    signed by the tests' key (/manifest.json.sig)."""

    folder: Path
    server: FileServer = field(default_factory=FileServer)
    entries: list[dict] = field(default_factory=list)

    def __post_init__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self.engine_path = self.folder / "gpu_engine.py"
        self.engine_path.write_text(GPU_ENGINE)

    def __enter__(self) -> "BuildServer":
        self.server.start()
        self.publish()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    @property
    def manifest_url(self) -> str:
        return self.server.url("/manifest.json")

    def archive(
        self, name: str, script: bytes, kind: str = "tar.gz", extra: dict[str, bytes] | None = None
    ) -> Path:
        files = {"ace-server": script, "libggml-test.so": b"\x7fELF not really\n", **(extra or {})}
        return make_archive(self.folder / name, files, kind)

    def add(
        self,
        backend: str,
        archive: Path,
        *,
        version: str = "v0.1.1",
        sha256: str | None = "auto",
        env: dict | None = None,
        os_name: str = "linux",
        arch: str = "x86_64",
        size: int | None | str = "auto",
        executable: str = "ace-server",
        family: str = "acestep",
    ) -> dict:
        """Serve ``archive`` and list it in the manifest for ``backend``."""
        url_path = "/builds/" + archive.name
        self.server.add_file(url_path, archive)
        from cantor_desktop.install.manifest import DEVICE_ENV

        entry = {
            "backend": backend,
            "os": os_name,
            "arch": arch,
            "version": version,
            "url": self.server.url(url_path),
            "sha256": sha256_of(archive) if sha256 == "auto" else sha256,
            "size": archive.stat().st_size if size == "auto" else size,
            "archive": "zip" if archive.name.endswith(".zip") else "tar.gz",
            "executable": executable,
            "env": env if env is not None else {"GGML_BACKEND": DEVICE_ENV[backend]},
            "family": family,
        }
        self.entries.append(entry)
        self.publish()
        return entry

    def publish(self) -> None:
        fams: dict[str, dict] = {}
        for e in self.entries:
            body = {k: v for k, v in e.items() if k != "family"}
            fams.setdefault(e["family"], {"builds": []})["builds"].append(body)
        self.manifest_raw = serve_signed(
            self.server, "/manifest.json", {"schema": 1, "published": "test", "families": fams}
        )

    def downloads(self, archive: Path) -> int:
        return sum(
            1 for r in self.server.requests_for("/builds/" + archive.name) if r.method == "GET"
        )


def fake_machine(
    root: Path,
    *,
    nvidia_driver: str | None = "550.54.14",
    render: bool = True,
    vulkan_loader: bool = True,
    avx2: bool = True,
    smi_fails: str | None = None,
) -> tuple[Path, Path]:
    """A simulated Linux x86_64 machine: (file root, bin folder with a fake nvidia-smi).

    Put the bin folder first on PATH and set CANTOR_HW_ROOT to the root."""
    bin_dir = root / "_bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    flags = "fpu sse sse2 avx" + (" avx2" if avx2 else "")
    _write(
        root / "proc/cpuinfo", f"processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: {flags}\n"
    )
    _write(root / "proc/meminfo", "MemTotal:       16318480 kB\nMemFree:  1000 kB\n")
    if nvidia_driver:
        _write(
            root / "proc/driver/nvidia/version",
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {nvidia_driver}  "
            f"Thu Feb 22 01:44:30 UTC 2024\n",
        )
        _write(root / "sys/class/drm/card0/device/vendor", "0x10de\n")
        nv = root / "sys/bus/pci/drivers/nvidia"
        nv.mkdir(parents=True, exist_ok=True)
        os.symlink(nv, root / "sys/class/drm/card0/device/driver")
        smi = bin_dir / "nvidia-smi"
        if smi_fails:
            smi.write_text(f"#!/bin/sh\necho {shlex.quote(smi_fails)}\nexit 9\n")
        else:
            smi.write_text(
                f"#!/bin/sh\necho '0, NVIDIA GeForce RTX 4070, {nvidia_driver}, 12282, 8.9'\n"
            )
        smi.chmod(0o755)
    if render:
        (root / "dev/dri").mkdir(parents=True, exist_ok=True)
        (root / "dev/dri/renderD128").write_text("")
        dev = root / "sys/class/drm/renderD128/device"
        _write(dev / "vendor", "0x10de\n" if nvidia_driver else "0x1002\n")
        drv = root / "sys/bus/pci/drivers" / ("nvidia" if nvidia_driver else "amdgpu")
        drv.mkdir(parents=True, exist_ok=True)
        os.symlink(drv, dev / "driver")
    if vulkan_loader:
        _write(root / "usr/lib/x86_64-linux-gnu/libvulkan.so.1", "")
    return root, bin_dir


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data)
