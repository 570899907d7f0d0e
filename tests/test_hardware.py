"""Hardware probe against simulated machines (a fake sysfs tree and a fake nvidia-smi)."""

from __future__ import annotations

import json

from cantor_desktop.system import hardware
from support.fake_builds import fake_machine


def test_nvidia_machine_with_evidence(tmp_path):
    root, bin_dir = fake_machine(tmp_path / "m")
    hw = hardware.probe(root, str(bin_dir), os_name="Linux", arch="AMD64")
    assert (hw.os, hw.arch) == ("linux", "x86_64")
    assert hw.cpu_name == "Test CPU 9000" and hw.cpu_features == ["AVX2"]
    assert hw.ram_bytes == 16318480 * 1024
    cuda = hw.backends["cuda12"]
    assert cuda.supported
    assert "nvidia-smi: NVIDIA GeForce RTX 4070, driver 550.54.14, 12282 MiB" in cuda.evidence
    gpu = next(g for g in hw.gpus if g.source == "nvidia-smi")
    assert (gpu.name, gpu.vendor, gpu.driver, gpu.vram_mib) == (
        "NVIDIA GeForce RTX 4070",
        "NVIDIA",
        "550.54.14",
        12282,
    )
    vk = hw.backends["vulkan"]
    assert vk.supported
    assert "/dev/dri/renderD128 (driver nvidia, NVIDIA)" in vk.evidence
    assert any("libvulkan.so.1" in e for e in vk.evidence)
    assert not hw.backends["metal"].supported
    assert "Metal needs macOS on Apple Silicon" in hw.backends["metal"].reason
    assert hw.backends["cpu"].supported
    json.dumps(hw.to_dict())


def test_old_driver_is_evidence_against(tmp_path):
    root, bin_dir = fake_machine(tmp_path / "m", nvidia_driver="470.199.02")
    cuda = hardware.probe(root, str(bin_dir), os_name="linux", arch="x86_64").backends["cuda12"]
    assert not cuda.supported
    assert "470.199.02 is too old for CUDA 12" in cuda.reason and "525.60" in cuda.reason


def test_proc_driver_without_nvidia_smi(tmp_path):
    root, _bin = fake_machine(tmp_path / "m")
    cuda = hardware.probe(root, str(tmp_path / "empty"), os_name="linux", arch="x86_64").backends[
        "cuda12"
    ]
    assert cuda.supported
    assert "/proc/driver/nvidia/version: driver 550.54.14" in cuda.evidence


def test_pci_device_without_driver_says_so(tmp_path):
    root, _bin = fake_machine(tmp_path / "m", nvidia_driver=None, render=False)
    (root / "sys/class/drm/card1/device").mkdir(parents=True)
    (root / "sys/class/drm/card1/device/vendor").write_text("0x10de\n")
    cuda = hardware.probe(root, str(tmp_path / "empty"), os_name="linux", arch="x86_64").backends[
        "cuda12"
    ]
    assert not cuda.supported
    assert "no NVIDIA driver is loaded" in cuda.reason
    assert any("PCI vendor 0x10de" in e for e in cuda.evidence)


def test_failing_nvidia_smi_is_reported(tmp_path):
    root, bin_dir = fake_machine(
        tmp_path / "m",
        smi_fails="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    )
    (root / "proc/driver/nvidia/version").unlink()
    cuda = hardware.probe(root, str(bin_dir), os_name="linux", arch="x86_64").backends["cuda12"]
    assert not cuda.supported
    assert "nvidia-smi failed: NVIDIA-SMI has failed" in cuda.reason


def test_plain_machine_no_avx2_no_gpu(tmp_path):
    root, _bin = fake_machine(
        tmp_path / "m", nvidia_driver=None, render=False, vulkan_loader=False, avx2=False
    )
    hw = hardware.probe(root, str(tmp_path / "empty"), os_name="linux", arch="x86_64")
    assert not hw.backends["cuda12"].supported and not hw.backends["vulkan"].supported
    assert "No GPU render node" in hw.backends["vulkan"].reason
    assert hw.backends["cpu"].supported
    assert "no AVX2 on this CPU" in hw.backends["cpu"].evidence
    assert any("no AVX2" in n for n in hw.notes)


def test_render_node_without_loader(tmp_path):
    root, _bin = fake_machine(tmp_path / "m", nvidia_driver=None, vulkan_loader=False)
    vk = hardware.probe(root, str(tmp_path / "empty"), os_name="linux", arch="x86_64").backends[
        "vulkan"
    ]
    assert not vk.supported and "no Vulkan loader" in vk.reason
    assert "/dev/dri/renderD128 (driver amdgpu, AMD)" in vk.evidence


def test_macos_arm64_has_metal(tmp_path):
    hw = hardware.probe(tmp_path, str(tmp_path), os_name="Darwin", arch="arm64")
    assert hw.os == "macos" and hw.arch == "arm64"
    assert hw.backends["metal"].supported
    assert hw.backends["metal"].evidence == ["macOS on Apple Silicon (arm64)"]


def test_this_machine_probes(tmp_path):
    hw = hardware.probe()
    assert hw.os and hw.arch and hw.backends["cpu"].supported


def test_vulkaninfo_devices_are_evidence(tmp_path):
    root, bin_dir = fake_machine(tmp_path / "m", nvidia_driver=None)
    tool = bin_dir / "vulkaninfo"
    tool.write_text(
        '#!/bin/sh\n[ "$1" = --summary ] || exit 2\n'
        "echo 'GPU0:'\necho '    deviceName         = AMD Radeon RX 7600 (RADV NAVI33)'\n"
        "echo 'GPU1:'\necho '    deviceName         = llvmpipe (LLVM 17.0.6, 256 bits)'\n"
    )
    tool.chmod(0o755)
    vk = hardware.probe(root, str(bin_dir), os_name="linux", arch="x86_64").backends["vulkan"]
    assert vk.supported
    assert "vulkaninfo: AMD Radeon RX 7600 (RADV NAVI33)" in vk.evidence


def _sysctl(answers: dict[str, str]):
    asked: list[list[str]] = []

    def run(argv):
        asked.append(argv)
        name = argv[-1]
        if name in answers:
            return 0, answers[name] + "\n", ""
        return 1, "", f"sysctl: unknown oid '{name}'"

    return run, asked


def test_macos_apple_silicon_cpu_is_named_by_its_brand_string():
    run, asked = _sysctl({"machdep.cpu.brand_string": "Apple M2 Pro"})
    assert hardware.macos_cpu("arm64", run) == ("Apple M2 Pro", ["NEON"])
    # Apple Silicon has no leaf7_features: it is not asked for (it would fail the call)
    assert asked == [["sysctl", "-n", "machdep.cpu.brand_string"]]


def test_macos_intel_cpu_is_named_with_its_vector_features():
    run, asked = _sysctl(
        {
            "machdep.cpu.brand_string": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz",
            "machdep.cpu.leaf7_features": "RDWRFSGS TSC_THREAD_OFFSET SGX BMI1 AVX2 SMEP BMI2",
        }
    )
    assert hardware.macos_cpu("x86_64", run) == (
        "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz",
        ["AVX2"],
    )
    assert asked == [
        ["sysctl", "-n", "machdep.cpu.brand_string"],
        ["sysctl", "-n", "machdep.cpu.leaf7_features"],
    ]


def test_macos_under_rosetta_the_chip_is_called_apple_silicon():
    run, _ = _sysctl({"machdep.cpu.brand_string": "VirtualApple @ 2.50GHz processor"})
    assert hardware.macos_cpu("arm64", run) == ("Apple Silicon", ["NEON"])


def test_vulkan_devices_say_which_compute_on_the_cpu():
    summary = (
        "Devices:\n========\nGPU0:\n\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU\n"
        "\tdeviceName         = AMD Radeon RX 7600 (RADV NAVI33)\n"
        "GPU1:\n\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU\n"
        "\tdeviceName         = llvmpipe (LLVM 15.0.6, 256 bits)\n"
        "GPU2:\n\tdeviceName         = SwiftShader Device (Subzero)\n"
    )
    found = hardware.vulkan_devices(summary)
    assert [(d.index, d.kind, d.software) for d in found] == [
        (0, "DISCRETE_GPU", False),
        (1, "CPU", True),
        (2, "", True),  # no type given: known by its name
    ]


def test_a_machine_whose_only_vulkan_device_is_software_names_it(tmp_path):
    root, bin_dir = fake_machine(tmp_path / "m", nvidia_driver=None, render=False)
    tool = bin_dir / "vulkaninfo"
    tool.write_text(
        '#!/bin/sh\n[ "$1" = --summary ] || exit 2\n'
        "echo 'GPU0:'\necho '\tdeviceType = PHYSICAL_DEVICE_TYPE_CPU'\n"
        "echo '\tdeviceName = llvmpipe (LLVM 15.0.6, 256 bits)'\n"
    )
    tool.chmod(0o755)
    vk = hardware.probe(root, str(bin_dir), os_name="linux", arch="x86_64").backends["vulkan"]
    assert not vk.supported and vk.software == "llvmpipe (LLVM 15.0.6, 256 bits)"
    assert vk.env == {"GGML_VK_VISIBLE_DEVICES": "0"}
    assert "a software device" in vk.reason and "--use vulkan" in vk.reason
