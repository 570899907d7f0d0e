#!/usr/bin/env python3
"""Build ace-server for one target from the pinned acestep.cpp source and pack it.

    packaging/engines/build.py TARGET [--source ARCHIVE] [--out DIR] [--work DIR]
                               [--jobs N] [--nice N] [--keep]
    packaging/engines/build.py --list

The source archive is the one ``source.json`` pins (default: ``../shared/engines/`` beside
the clone); one whose sha256 differs is refused. It is unpacked into a work folder (default:
a new ``engines-*`` folder in the temp dir), the patches the target names are applied to that
copy, and CMake builds the ``ace-server`` target. The executable and its libraries are
stripped and packed with ``BUILD.json`` (what was built, from what, how) into
``OUT/ace-server-<commit>-<target>.tar.gz`` (``.zip`` for Windows) with fixed mtimes and
owners, so the same files give the same bytes. docs/engines.md says which target is what.

Python 3.11 standard library only; every command is run with an argument list.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOURCE_JSON = HERE / "source.json"
PATCHES = HERE / "patches"
DEFAULT_OUT = HERE / "out"

OFF_GPU = ("-DGGML_CUDA=OFF", "-DGGML_VULKAN=OFF", "-DGGML_METAL=OFF", "-DGGML_BLAS=OFF")
"""Every GPU backend and BLAS off; a target turns on the one it is for."""
X64_AVX2 = ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON")
"""One CPU code path for x86-64 with AVX2/FMA/F16C (Haswell, 2013, and later)."""
CPU_VARIANTS = ("x64", "sse42", "haswell", "alderlake", "skylakex", "zen4")
"""The CPU backends the linux-x64-cpu build carries; ggml loads the best one the CPU has at
run time: any x86-64, SSE4.2 (x86-64-v2), AVX2 (v3), AVX2 + AVX-VNNI (Intel 12th-14th gen),
AVX-512 (v4), AVX-512 with VBMI/VNNI/BF16 (Zen 4/5, Sapphire Rapids). 6 of ggml's 14;
docs/engines.md says what the full set costs."""
CUDA_ARCHITECTURES = "75-real;80-real;86-real;89-real;120-real;75-virtual"
"""Turing, Ampere (A100, RTX 30), Ada (RTX 40), Blackwell (RTX 50) as machine code, plus
Turing PTX that newer GPUs (Hopper) compile at load time."""


@dataclass(frozen=True)
class Target:
    name: str
    os: str  # linux | windows | macos (the manifest's names)
    arch: str  # x86_64 | arm64
    backend: str  # cpu | vulkan | metal | cuda12
    host: str  # the sys.platform prefix of the machine that builds it
    cmake_args: tuple[str, ...]
    patches: tuple[str, ...] = ("version-from-env.patch",)
    toolchain: str | None = None  # a file in packaging/engines/
    c_flags: tuple[str, ...] = ()  # CMAKE_C_FLAGS (C only: C++ gets none of them)
    msvc: bool = False  # built with MSVC (no GCC/Clang flags)
    runtime_libs: tuple[str, ...] = ()  # globs under $CUDA_PATH copied beside the binary
    notes: str = ""

    @property
    def archive(self) -> str:
        return "zip" if self.os == "windows" else "tar.gz"

    @property
    def executable(self) -> str:
        return "ace-server.exe" if self.os == "windows" else "ace-server"

    @property
    def rpath_args(self) -> tuple[str, ...]:
        """Libraries are found beside the binary, wherever the archive is unpacked."""
        if self.os == "linux":
            origin = "$ORIGIN"
        elif self.os == "macos":
            origin = "@executable_path"
        else:
            return ()
        return (
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
            f"-DCMAKE_INSTALL_RPATH={origin}",
        )


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "linux-x64-cpu",
            "linux",
            "x86_64",
            "cpu",
            "linux",
            (
                "-DCMAKE_BUILD_TYPE=Release",
                *OFF_GPU,
                "-DGGML_NATIVE=OFF",
                "-DBUILD_SHARED_LIBS=ON",
                "-DGGML_BACKEND_DL=ON",
                "-DGGML_CPU_ALL_VARIANTS=ON",
                "-DGGML_CPU_VARIANTS=" + ";".join(CPU_VARIANTS),
            ),
            patches=("version-from-env.patch", "cpu-variants-subset.patch"),
            notes="CPU only; ggml loads the best of several CPU backends at run time",
        ),
        Target(
            "linux-x64-vulkan",
            "linux",
            "x86_64",
            "vulkan",
            "linux",
            (
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_CUDA=OFF",
                "-DGGML_VULKAN=ON",
                "-DGGML_METAL=OFF",
                "-DGGML_BLAS=OFF",
                *X64_AVX2,
            ),
            patches=("version-from-env.patch", "vulkan-headers-before-261.patch"),
            notes="Vulkan; links the Vulkan loader (libvulkan.so.1)",
        ),
        Target(
            "windows-x64-cpu",
            "windows",
            "x86_64",
            "cpu",
            "linux",
            (
                "-DCMAKE_BUILD_TYPE=Release",
                *OFF_GPU,
                *X64_AVX2,
                "-DBUILD_SHARED_LIBS=OFF",
                "-DGGML_OPENMP=OFF",
                "-DCMAKE_EXE_LINKER_FLAGS=-static -Wl,--no-insert-timestamp",
                "-DCMAKE_CXX_STANDARD_LIBRARIES=-lssp -lws2_32",
            ),
            toolchain="mingw-w64-x86_64.cmake",
            c_flags=("-D_WIN32_WINNT=0x0601",),
            notes="cross-compiled with mingw-w64 (posix threads), one static .exe",
        ),
        Target(
            "macos-arm64-metal",
            "macos",
            "arm64",
            "metal",
            "darwin",
            ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_METAL_EMBED_LIBRARY=ON"),
            notes="Metal (Apple Silicon); the Metal shaders are inside the library",
        ),
        Target(
            "linux-x64-cuda12",
            "linux",
            "x86_64",
            "cuda12",
            "linux",
            (
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_CUDA=ON",
                "-DGGML_VULKAN=OFF",
                "-DGGML_METAL=OFF",
                "-DGGML_BLAS=OFF",
                *X64_AVX2,
                f"-DCMAKE_CUDA_ARCHITECTURES={CUDA_ARCHITECTURES}",
            ),
            runtime_libs=(
                "lib64/libcudart.so.12",
                "lib64/libcublas.so.12",
                "lib64/libcublasLt.so.12",
            ),
            notes="CUDA 12 (NVIDIA driver >= 525.60); cudart and cuBLAS beside the binary",
        ),
        Target(
            "windows-x64-cuda12",
            "windows",
            "x86_64",
            "cuda12",
            "win32",
            (
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_CUDA=ON",
                "-DGGML_VULKAN=OFF",
                "-DGGML_METAL=OFF",
                "-DGGML_BLAS=OFF",
                *X64_AVX2,
                f"-DCMAKE_CUDA_ARCHITECTURES={CUDA_ARCHITECTURES}",
            ),
            runtime_libs=("bin/cudart64_12.dll", "bin/cublas64_12.dll", "bin/cublasLt64_12.dll"),
            msvc=True,
            notes="CUDA 12 built with MSVC; cudart and cuBLAS DLLs beside the .exe",
        ),
    )
}


HOST_OS = {"linux": "linux", "darwin": "macos", "win32": "windows"}.get(sys.platform, "")
"""This machine's OS in the manifest's words (a build for it can be run here)."""


class BuildError(Exception):
    """A build step failed; the message says which and why."""


# -- the pinned source ------------------------------------------------------------------------


def load_source(path: Path = SOURCE_JSON) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_source(archive: Path, source: dict) -> None:
    """BuildError unless ``archive`` is the pinned source archive (by sha256)."""
    if not archive.is_file():
        raise BuildError(
            f"source archive {archive} not found (download {source['url']} or use the copy "
            f"in ../shared/engines/)"
        )
    got = sha256_file(archive)
    if got != source["sha256"]:
        raise BuildError(
            f"source archive {archive} refused: sha256 {got}, source.json pins {source['sha256']}"
        )


def default_source(source: dict) -> Path:
    return ROOT.parent / "shared" / "engines" / source["archive"]


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack the source archive into ``dest``; returns its top folder (``src``)."""
    with tarfile.open(archive, "r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # a Python without PEP 706; the archive's sha256 was checked already
            tar.extractall(dest)
    top = dest / "src"
    if not (top / "CMakeLists.txt").is_file():
        raise BuildError(f"{archive}: no src/CMakeLists.txt inside")
    return top


# -- patches ----------------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(patch: Path, tree: Path) -> list[str]:
    """Apply a unified diff (paths ``a/…``/``b/…`` relative to ``tree``) exactly: every
    context and removed line must match at the stated place, else BuildError. Returns the
    files changed. Text before the first ``---`` line is the patch's description."""
    lines = patch.read_text(encoding="utf-8").splitlines(keepends=True)
    changed: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if not lines[i + 1].startswith("+++ "):
            raise BuildError(f"{patch.name}: '---' without '+++' at line {i + 1}")
        rel = lines[i + 1][4:].split("\t")[0].strip()
        rel = rel[2:] if rel.startswith("b/") else rel
        target = tree / rel
        if ".." in Path(rel).parts or not target.is_file():
            raise BuildError(f"{patch.name}: {rel} is not a file of the source")
        text = target.read_text(encoding="utf-8").splitlines(keepends=True)
        i += 2
        offset = 0
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise BuildError(f"{patch.name}: bad hunk header at line {i + 1}")
            start = int(m.group(1)) - 1 + (0 if m.group(2) != "0" else 1)
            i += 1
            old: list[str] = []
            new: list[str] = []
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                tag, body = lines[i][:1], lines[i][1:]
                if tag in (" ", "-"):
                    old.append(body)
                if tag in (" ", "+"):
                    new.append(body)
                i += 1
            at = start + offset
            if text[at : at + len(old)] != old:
                raise BuildError(
                    f"{patch.name}: {rel} does not match the hunk at line {start + 1}; "
                    f"is this the pinned source?"
                )
            text[at : at + len(old)] = new
            offset += len(new) - len(old)
        target.write_text("".join(text), encoding="utf-8")
        changed.append(rel)
    if not changed:
        raise BuildError(f"{patch.name}: no file in it")
    return changed


# -- building ---------------------------------------------------------------------------------


def flag_args(target: Target, work: str, toolchain_dir: str) -> list[str]:
    """The target's CMake flags, plus the RPATH, the toolchain file and (GCC/Clang) a
    -ffile-prefix-map that keeps the work folder's path out of the binaries."""
    args = [*target.cmake_args, *target.rpath_args]
    if not target.msvc:
        prefix_map = f"-ffile-prefix-map={work}=."
        args.append("-DCMAKE_C_FLAGS=" + " ".join([*target.c_flags, prefix_map]))
        args.append(f"-DCMAKE_CXX_FLAGS={prefix_map}")
    elif target.c_flags:
        args.append("-DCMAKE_C_FLAGS=" + " ".join(target.c_flags))
    if target.toolchain:
        args.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain_dir}/{target.toolchain}")
    return args


def cmake_args(target: Target, work: Path, src: Path, build: Path) -> list[str]:
    """The configure command."""
    flags = flag_args(target, str(work.resolve()), HERE.as_posix())
    return ["cmake", "-S", str(src), "-B", str(build), *flags]


def recorded_cmake_args(target: Target) -> list[str]:
    """The configure flags as BUILD.json records them (no machine-specific paths)."""
    return flag_args(target, "<work>", "packaging/engines")


def build_env(source: dict, work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ACESTEP_VERSION_HASH"] = source["acestep_commit"][:7]
    env["ACESTEP_VERSION_DATE"] = source["acestep_commit_date"]
    env.setdefault("SOURCE_DATE_EPOCH", str(source["source_date_epoch"]))
    # git must not read a repository around the work folder (ggml asks git for its commit)
    env["GIT_CEILING_DIRECTORIES"] = str(work.resolve())
    return env


def run(args: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> None:
    print("+ " + " ".join(args), flush=True)
    if log is None:
        result = subprocess.run(args, env=env)
    else:
        with open(log, "ab") as fh:
            result = subprocess.run(args, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        where = f" (log: {log})" if log else ""
        raise BuildError(f"{args[0]} {args[1]} failed with code {result.returncode}{where}")


def cache_value(build: Path, key: str) -> str:
    """A value from CMakeCache.txt ("" when absent)."""
    for line in (build / "CMakeCache.txt").read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        if name.split(":")[0] == key:
            return value
    return ""


def compiler_info(build: Path) -> dict[str, str]:
    info = {}
    for lang in ("CXX", "CUDA"):
        for f in sorted(build.glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")):
            text = f.read_text(encoding="utf-8")
            found = dict(re.findall(rf'set\(CMAKE_{lang}_COMPILER_(ID|VERSION) "([^"]*)"\)', text))
            if found.get("ID"):
                info[lang.lower()] = f"{found['ID']} {found.get('VERSION', '')}".strip()
    info["cxx_path"] = Path(cache_value(build, "CMAKE_CXX_COMPILER")).name
    return info


def cmake_version() -> str:
    out = subprocess.run(["cmake", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[2]


# -- what goes into the archive ---------------------------------------------------------------


def elf_dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED, SONAME and RUNPATH/RPATH of an ELF file (``readelf -d``)."""
    out = subprocess.run(
        ["readelf", "-d", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, list[str]] = {}
    for tag, value in re.findall(r"\((NEEDED|SONAME|RUNPATH|RPATH)\)\s+\S.*?\[(.*)\]", out):
        found.setdefault(tag, []).append(value)
    return found


def library_name(path: Path, target: Target) -> str:
    """The name the loader asks for: the SONAME on Linux, the install name on macOS."""
    if target.os == "linux":
        return (elf_dynamic(path).get("SONAME") or [path.name])[0]
    if target.os == "macos":
        out = subprocess.run(["otool", "-D", str(path)], capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        return Path(lines[-1]).name if len(lines) > 1 else path.name
    return path.name


def collect(target: Target, build: Path) -> dict[str, Path]:
    """Archive name → built file: the executable and every ggml library beside it, plus the
    target's runtime libraries (CUDA). Symlinks are followed; a library is stored under the
    name the loader asks for."""
    exe = next(
        (
            p
            for p in (build / target.executable, build / "Release" / target.executable)
            if p.is_file()
        ),
        None,
    )
    if exe is None:
        raise BuildError(f"{target.executable} not found in {build}")
    files = {target.executable: exe}
    patterns = {"linux": "libggml*.so*", "macos": "libggml*.dylib", "windows": "*.dll"}
    for lib in sorted(exe.parent.glob(patterns[target.os])):
        if lib.is_symlink() or not lib.is_file():
            continue
        files.setdefault(library_name(lib, target), lib)
    if target.runtime_libs:
        cuda = os.environ.get("CUDA_PATH") or cache_value(build, "CUDAToolkit_LIBRARY_ROOT")
        if not cuda:
            raise BuildError("CUDA_PATH is not set: cannot find the CUDA runtime libraries")
        for rel in target.runtime_libs:
            lib = Path(cuda) / rel
            if not lib.exists():
                raise BuildError(f"{lib} not found (CUDA_PATH={cuda})")
            files[lib.name] = lib.resolve()
    return files


def stage(
    target: Target, files: dict[str, Path], build: Path, stage_dir: Path, env: dict[str, str]
) -> None:
    """Copy the files into ``stage_dir`` and strip what this build made (``env`` gives strip
    SOURCE_DATE_EPOCH: it writes that as a Windows binary's link time)."""
    stage_dir.mkdir(parents=True)
    strip = cache_value(build, "CMAKE_STRIP")
    for name, path in files.items():
        dest = stage_dir / name
        shutil.copyfile(path, dest)
        dest.chmod(0o755)
        if strip and name not in _runtime_names(target):
            flags = ["-x"] if target.os == "macos" else ["--strip-unneeded"]
            run([strip, *flags, str(dest)], env)
        if target.os == "macos":  # Apple Silicon runs only signed code: sign again, ad hoc
            run(["codesign", "--force", "--sign", "-", str(dest)], env)


def _runtime_names(target: Target) -> set[str]:
    return {Path(rel).name for rel in target.runtime_libs}


def check_stage(target: Target, stage_dir: Path, source: dict) -> list[str]:
    """Checks on the staged files; returns what was seen (for the log). BuildError when the
    banner or, on Linux, the RUNPATH is wrong."""
    seen = []
    exe = stage_dir / target.executable
    banner = f"{source['acestep_commit'][:7]} ({source['acestep_commit_date']})".encode()
    if banner not in exe.read_bytes():
        raise BuildError(f"{exe.name}: the banner {banner.decode()!r} is not in the binary")
    seen.append(f"banner: acestep.cpp {banner.decode()}")
    for arg in target.cmake_args:
        if arg.startswith("-DGGML_CPU_VARIANTS="):
            missing = [
                v
                for v in arg.split("=", 1)[1].split(";")
                if not (stage_dir / f"libggml-cpu-{v}.so").is_file()
            ]
            if missing:
                raise BuildError(f"CPU variants not built: {', '.join(missing)}")
            seen.append(f"CPU variants: {arg.split('=', 1)[1]}")
    if target.os == "linux":
        for f in sorted(stage_dir.iterdir()):
            if f.name in _runtime_names(target):
                continue
            dyn = elf_dynamic(f)
            if dyn.get("RUNPATH") != ["$ORIGIN"] or dyn.get("RPATH"):
                raise BuildError(
                    f"{f.name}: RUNPATH {dyn.get('RUNPATH')}, RPATH "
                    f"{dyn.get('RPATH')}; expected RUNPATH $ORIGIN only"
                )
            seen.append(f"{f.name}: RUNPATH $ORIGIN, NEEDED {' '.join(dyn.get('NEEDED', []))}")
    if target.os == HOST_OS and target.backend != "cuda12":
        # (a CUDA build needs the NVIDIA driver's library to start; build machines have none)
        out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
        first = (out.stderr.strip().splitlines() or [""])[0]
        if out.returncode != 0 or first != f"acestep.cpp {banner.decode()}":
            raise BuildError(f"{exe.name} --help: exit {out.returncode}, first line {first!r}")
        seen.append(f"--help: {first}")
    return seen


# -- reproducible archives --------------------------------------------------------------------


def _mode(path: Path) -> int:
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def pack_tar_gz(files: dict[str, Path], out: Path, mtime: int) -> None:
    """A tar.gz whose bytes depend only on the files' names, contents and exec bits: sorted
    entries, every mtime ``mtime``, owner and group 0 without names, no gzip name or time."""
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for name in sorted(files):
                    path = files[name]
                    info = tarfile.TarInfo(name)
                    info.size = path.stat().st_size
                    info.mtime = mtime
                    info.mode = _mode(path)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    with open(path, "rb") as fh:
                        tar.addfile(info, fh)
    tmp.replace(out)


def pack_zip(files: dict[str, Path], out: Path, mtime: int) -> None:
    """A zip with the same guarantees as :func:`pack_tar_gz` (DOS time of ``mtime``, 1980 at
    the earliest; Unix modes in the external attributes)."""
    stamp = time.gmtime(max(mtime, 315532800))[:6]
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            path = files[name]
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = (0o100000 | _mode(path)) << 16
            big = path.stat().st_size >= zipfile.ZIP64_LIMIT
            with open(path, "rb") as src, zf.open(info, "w", force_zip64=big) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    tmp.replace(out)


def archive_name(target: Target, source: dict) -> str:
    return f"ace-server-{source['acestep_commit'][:7]}-{target.name}.{target.archive}"


def build_record(target: Target, source: dict, build: Path, files: dict[str, Path]) -> dict:
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or source["source_date_epoch"])
    return {
        "target": target.name,
        "os": target.os,
        "arch": target.arch,
        "backend": target.backend,
        "engine_version": source["engine_version"],
        "acestep_commit": source["acestep_commit"],
        "acestep_commit_date": source["acestep_commit_date"],
        "ggml_version": source["ggml_version"],
        "ggml_commit": source["ggml_commit"],
        "source_archive": source["archive"],
        "source_sha256": source["sha256"],
        "patches": {p: sha256_file(PATCHES / p) for p in target.patches},
        "cmake_args": recorded_cmake_args(target),
        "cmake_version": cmake_version(),
        "compiler": compiler_info(build),
        "build_date": dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "executable": target.executable,
        "files": {name: sha256_file(path) for name, path in sorted(files.items())},
    }


def pack(target: Target, stage_dir: Path, record: dict, out_dir: Path, mtime: int) -> Path:
    """Write BUILD.json beside the staged files and pack them all into ``out_dir``."""
    (stage_dir / "BUILD.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (stage_dir / "BUILD.json").chmod(0o644)
    files = {p.name: p for p in stage_dir.iterdir()}
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / archive_name(target, load_source())
    (pack_zip if target.archive == "zip" else pack_tar_gz)(files, out, mtime)
    return out


# -- the command ------------------------------------------------------------------------------


def build_target(target: Target, archive: Path, out_dir: Path, work: Path, jobs: int) -> Path:
    source = load_source()
    check_source(archive, source)
    if not sys.platform.startswith(target.host):
        raise BuildError(f"{target.name} is built on {target.host}, not on {sys.platform}")
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    started = time.monotonic()
    print(f"== {target.name}: unpacking {archive.name} into {work}", flush=True)
    src = unpack(archive, work / "source")
    for name in target.patches:
        changed = apply_patch(PATCHES / name, src)
        print(f"== patch {name}: {', '.join(changed)}", flush=True)
    build = work / "build"
    env = build_env(source, work)
    run(cmake_args(target, work, src, build), env, log)
    run(
        [
            "cmake",
            "--build",
            str(build),
            "--config",
            "Release",
            "--target",
            "ace-server",
            "-j",
            str(jobs),
        ],
        env,
        log,
    )
    built = time.monotonic() - started
    files = collect(target, build)
    stage_dir = work / "stage"
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage(target, files, build, stage_dir, env)
    for line in check_stage(target, stage_dir, source):
        print(f"== {line}", flush=True)
    staged = {p.name: p for p in stage_dir.iterdir()}
    record = build_record(target, source, build, staged)
    out = pack(target, stage_dir, record, out_dir, int(env["SOURCE_DATE_EPOCH"]))
    print(
        f"== {out.name}: {out.stat().st_size} bytes, sha256 {sha256_file(out)}; "
        f"configure+build {built / 60:.1f} min",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", nargs="?", help="one of --list")
    ap.add_argument("--list", action="store_true", help="print the targets and exit")
    ap.add_argument("--source", type=Path, help="the pinned source archive")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the archive goes")
    ap.add_argument("--work", type=Path, help="build folder (default: a new temp folder)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nice", type=int, default=0, help="lower this build's CPU priority")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    if args.list:
        for t in TARGETS.values():
            print(f"{t.name:20} built on {t.host:7} {t.archive:7} {t.notes}")
        return 0
    if args.target not in TARGETS:
        ap.error(f"unknown target {args.target!r}; one of {', '.join(TARGETS)}")
    target = TARGETS[args.target]
    if args.nice and hasattr(os, "nice"):
        os.nice(args.nice)
    source = load_source()
    archive = args.source or default_source(source)
    work = args.work or Path(tempfile.mkdtemp(prefix=f"engines-{target.name}-"))
    try:
        build_target(target, archive, args.out, work, args.jobs)
    except BuildError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
