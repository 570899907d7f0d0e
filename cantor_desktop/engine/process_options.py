"""How an engine process is started: the options of :mod:`cantor_desktop.system.procs` (windowless,
its own session, tied to the process that owns it), and an environment of what it needs
(an allow-list), never the user's secrets.

An engine runs in its own session or process group (a Ctrl-C in the terminal reaches the
node, which stops the engine in order, not both at once). It never outlives its owner: on
Linux the kernel kills it (SIGKILL) when the owner dies, even by kill -9; on Windows the owner
sits in a kill-on-close Job Object that its children inherit; on macOS Cantor's own engine
watches the owner's pipe and the node ends a third-party engine it left behind at its next
start (node/leftovers.py).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ..system import procs


def engine_process_kwargs() -> dict[str, Any]:
    """Keyword arguments for subprocess.Popen / asyncio.create_subprocess_exec. An engine is
    killed when its node dies (Linux's parent-death signal is SIGKILL): ace-server's SIGTERM
    lets the running job finish — minutes of a song's decode for a node that is gone."""
    return procs.child_kwargs(killed_with_owner=True)


PASSED_NAMES = frozenset(
    {
        # where programs, the user and temporary files are; the language
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "USERNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "XDG_RUNTIME_DIR",
        "XDG_CACHE_HOME",  # the GPU drivers' shader caches
        # libraries an engine build the user supplies may be found through
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "DYLD_FALLBACK_LIBRARY_PATH",
        # Windows: what any program needs to start and find its folders
        "SYSTEMROOT",
        "SYSTEMDRIVE",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "USERPROFILE",
        "APPDATA",
        "LOCALAPPDATA",
        "PROGRAMDATA",
        "PROGRAMFILES",
        "PROGRAMFILES(X86)",
        "PROGRAMW6432",
        "COMMONPROGRAMFILES",
        "NUMBER_OF_PROCESSORS",
        "PROCESSOR_ARCHITECTURE",
        "PROCESSOR_IDENTIFIER",
        "OS",
        # the GPU chosen by the system or the user
        "GPU_DEVICE_ORDINAL",
        "DRI_PRIME",
        # the built-in sketch engine is Python (run from source: where its package is)
        "PYTHONPATH",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "VIRTUAL_ENV",
    }
)
"""Variables an engine is started with, by name (Windows names compared in capitals)."""
PASSED_PREFIXES = (
    "LC_",  # the locale
    "GGML_",  # the engine's own (GGML_BACKEND chooses the device)
    "CUDA_",  # CUDA_VISIBLE_DEVICES, CUDA_PATH, CUDA_CACHE_PATH …
    "NVIDIA_",
    "__GL_",  # NVIDIA's shader cache
    "VK_",  # Vulkan loader: VK_ICD_FILENAMES, VK_DRIVER_FILES …
    "MESA_",
    "RADV_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "MTL_",  # Metal
    "ZES_",  # oneAPI Level Zero
    "ONEAPI_",
    "SYCL_",
    "OMP_",  # CPU threads
    "OPENBLAS_",
    "MKL_",
    "KMP_",
)
"""…and by prefix: the locale, the engine's own settings, the GPU drivers', thread counts."""
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
"""A passed variable whose name still holds one of these is dropped all the same."""


def passed(name: str) -> bool:
    """Whether an engine is started with the variable ``name`` (an allow-list: the engine is
    another project's program, and the user's own variables — ``GITHUB_PAT``, a cloud key,
    the node's token — are none of its business)."""
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS):
        return False
    return upper in PASSED_NAMES or upper.startswith(PASSED_PREFIXES)


def engine_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment an engine starts with: the variables of ours it may see
    (:func:`passed`), plus ``extra`` (the build's own, such as ``GGML_BACKEND``), plus what
    ties it to this process (:func:`cantor_desktop.system.procs.child_environment`)."""
    env = {k: v for k, v in os.environ.items() if passed(k)}
    env.update(extra or {})
    return procs.child_environment(env)
