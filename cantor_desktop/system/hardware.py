"""What this machine can run, with evidence a person can check.

:func:`probe` reads commands found on a PATH and files under a root directory, so a test can
simulate an NVIDIA or Vulkan machine with a fake ``nvidia-smi`` on PATH and a fake sysfs tree.
Nothing here loads a GPU library into this process: external commands run as children with a
timeout, and the Vulkan loader is only looked for, never opened.

Each backend gets a :class:`BackendEvidence`: ``supported`` (worth trying), the evidence for it
and, when it is not supported, the plain reason.
"""

from __future__ import annotations

import ctypes.util
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..system import procs

ROOT_ENV = "CANTOR_HW_ROOT"
OS_ENV = "CANTOR_HW_OS"
ARCH_ENV = "CANTOR_HW_ARCH"

CUDA12_MIN_DRIVER = {"linux": (525, 60), "windows": (527, 41)}
"""Oldest NVIDIA driver that runs CUDA 12 builds (NVIDIA's CUDA 12.0 release notes)."""

PCI_VENDORS = {
    "0x10de": "NVIDIA",
    "0x1002": "AMD",
    "0x8086": "Intel",
    "0x106b": "Apple",
    "0x5143": "Qualcomm",
    "0x13b5": "ARM",
    "0x1af4": "virtio",
}
COMMAND_TIMEOUT = 8.0
LIB_DIRS = (
    "usr/lib",
    "usr/lib64",
    "lib",
    "lib64",
    "usr/local/lib",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
)


@dataclass
class Gpu:
    name: str
    vendor: str
    driver: str = ""
    vram_mib: int | None = None
    source: str = ""  # where it was seen: "nvidia-smi", "sysfs", "vulkaninfo"
    compute_cap: str = ""


@dataclass
class BackendEvidence:
    supported: bool
    evidence: list[str] = field(default_factory=list)
    reason: str = ""  # why not, when unsupported (one plain sentence)
    software: str = ""
    """The software device that is all this backend would run on (Mesa's llvmpipe,
    SwiftShader): it computes on the CPU, far slower than the CPU engine, so it is never
    chosen by itself; ``cantor backends --use`` may still pick it."""
    env: dict[str, str] = field(default_factory=dict)
    """What the engine needs in its environment to see the device (ggml hides CPU-type
    Vulkan devices unless they are named)."""


@dataclass
class Hardware:
    os: str  # "linux" | "windows" | "macos" | other platform.system() lowered
    arch: str  # "x86_64" | "arm64" | other
    cpu_name: str = ""
    cpu_features: list[str] = field(default_factory=list)  # "AVX2", "AVX-512", "NEON"
    ram_bytes: int | None = None
    gpus: list[Gpu] = field(default_factory=list)
    backends: dict[str, BackendEvidence] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: "linux x86_64 · 15.6 GiB RAM · AMD Ryzen 7 (AVX2, AVX-512)"."""
        parts = [f"{self.os} {self.arch}"]
        if self.ram_bytes:
            parts.append(f"{self.ram_bytes / 2**30:.1f} GiB RAM")
        cpu = self.cpu_name or "CPU"
        feats = ", ".join(self.cpu_features) if self.cpu_features else "no AVX2/AVX-512/NEON seen"
        parts.append(f"{cpu} ({feats})")
        return " · ".join(parts)

    def to_dict(self) -> dict:
        return {
            "os": self.os,
            "arch": self.arch,
            "cpu_name": self.cpu_name,
            "cpu_features": list(self.cpu_features),
            "ram_bytes": self.ram_bytes,
            "gpus": [asdict(g) for g in self.gpus],
            "backends": {name: asdict(ev) for name, ev in self.backends.items()},
            "notes": list(self.notes),
        }


# -- small readers ----------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _under(root: Path, absolute: str) -> Path:
    return root / absolute.lstrip("/")


def _run(argv: list[str]) -> tuple[int | None, str, str]:
    """Run a probe command; (exit code or None when it could not run, stdout, problem)."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            errors="replace",
            stdin=subprocess.DEVNULL,
            **procs.probe_kwargs(),
        )  # no console window flashing up
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {COMMAND_TIMEOUT:.0f} s"
    except OSError as exc:
        return None, "", str(exc)
    first_err = next(
        (ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()), ""
    )
    return done.returncode, done.stdout, first_err


def normalise_os(name: str) -> str:
    low = name.lower()
    return {"darwin": "macos", "win32": "windows", "cygwin": "windows"}.get(low, low)


def normalise_arch(machine: str) -> str:
    low = machine.lower()
    if low in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if low in ("arm64", "aarch64", "armv8", "armv8l"):
        return "arm64"
    return low


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


# -- CPU and memory ---------------------------------------------------------------------------


def _cpu(root: Path, os_name: str, arch: str) -> tuple[str, list[str], str]:
    """(model name, features, where the features came from)."""
    text = _read(_under(root, "/proc/cpuinfo"))
    if text is not None:
        name = ""
        flags: set[str] = set()
        for line in text.splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("model name", "hardware", "cpu model") and not name:
                name = value.strip()
            elif key in ("flags", "features"):
                flags.update(value.split())
        feats: list[str] = []
        if "avx2" in flags:
            feats.append("AVX2")
        if "avx512f" in flags:
            feats.append("AVX-512")
        if "asimd" in flags or "neon" in flags:
            feats.append("NEON")
        return name, feats, "/proc/cpuinfo"
    if root != Path("/"):
        return "", [], "no /proc/cpuinfo under the probe root"
    name = platform.processor() or ""
    feats = []
    if arch == "arm64" and os_name != "macos":
        feats.append("NEON")  # every arm64 core has Advanced SIMD
    elif os_name == "windows" and sys.platform == "win32":
        try:
            present = ctypes.windll.kernel32.IsProcessorFeaturePresent
            if present(40):  # PF_AVX2_INSTRUCTIONS_AVAILABLE
                feats.append("AVX2")
            if present(41):  # PF_AVX512F_INSTRUCTIONS_AVAILABLE
                feats.append("AVX-512")
        except Exception:
            pass
    if os_name == "macos":
        name, more = macos_cpu(arch)
        feats += [f for f in more if f not in feats]
    return name, feats, "the operating system"


def macos_cpu(arch: str, run=None) -> tuple[str, list[str]]:
    """(name, features) from sysctl. The brand string names the chip on both kinds of Mac
    ("Apple M2 Pro", "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"); an Intel Mac also lists
    AVX2/AVX-512 in ``machdep.cpu.leaf7_features`` (a name Apple Silicon does not have, so
    it is asked for separately). Under Rosetta the brand reads "VirtualApple …"."""
    run = run or _run
    name = ""
    code, out, _ = run(["sysctl", "-n", "machdep.cpu.brand_string"])
    if code == 0 and out.strip():
        name = out.strip().splitlines()[0].strip()
        if name.startswith("VirtualApple"):  # Rosetta hides the chip's name
            name = "Apple Silicon"
    feats: list[str] = []
    if arch == "arm64":
        feats.append("NEON")
    else:
        code, out, _ = run(["sysctl", "-n", "machdep.cpu.leaf7_features"])
        words = out.upper().split() if code == 0 else []
        if "AVX2" in words:
            feats.append("AVX2")
        if "AVX512F" in words:
            feats.append("AVX-512")
    return name or platform.processor() or "", feats


def total_ram() -> int | None:
    """Installed memory of this machine in bytes, or None when it cannot be read."""
    return _ram(Path("/"))


def _ram(root: Path) -> int | None:
    text = _read(_under(root, "/proc/meminfo"))
    if text is not None:
        found = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
        return int(found.group(1)) * 1024 if found else None
    if root != Path("/"):
        return None
    if sys.platform != "win32":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    else:

        class MemStatus(ctypes.Structure):
            _fields_ = [
                ("dwLength", ctypes.c_ulong),
                ("dwMemoryLoad", ctypes.c_ulong),
                ("ullTotalPhys", ctypes.c_ulonglong),
                ("ullAvailPhys", ctypes.c_ulonglong),
                ("ullTotalPageFile", ctypes.c_ulonglong),
                ("ullAvailPageFile", ctypes.c_ulonglong),
                ("ullTotalVirtual", ctypes.c_ulonglong),
                ("ullAvailVirtual", ctypes.c_ulonglong),
                ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
            ]

        status = MemStatus()
        status.dwLength = ctypes.sizeof(MemStatus)
        if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return int(status.ullTotalPhys)
    return None


# -- PCI devices in sysfs ---------------------------------------------------------------------


def _drm_devices(root: Path, pattern: str) -> list[tuple[str, str, str]]:
    """[(node name, vendor id like "0x10de", driver name)] for /sys/class/drm/<pattern>."""
    base = _under(root, "/sys/class/drm")
    out: list[tuple[str, str, str]] = []
    try:
        entries = sorted(base.glob(pattern))
    except OSError:
        return out
    for entry in entries:
        if not re.fullmatch(r"(card|renderD)\d+", entry.name):
            continue
        vendor = (_read(entry / "device" / "vendor") or "").strip().lower()
        driver = ""
        try:
            driver = Path(os.readlink(entry / "device" / "driver")).name
        except OSError:
            pass
        out.append((entry.name, vendor, driver))
    return out


# -- NVIDIA -----------------------------------------------------------------------------------


def _nvidia(root: Path, env_path: str | None, os_name: str, hw: Hardware) -> BackendEvidence:
    evidence: list[str] = []
    driver = ""
    problem = ""
    smi = shutil.which("nvidia-smi", path=env_path)
    if smi:
        code, out, err = _run(
            [
                smi,
                "--query-gpu=index,name,driver_version,memory.total,compute_cap",
                "--format=csv,noheader,nounits",
            ]
        )
        if code == 0:
            for line in out.splitlines():
                cols = [c.strip() for c in line.split(",")]
                if len(cols) < 4 or not cols[1]:
                    continue
                vram = int(cols[3]) if cols[3].isdigit() else None
                cap = cols[4] if len(cols) > 4 else ""
                driver = driver or cols[2]
                hw.gpus.append(
                    Gpu(
                        name=cols[1],
                        vendor="NVIDIA",
                        driver=cols[2],
                        vram_mib=vram,
                        source="nvidia-smi",
                        compute_cap=cap,
                    )
                )
                mem = f", {vram} MiB" if vram is not None else ""
                evidence.append(f"nvidia-smi: {cols[1]}, driver {cols[2]}{mem}")
            if not driver:
                problem = "nvidia-smi ran but listed no GPU"
        else:
            problem = f"nvidia-smi failed: {err or f'exit code {code}'}"
    if not driver:
        text = _read(_under(root, "/proc/driver/nvidia/version"))
        if text:
            found = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
            if found:
                driver = found.group(1)
                evidence.append(f"/proc/driver/nvidia/version: driver {driver}")
    pci = [d for d in _drm_devices(root, "card*") if d[1] == "0x10de"]
    for name, _vendor, drv in pci:
        evidence.append(
            f"/sys/class/drm/{name}: PCI vendor 0x10de (NVIDIA)"
            + (f", driver {drv}" if drv else ", no driver bound")
        )
        if not any(g.vendor == "NVIDIA" for g in hw.gpus):
            hw.gpus.append(
                Gpu(name="NVIDIA GPU", vendor="NVIDIA", driver=drv or driver, source="sysfs")
            )
    if problem:
        evidence.append(problem)
    if os_name == "macos":
        return BackendEvidence(False, evidence, "CUDA does not run on macOS.")
    if not driver:
        if pci or problem:
            why = problem or "no NVIDIA driver is loaded"
            return BackendEvidence(
                False,
                evidence,
                f"An NVIDIA GPU is present but {why}; install or repair the NVIDIA driver.",
            )
        return BackendEvidence(
            False,
            evidence,
            "No NVIDIA GPU or driver found "
            "(no nvidia-smi, no /proc/driver/nvidia, no PCI vendor 0x10de).",
        )
    need = CUDA12_MIN_DRIVER.get(os_name)
    if need and _version_tuple(driver)[:2] < need:
        need_text = ".".join(str(x) for x in need)
        evidence.append(f"driver {driver} is older than {need_text}, the oldest that runs CUDA 12")
        return BackendEvidence(
            False,
            evidence,
            f"NVIDIA driver {driver} is too old for CUDA 12 (needs "
            f"{need_text} or newer); update the driver.",
        )
    return BackendEvidence(True, evidence)


# -- Vulkan -----------------------------------------------------------------------------------

SOFTWARE_DEVICES = re.compile(r"llvmpipe|lavapipe|swiftshader|microsoft basic render", re.I)
"""Vulkan devices that compute on the CPU, named so when their type is not given."""


@dataclass(frozen=True)
class VulkanDevice:
    index: int  # its place in the Vulkan loader's list (GGML_VK_VISIBLE_DEVICES names it)
    name: str
    kind: str  # vulkaninfo's deviceType without its prefix: "DISCRETE_GPU", "CPU" …

    @property
    def software(self) -> bool:
        return self.kind == "CPU" or bool(SOFTWARE_DEVICES.search(self.name))


def vulkan_devices(summary: str) -> list[VulkanDevice]:
    """The devices of ``vulkaninfo --summary``'s output, in its order (``GPU0:`` …)."""
    found = []
    for block in re.split(r"^\s*GPU(?=\d+:)", summary, flags=re.M)[1:]:
        index = re.match(r"(\d+):", block)
        name = re.search(r"deviceName\s*=\s*(.+)", block)
        kind = re.search(r"deviceType\s*=\s*(?:PHYSICAL_DEVICE_TYPE_)?(\S+)", block)
        if index and name:
            found.append(
                VulkanDevice(
                    int(index.group(1)), name.group(1).strip(), kind.group(1) if kind else ""
                )
            )
    return found


def _vulkan_loader(root: Path, os_name: str) -> str:
    if os_name == "windows":
        system = Path(os.environ.get("SystemRoot", r"C:\Windows")) / "System32" / "vulkan-1.dll"
        return str(system) if system.exists() else ""
    if os_name == "macos":
        return ""
    for d in LIB_DIRS:
        for lib in ("libvulkan.so.1", "libvulkan.so"):
            candidate = _under(root, f"/{d}/{lib}")
            if candidate.exists():
                return "/" + f"{d}/{lib}"
    if root == Path("/"):
        found = ctypes.util.find_library("vulkan")
        if found:
            return found
    return ""


def _vulkan(root: Path, env_path: str | None, os_name: str, hw: Hardware) -> BackendEvidence:
    evidence: list[str] = []
    nodes = _drm_devices(root, "renderD*")
    dri = _under(root, "/dev/dri")
    dev_nodes = sorted(p.name for p in dri.glob("renderD*")) if dri.is_dir() else []
    names = sorted(set(dev_nodes) | {n for n, _, _ in nodes})
    by_name = {n: (v, d) for n, v, d in nodes}
    for name in names:
        vendor, drv = by_name.get(name, ("", ""))
        what = []
        if drv:
            what.append(f"driver {drv}")
        if vendor:
            what.append(PCI_VENDORS.get(vendor, f"PCI vendor {vendor}"))
        evidence.append(f"/dev/dri/{name}" + (f" ({', '.join(what)})" if what else ""))
        vendor_name = PCI_VENDORS.get(vendor, "")
        if vendor_name and vendor_name != "NVIDIA" and vendor_name != "virtio":
            hw.gpus.append(
                Gpu(
                    name=f"{vendor_name} GPU ({name})",
                    vendor=vendor_name,
                    driver=drv,
                    source="sysfs",
                )
            )
    devices: list[VulkanDevice] = []
    tool = shutil.which("vulkaninfo", path=env_path)
    if tool:
        code, out, err = _run([tool, "--summary"])
        if code == 0:
            devices = vulkan_devices(out)
            evidence.extend(
                f"vulkaninfo: {d.name}"
                + (" (a software device: it computes on the CPU)" if d.software else "")
                for d in devices
            )
            if not devices:
                evidence.append("vulkaninfo ran but listed no device")
        else:
            evidence.append(f"vulkaninfo failed: {err or f'exit code {code}'}")
    loader = _vulkan_loader(root, os_name)
    if loader:
        evidence.append(f"Vulkan loader: {loader}")
    if os_name == "macos":
        return BackendEvidence(False, evidence, "No Vulkan engine for macOS; use Metal or the CPU.")
    gpu_devices = [d for d in devices if not d.software]
    has_device = bool(names) or bool(gpu_devices) or os_name == "windows" and bool(loader)
    software = next((d for d in devices if d.software), None)
    if not has_device and software is not None and loader:
        return BackendEvidence(
            False,
            evidence,
            f"The only Vulkan device is {software.name}, a software device: it computes on "
            f"the CPU, far slower than Cantor's CPU engine, so Cantor does not choose it "
            f"(`cantor backends --use vulkan` uses it anyway).",
            software=software.name,
            env={"GGML_VK_VISIBLE_DEVICES": str(software.index)},
        )
    if not has_device:
        return BackendEvidence(
            False, evidence, "No GPU render node (/dev/dri/renderD*) or Vulkan device found."
        )
    if not loader:
        return BackendEvidence(
            False,
            evidence,
            "A GPU is present but no Vulkan loader (libvulkan.so.1) is "
            "installed; install your system's Vulkan loader package.",
        )
    return BackendEvidence(True, evidence)


# -- the probe --------------------------------------------------------------------------------


def probe(
    root: Path = Path("/"),
    env_path: str | None = None,
    *,
    os_name: str | None = None,
    arch: str | None = None,
) -> Hardware:
    """Look at the machine. ``root`` prefixes every file read; ``env_path`` is the PATH
    searched for nvidia-smi and vulkaninfo (None: this process's PATH). ``os_name`` and
    ``arch`` override what the platform says (tests simulate other machines)."""
    root = Path(root)
    os_name = normalise_os(os_name or platform.system())
    arch = normalise_arch(arch or platform.machine())
    rosetta = (
        os_name == "macos"
        and arch == "x86_64"
        and root == Path("/")
        and procs.macos.under_rosetta(run=lambda argv: _run(argv)[:2])
    )
    if rosetta:  # an Intel Cantor translated on Apple Silicon: the machine is arm64
        arch = "arm64"
    hw = Hardware(os=os_name, arch=arch)
    if rosetta:
        hw.notes.append(
            "Cantor runs under Rosetta (its Intel build) on Apple Silicon; "
            "engines run natively for arm64."
        )
    hw.cpu_name, hw.cpu_features, cpu_source = _cpu(root, os_name, arch)
    hw.ram_bytes = _ram(root)

    cpu_ev: list[str] = []
    feats = ", ".join(hw.cpu_features) or "none of AVX2, AVX-512, NEON"
    cpu_ev.append(f"{cpu_source}: {hw.cpu_name or 'CPU'}; {feats}")
    if hw.ram_bytes:
        cpu_ev.append(f"RAM: {hw.ram_bytes / 2**30:.1f} GiB")
    if arch == "x86_64" and "AVX2" not in hw.cpu_features:
        note = (
            "This CPU has no AVX2: the CPU engine will be slow, and a build made for "
            "AVX2 will not start on it (the trial load will say so)."
        )
        hw.notes.append(note)
        cpu_ev.append("no AVX2 on this CPU")
    hw.backends["cuda12"] = _nvidia(root, env_path, os_name, hw)
    if os_name == "macos" and arch == "arm64":
        hw.backends["metal"] = BackendEvidence(True, ["macOS on Apple Silicon (arm64)"])
    else:
        hw.backends["metal"] = BackendEvidence(
            False, [], f"Metal needs macOS on Apple Silicon; this is {os_name} {arch}."
        )
    hw.backends["vulkan"] = _vulkan(root, env_path, os_name, hw)
    hw.backends["cpu"] = BackendEvidence(True, cpu_ev)
    return hw


def probe_from_env() -> Hardware:
    """:func:`probe` with the test hooks: ``CANTOR_HW_ROOT`` (file root), ``PATH``,
    ``CANTOR_HW_OS`` and ``CANTOR_HW_ARCH``."""
    return probe(
        Path(os.environ.get(ROOT_ENV) or "/"),
        os.environ.get("PATH"),
        os_name=os.environ.get(OS_ENV) or None,
        arch=os.environ.get(ARCH_ENV) or None,
    )
