"""Process life (cantor_desktop.system.procs): on real processes for this OS (Linux), and the Windows
and macOS branches against a pretend OS (tests/support/fake_os.py): which process ends, what
the user reads."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from cantor_desktop.system import procs
from cantor_desktop.system.procs import macos, spawn, windows

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.fake_os import FakeOS  # noqa: E402
from support.procs import wait_until  # noqa: E402
from cantor_desktop.files import write_atomic

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _wait_gone(pids, what: str, timeout=10.0) -> None:
    wait_until(lambda: not any(procs.alive(p) for p in pids), what, timeout)


# -- the process table, on real processes --------------------------------------------------

TREE = r"""
import signal, subprocess, sys, time
stubborn = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: open(sys.argv[1], 'w').write('asked')); print('ok', flush=True); time.sleep(60)",
    sys.argv[1]], stdout=subprocess.PIPE, text=True)
stubborn.stdout.readline()
quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(stubborn.pid, quiet.pid, flush=True)
time.sleep(60)
"""


def test_a_tree_is_asked_then_forced_and_nothing_of_it_is_left(tmp_path):
    asked = tmp_path / "asked"  # the stubborn one writes it on SIGTERM, and goes on
    root = subprocess.Popen(
        [sys.executable, "-c", TREE, str(asked)], stdout=subprocess.PIPE, text=True
    )
    try:
        stubborn, quiet = map(int, root.stdout.readline().split())
        assert procs.alive(root.pid) and procs.alive(stubborn) and procs.alive(quiet)
        assert set(procs.descendants(root.pid)) == {stubborn, quiet}
        # Popen returns once exec has closed the child's close-on-exec pipe, a moment before
        # the kernel sets the new program's arguments: until then /proc says none (CI)
        argv = wait_until(lambda: procs.command_line(quiet), "the child's command line", 10)
        assert argv[-1] == "import time; time.sleep(60)"
        assert procs.same_path(procs.image_path(root.pid), sys.executable)
        ended = procs.end_tree(root.pid, grace=0.5)
        root.wait(5)
    finally:
        root.kill()
    assert set(ended) == {root.pid, stubborn, quiet}
    _wait_gone([root.pid, stubborn, quiet], "the tree to be gone", 5)
    # the one that ignores SIGTERM was asked first, then forced (SIGKILL is all that ends it)
    assert asked.read_text() == "asked"
    assert root.returncode == -signal.SIGTERM
    assert not procs.alive(root.pid) and procs.command_line(root.pid) is None


def test_a_zombie_counts_as_ended_and_a_reused_pid_is_never_touched():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    # not reaped yet: a zombie, which is not alive
    wait_until(lambda: not procs.alive(child.pid), "the child to end (not reaped)", 10)
    assert procs.end([child.pid], grace=0.1) == []
    child.wait()
    assert not procs.alive(0) and not procs.alive(None)


# -- the owner pipe: the only tie on macOS, run here on real processes -------------------

OWNER = r"""
import os, subprocess, sys, time
from cantor_desktop.system import procs
kwargs = procs.child_kwargs()
kwargs.pop("preexec_fn", None)        # the pipe alone, as on macOS: no parent-death signal
env = procs.child_environment(dict(os.environ))
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env, **kwargs)
print(child.pid, flush=True)
time.sleep(60)
"""

GRACEFUL = r"""
import os, signal, sys, time
from cantor_desktop.system.procs import watch_owner, OWNER_FD_ENV
def stop(*_):
    open(sys.argv[1], "w").write("stopped gracefully")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
assert watch_owner() and OWNER_FD_ENV not in os.environ
print("watching", flush=True)
time.sleep(60)
"""

STUBBORN = r"""
import os, signal, subprocess, sys, time
from cantor_desktop.system.procs import watch_owner
signal.signal(signal.SIGTERM, signal.SIG_IGN)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                          start_new_session=True)
open(sys.argv[1], "w").write(str(helper.pid))
assert watch_owner(grace=0.5)
time.sleep(60)
"""


def _owner_with_child(code: str, out: Path) -> tuple[subprocess.Popen, int]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, code, str(out)], env=ENV, stdout=subprocess.PIPE, text=True
    )
    return owner, int(owner.stdout.readline())


def test_a_child_watching_the_owner_pipe_stops_gracefully_when_its_owner_is_killed(tmp_path):
    out = tmp_path / "child.txt"
    owner, child = _owner_with_child(GRACEFUL, out)
    try:
        assert owner.stdout.readline() == "watching\n"  # the child watches its owner pipe
        assert procs.alive(child)
        owner.send_signal(signal.SIGKILL)
        owner.wait(5)
        _wait_gone([child], "the child to end after its owner", 10)
    finally:
        owner.kill()
    assert out.read_text() == "stopped gracefully"


def test_a_child_that_will_not_stop_ends_its_own_children_and_exits_after_the_grace(tmp_path):
    out = tmp_path / "helper.pid"
    owner, child = _owner_with_child(STUBBORN, out)
    try:
        helper = int(wait_until(lambda: out.exists() and out.read_text(), "the helper's pid", 10))
        owner.send_signal(signal.SIGKILL)
        owner.wait(5)
        _wait_gone([child, helper], "the child and its helper to end after the owner", 10)
    finally:
        owner.kill()


DEATH_SIGNAL_OWNER = r"""
import subprocess, sys, time
from cantor_desktop.system.procs import owner
hook = owner.DIE_WITH_PARENT if sys.argv[1] == "tied" else None
# a child that does not watch the owner's pipe (a third-party engine): only the signal ties it
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=hook)
print(child.pid, "ctypes.util" in sys.modules, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
@pytest.mark.parametrize("tie", ["tied", "untied"])
def test_linux_a_child_that_does_not_watch_gets_the_parent_death_signal(tie):
    """The pre-exec hook ends a child when its owner is killed; without it (the control) the
    same child lives on. The hook finds prctl without a library search (ctypes.util runs
    ``ldconfig -p`` at every start)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", DEATH_SIGNAL_OWNER, tie], env=ENV, stdout=subprocess.PIPE, text=True
    )
    pid, searched = owner.stdout.readline().split()
    child = int(pid)
    try:
        assert searched == "False"
        assert procs.alive(child)
        owner.send_signal(signal.SIGKILL)
        owner.wait(5)
        if tie == "tied":
            _wait_gone([child], "the tied child to end with its owner", 5)
        else:  # the kernel has handed it to a new parent, the moment it sends the signal
            wait_until(lambda: psutil.Process(child).ppid() != owner.pid, "the reparent", 5)
            assert procs.alive(child)
    finally:
        owner.kill()
        owner.wait(5)
        owner.stdout.close()
        if procs.alive(child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_the_environment_carries_the_pipe_and_never_an_inherited_number(monkeypatch):
    monkeypatch.setenv(procs.OWNER_FD_ENV, "99")  # our own owner's pipe: not for our children
    env = procs.child_environment({procs.OWNER_FD_ENV: "99", "A": "1"})
    kwargs = procs.child_kwargs()
    assert env[procs.OWNER_FD_ENV] == str(kwargs["pass_fds"][0]) != "99"
    assert env["A"] == "1" and kwargs["start_new_session"] is True
    win = procs.child_environment({procs.OWNER_FD_ENV: "99", "Path": "a;b"}, os_name="nt")
    assert procs.OWNER_FD_ENV not in win


# -- Windows, against a pretend kernel32 -----------------------------------------------------


@pytest.fixture
def fake(monkeypatch):
    world = FakeOS()
    monkeypatch.setattr(windows, "_own_job", None)
    monkeypatch.setattr(spawn, "_children_job", None)
    return world


ACE = r"C:\Users\me\AppData\Local\Cantor\engines\acestep\cuda12\v0.1.1\ace-server.exe"


def test_windows_an_engine_ends_with_its_node_even_when_the_node_is_killed(fake):
    node = fake.me  # the code below runs "in" the node
    kwargs = procs.child_kwargs(os_name="nt", kernel32=fake.kernel32)
    assert kwargs == {
        "creationflags": windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP
    }  # no console window, ever
    engine = fake.spawn(node, ACE, [ACE, "--models", "m", "--port", "4001"])
    helper = fake.spawn(engine, r"C:\Windows\System32\conhost.exe", ["conhost.exe"])
    stranger = fake.spawn(4, r"C:\Windows\explorer.exe", ["explorer.exe"])
    fake.exit(node, "killed")  # TerminateProcess, a crash, Task Manager
    assert fake.procs[engine].how_ended == "killed with its job"
    assert fake.procs[helper].how_ended == "killed with its job"
    assert fake.running() == {stranger}


def test_windows_engines_start_without_error_dialogs_and_with_the_default_dll_path(
    fake, monkeypatch
):
    internal = r"C:\Program Files\Cantor\_internal"
    monkeypatch.setattr(sys, "_MEIPASS", internal, raising=False)
    fake.procs[fake.me].dll_directory = internal  # what PyInstaller's bootloader set
    procs.child_kwargs(os_name="nt", kernel32=fake.kernel32)
    engine = fake.spawn(fake.me, ACE, [ACE])
    inherited = fake.procs[engine]
    assert inherited.error_mode & windows.SEM_FAILCRITICALERRORS  # no "DLL missing" box
    assert inherited.error_mode & windows.SEM_NOGPFAULTERRORBOX  # no crash box
    assert inherited.dll_directory is None  # not our bundle's DLLs
    path = procs.child_environment(
        {
            "PATH": rf"{internal};C:\Windows\system32;"
            rf"{internal}\PySide6;C:\Tools"
        },
        os_name="nt",
    )
    assert path["PATH"] == r"C:\Windows\system32;C:\Tools"


def test_windows_a_dll_directory_that_is_not_the_bundle_is_left_alone(fake):
    fake.procs[fake.me].dll_directory = r"C:\Vendor\bin"
    added = []
    assert not windows.default_dll_search(
        fake.kernel32, r"C:\Program Files\Cantor\_internal", added.append
    )
    assert fake.procs[fake.me].dll_directory == r"C:\Vendor\bin" and added == []
    fake.procs[fake.me].dll_directory = r"c:\program files\cantor\_internal"
    assert windows.default_dll_search(
        fake.kernel32, r"C:\Program Files\Cantor\_internal", added.append
    )  # Windows ignores case
    assert fake.procs[fake.me].dll_directory is None
    assert added == [r"C:\Program Files\Cantor\_internal"]  # kept for our own loading


def test_windows_the_app_ties_its_node_but_not_the_programs_it_opens_for_the_user(fake):
    app = fake.me
    assert procs.node_kwargs(os_name="nt") == {
        "creationflags": windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP
    }
    node = fake.spawn(
        app, r"C:\Program Files\Cantor\cantor-desktop.exe", ["cantor-desktop.exe", "--mode", "node"]
    )
    assert procs.tie_child(node, os_name="nt", kernel32=fake.kernel32)
    engine = fake.spawn(node, ACE, [ACE])  # started by the node later
    player = fake.spawn(app, r"C:\Program Files\VLC\vlc.exe", ["vlc.exe", "song.wav"])
    fake.exit(app, "killed")
    assert not fake.procs[node].alive and not fake.procs[engine].alive
    assert fake.procs[player].alive  # the app itself is in no job


def test_windows_a_refused_job_is_said_and_the_child_still_starts(fake, caplog):
    fake.kernel32.AssignProcessToJobObject = lambda job, proc: 0
    kwargs = procs.child_kwargs(os_name="nt", kernel32=fake.kernel32)
    assert kwargs["creationflags"] & windows.CREATE_NO_WINDOW
    assert "children may outlive it" in caplog.text


def test_windows_probes_run_without_a_console_window(monkeypatch):
    from cantor_desktop.system import hardware

    seen = {}

    def run(argv, **kwargs):
        seen.update(kwargs)
        return subprocess.CompletedProcess(argv, 0, "ok\n", "")

    import types

    monkeypatch.setattr(hardware.subprocess, "run", run)
    monkeypatch.setattr(spawn, "os", types.SimpleNamespace(name="nt"))  # spawn's view only
    assert hardware._run(["nvidia-smi"])[0] == 0
    assert seen["creationflags"] == windows.CREATE_NO_WINDOW


@pytest.mark.parametrize(
    "code, words",
    [
        (
            3221225781,
            "exit code 0xC0000135 (STATUS_DLL_NOT_FOUND: a DLL the program needs was not found)",
        ),
        (-1073741515, "STATUS_DLL_NOT_FOUND"),  # the same code, read as signed
        (0xC0000005, "STATUS_ACCESS_VIOLATION"),
        (0xC000001D, "STATUS_ILLEGAL_INSTRUCTION: this CPU lacks an instruction the build uses"),
        (0xC0001234, "exit code 0xC0001234 (a Windows error status)"),
        (-9, "killed by signal 9 (SIGKILL)"),
        (2, "exit code 2"),
    ],
)
def test_exit_codes_are_said_in_words(code, words):
    assert words in procs.describe_exit(code)


def test_an_engine_that_dies_of_a_missing_dll_says_so_in_its_reason():
    from cantor_desktop.engine.supervisor import describe_exit as supervisor_words

    assert "DLL" in supervisor_words(3221225781)
    assert procs.code_text(3) == "code 3"


# -- leftovers: found by image path and command line -----------------------------------------


def test_leftovers_end_exactly_the_engines_that_lost_their_node(fake):
    from cantor_desktop.node import leftovers
    from cantor_desktop.system.paths import paths

    p = paths().ensure()
    models = str(p.models_dir / "acestep")
    exe = str(p.engines_dir / "acestep" / "cpu" / "v1" / "ace-server")
    node_cmd = ["cantor-desktop.exe", "--mode", "node", "--port", "7823"]
    dead_node = 6_000_001  # a pid nobody has now
    orphan = fake.spawn(dead_node, exe, [exe, "--models", models, "--port", "4100"])
    recycled = fake.spawn(4, "notepad.exe", ["notepad.exe"], pid=6_000_500)
    sketch = fake.spawn(
        dead_node,
        "cantor-desktop.exe",
        [
            "cantor-desktop.exe",
            "--mode",
            "sketch-server",
            "--models",
            str(p.sketch_models_dir),
            "--port",
            "4101",
        ],
    )
    live_node = fake.spawn(4, "cantor-desktop.exe", node_cmd)
    minded = fake.spawn(live_node, exe, [exe, "--models", models, "--port", "4102"])
    elsewhere = fake.spawn(
        dead_node,
        "ace-server.exe",
        ["ace-server.exe", "--models", "D:/other/models", "--port", "4103"],
    )
    p.node_engines_file.write_text(
        json.dumps(
            {
                "acestep": {"pid": orphan, "models_dir": models, "exe": exe},
                "old": {"pid": recycled, "models_dir": models, "exe": exe},
            }
        )
    )
    ended = leftovers.end_leftovers(0.2, ps=fake.psutil)
    assert sorted(ended) == sorted([orphan, sketch])
    assert fake.running() >= {recycled, live_node, minded, elsewhere}
    assert not fake.procs[orphan].alive and not fake.procs[sketch].alive
    assert json.loads(p.node_engines_file.read_text()) == {}


def test_leftovers_a_real_orphaned_sketch_engine_is_found_and_ended(tmp_path):
    from cantor_desktop.node import leftovers
    from cantor_desktop.system.paths import paths
    from cantor_desktop.system.selfexec import self_argv
    from cantor_desktop.sketch import ensure_sketch_models
    from support.procs import free_port

    p = paths().ensure()
    ensure_sketch_models(p.sketch_models_dir)
    argv = self_argv("sketch-server") + [
        "--models",
        str(p.sketch_models_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    starter = subprocess.run(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; p = subprocess.Popen(sys.argv[1:], "
            "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            "print(p.pid)",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=20,
        env=ENV,
    )
    engine = int(starter.stdout)  # its parent exited: nobody owns it now
    try:
        # started: it has exec'd into the engine (its command line names its models)
        wait_until(lambda: "--models" in (procs.command_line(engine) or []), "the engine", 10)
        assert procs.alive(engine)
        assert leftovers.end_leftovers(3.0) == [engine]
        _wait_gone([engine], "the orphaned engine to end", 5)
    finally:
        if procs.alive(engine):
            os.kill(engine, signal.SIGKILL)


# -- macOS, against pretend tools ------------------------------------------------------------


def test_macos_a_quarantined_build_is_explained_with_the_command_that_clears_it():
    exe = "/Users/me/Downloads/ace build/ace-server"
    note = macos.quarantine_note(exe, getxattr=lambda path, name: b"0081;5f1;Safari;")
    assert "quarantined" in note
    assert note.endswith("xattr -dr com.apple.quarantine '/Users/me/Downloads/ace build'")
    import errno

    def absent(path, name):
        raise OSError(errno.ENODATA, "No such attribute")

    assert macos.quarantine_note(exe, getxattr=absent) is None


def test_macos_without_getxattr_the_xattr_tool_decides(monkeypatch):
    monkeypatch.delattr(os, "getxattr", raising=False)
    asked = []

    def xattr(answer):
        def run(argv):
            asked.append(argv)
            return answer

        return run

    assert macos.quarantined("/x/ace-server", run=xattr((0, "0081;…"))) is True
    assert macos.quarantined("/x/ace-server", run=xattr((1, ""))) is False
    assert macos.quarantined("/x/ace-server", run=xattr((None, ""))) is None
    assert asked[0] == ["xattr", "-p", "com.apple.quarantine", "/x/ace-server"]


def test_macos_the_backends_page_says_a_user_build_is_quarantined(monkeypatch, tmp_path):
    from cantor_desktop.install import backends
    from cantor_desktop.system import hardware
    from cantor_desktop import config

    exe = tmp_path / "ace-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    config.update({"engines.acestep.path": str(exe)})
    monkeypatch.setattr(
        macos,
        "run_command",
        lambda argv, timeout=5.0: (0, "0081;") if argv[:2] == ["xattr", "-p"] else (1, ""),
    )
    hw = hardware.probe(tmp_path / "root", os_name="macos", arch="arm64")
    metal = backends.status("acestep", hw).backend("metal")
    assert metal.state == "update_required"
    assert metal.message.endswith(f"xattr -dr com.apple.quarantine {tmp_path}")


def test_macos_rosetta_is_detected_so_metal_is_not_called_unsupported(monkeypatch):
    from cantor_desktop.system import hardware

    assert macos.under_rosetta(run=lambda argv: (0, "1\n"))
    assert not macos.under_rosetta(run=lambda argv: (0, "0\n"))  # native arm64
    assert not macos.under_rosetta(run=lambda argv: (1, ""))  # an Intel Mac
    monkeypatch.setattr(macos, "under_rosetta", lambda run=None: True)
    hw = hardware.probe(Path("/"), os_name="macos", arch="x86_64")
    assert hw.arch == "arm64" and hw.backends["metal"].supported
    assert any("Rosetta" in n for n in hw.notes)
    monkeypatch.setattr(macos, "under_rosetta", lambda run=None: False)
    intel = hardware.probe(Path("/"), os_name="macos", arch="x86_64")
    assert intel.arch == "x86_64" and not intel.backends["metal"].supported


# -- files on Windows: a log held open, a file being read while replaced -------------------


def _held_open_on_windows(base: str):
    """os.rename as Windows does it while another process has ``base`` open."""

    def rotate(source, dest):
        if source == base:
            raise PermissionError(
                13,
                "The process cannot access the file because it is being used by another process",
                source,
            )
        os.rename(source, dest)

    return rotate


def test_a_log_held_open_elsewhere_still_rotates_and_loses_no_record(tmp_path):
    import logging
    import logging.handlers

    from cantor_desktop.system import logs

    def run(handler) -> tuple[list[int], list[str]]:
        handler.maxBytes = 2000
        handler.rotator = _held_open_on_windows(handler.baseFilename)
        errors = []
        handler.handleError = lambda record: errors.append(record.getMessage())
        logger = logging.Logger("t")
        logger.addHandler(handler)
        for i in range(400):
            logger.info("record %05d %s", i, "x" * 20)
        handler.close()
        return errors, [p.stat().st_size for p in Path(handler.baseFilename).parent.glob("*")]

    stock_dir, ours_dir = tmp_path / "stock", tmp_path / "ours"
    stock_dir.mkdir()
    stock = logging.handlers.RotatingFileHandler(stock_dir / "node.log", backupCount=5)
    lost, _ = run(stock)
    assert lost  # Python's own handler drops records here

    errors, sizes = run(logs.rotating_handler(ours_dir / "node.log"))
    assert errors == []
    assert max(sizes) <= 2100 and len(sizes) == 6  # bounded: node.log + 5 backups
    text = "".join(
        (ours_dir / n).read_text()
        for n in ["node.log.5", "node.log.4", "node.log.3", "node.log.2", "node.log.1", "node.log"]
    )
    numbers = [int(line.split("record ")[1][:5]) for line in text.splitlines()]
    assert numbers == list(range(numbers[0], 400))  # the newest, in order, none missing


def test_replacing_a_file_another_process_is_reading_waits_for_it(tmp_path, monkeypatch):
    from cantor_desktop import config, files

    monkeypatch.setattr(files, "REPLACE_WAITS", (0.01,) * 5)
    real = os.replace
    calls = []

    def busy_twice(src, dst):
        calls.append(dst)
        if len(calls) <= 2:
            exc = PermissionError(13, "Access is denied", str(dst))
            exc.winerror = 32  # ERROR_SHARING_VIOLATION
            raise exc
        real(src, dst)

    (tmp_path / "cfg").mkdir()
    target = tmp_path / "cfg" / "node.toml"
    target.write_text("old")
    monkeypatch.setattr(config.os, "replace", busy_twice)
    write_atomic(target, b"new")
    assert target.read_text() == "new" and len(calls) == 3

    def always_busy(src, dst):
        exc = PermissionError(13, "Access is denied", str(dst))
        exc.winerror = 5
        raise exc

    monkeypatch.setattr(config.os, "replace", always_busy)
    with pytest.raises(PermissionError):
        write_atomic(target, b"newer")
    assert target.read_text() == "new" and os.listdir(target.parent) == ["node.toml"]

    def denied(src, dst):  # POSIX: a real permission problem, said at once
        calls.append("posix")
        raise PermissionError(13, "Permission denied", str(dst))

    calls.clear()
    monkeypatch.setattr(config.os, "replace", denied)
    with pytest.raises(PermissionError):
        write_atomic(target, b"x")
    assert calls == ["posix"]


# -- what psutil lets through on Windows: a plain OSError (WinError 87) -----------------------


def test_a_process_psutil_cannot_read_never_ends_the_search(fake):
    """psutil raises a plain OSError (WinError 87) for cmdline() of a process that is starting
    or ending, and for exe() where NtQuerySystemInformation lacks SystemProcessIdInformation
    (Wine < 9.8): the search goes on, the image path is asked of Windows, and the leftovers
    check still ends the engine that lost its node."""
    from cantor_desktop.node import leftovers
    from cantor_desktop.system.paths import paths

    p = paths().ensure()
    models = str(p.models_dir / "acestep")
    (p.models_dir / "acestep").mkdir(parents=True)
    exe = str(p.engines_dir / "acestep" / "cpu" / "v1" / "ace-server")
    starting = fake.spawn(4, "setup.exe", ["setup.exe"])
    fake.procs[starting].unreadable = ("cmdline", "exe")
    orphan = fake.spawn(6_000_001, exe, [exe, "--models", models, "--port", "4100"])

    assert procs.command_line(starting, ps=fake.psutil) is None
    assert procs.image_path(starting, ps=fake.psutil, k32=fake.kernel32) == "setup.exe"
    assert procs.image_path(starting, ps=fake.psutil) is None  # no Windows to ask here
    seen = {f.pid: f for f in procs.find(lambda f: True, ps=fake.psutil, k32=fake.kernel32)}
    assert seen[starting].cmdline == [] and seen[starting].exe == "setup.exe"
    assert seen[orphan].exe == exe and seen[orphan].argument_after("--models") == models
    assert leftovers.end_leftovers(0.2, ps=fake.psutil) == [orphan]
    assert fake.procs[starting].alive and not fake.procs[orphan].alive
