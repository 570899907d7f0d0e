"""What leaves the PyInstaller bundle: unused Qt parts, and libraries nothing needs any more.

Used by packaging/cantor.spec on a.binaries / a.datas (lists of (dest, source, typecode)).
PyInstaller brings Qt libraries and plugins in by link analysis and its PySide6 hooks;
``excludes`` only drops Python imports, so the filtering happens here, on destinations:

- :func:`keep_qt_entry` drops Qt modules Cantor never uses (WebEngine, 3D, QML/Quick, Pdf,
  Designer, …), FFmpeg and the multimedia plugins (playback is soundfile + QAudioSink), Qt's translations and QML folders, and every plugin not in KEEP_PLUGINS.
- :func:`prune_unneeded` (Linux) then drops the shared libraries that only the dropped parts
  needed (e.g. GTK, cairo and pango behind the GTK3 platform theme), by following the ELF
  NEEDED entries from what stays.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import PurePath

# Qt libraries by module name: libQt6Foo.so.6, Qt6Foo.dll, QtFoo.framework/...
DROP_QT_LIBS = re.compile(
    r"(^|[/\\])(lib)?Qt6?(WebEngine\w*|WebChannel\w*|WebSockets|WebView\w*|3D\w*|Qml\w*|"
    r"Quick\w*|Labs\w*|Pdf\w*|Designer\w*|UiTools|Help|VirtualKeyboard\w*|Charts\w*|"
    r"DataVisualization\w*|Graphs\w*|Location|Positioning\w*|Bluetooth|Nfc|Sensors\w*|"
    r"SerialPort|SerialBus|Sql|Test|TextToSpeech|RemoteObjects\w*|Scxml\w*|StateMachine\w*|"
    r"SpatialAudio|HttpServer|NetworkAuth|ShaderTools|CanvasPainter\w*|EglFS\w*|EglFs\w*|"
    r"MultimediaQuick\w*)(\.|_|d\.|$)"
)
# ...except these (none since playback is soundfile + QAudioSink: QtQml and QtQuick were
# kept only because Qt Multimedia's FFmpeg plugin linked them)
KEEP_QT_LIBS: set[str] = set()
# FFmpeg's libraries that PySide6 ships for that plugin: libavcodec.so.61, avcodec-61.dll, …
DROP_FFMPEG = re.compile(
    r"(^|[/\\])(lib)?(avcodec|avformat|avutil|avdevice|avfilter|"
    r"swresample|swscale)([-.]|$)"
)

# plugin folders kept, and inside each only these plugins (None = the whole folder)
KEEP_PLUGINS: dict[str, set[str] | None] = {
    "platforms": {"qxcb", "qoffscreen", "qwayland", "qminimal", "qwindows", "qcocoa", "qdirect2d"},
    "imageformats": {"qsvg", "qico", "qjpeg"},
    "iconengines": {"qsvgicon"},
    # no "multimedia": QAudioSink and QMediaDevices live in QtMultimedia itself; the media
    # plugins (FFmpeg, Windows/Darwin media) serve only QMediaPlayer, which Cantor does not use
    "platforminputcontexts": {
        "composeplatforminputcontextplugin",
        "ibusplatforminputcontextplugin",
    },
    "platformthemes": {"qxdgdesktopportal"},
    "xcbglintegrations": None,
    "wayland-shell-integration": {"xdg-shell"},
    "wayland-decoration-client": {"bradient"},
    "wayland-graphics-integration-client": {"qt-plugin-wayland-egl"},
    "styles": {"qmodernwindowsstyle", "qwindowsvistastyle", "qmacstyle"},
    "tls": {"qopensslbackend", "qschannelbackend", "qsecuretransportbackend", "qcertonlybackend"},
}

# Qt folders inside PySide6 that a widgets app never reads
DROP_QT_FOLDERS = {"translations", "qml", "metatypes", "libexec", "resources", "include"}


def plugin_name(filename: str) -> str:
    """libqxcb.so / qwindows.dll / libqcocoa.dylib → qxcb / qwindows / qcocoa."""
    stem = filename.split(".")[0]
    return stem[3:] if stem.startswith("lib") else stem


def keep_qt_entry(dest: str, *, by_name: bool = True) -> bool:
    """False for a bundle entry (its destination path) that belongs to an unused Qt part.

    ``by_name=False`` leaves Qt libraries to :func:`prune_unneeded` (Linux), which keeps
    exactly those the kept plugins and modules link; elsewhere the names decide.
    """
    parts = PurePath(dest.replace("\\", "/")).parts
    if not parts:
        return True
    if "PySide6" in parts:
        inside = parts[parts.index("PySide6") + 1 :]
        # PySide6/Qt/translations (Linux, macOS) or PySide6/translations (Windows)
        top = inside[1:2] if inside[:1] == ("Qt",) else inside[:1]
        if len(inside) > len(top) and set(top) & DROP_QT_FOLDERS:
            return False
        if "plugins" in inside:
            rest = inside[inside.index("plugins") + 1 :]
            if len(rest) < 2:
                return True
            if rest[0] not in KEEP_PLUGINS:
                return False
            keep = KEEP_PLUGINS[rest[0]]
            return keep is None or plugin_name(rest[-1]) in keep
    if "PySide6" in parts and DROP_FFMPEG.search("/".join(parts)):
        return False
    if not by_name and "/".join(parts).startswith("PySide6/Qt/lib/"):
        return True
    m = DROP_QT_LIBS.search("/".join(parts))
    return m is None or m.group(3) in KEEP_QT_LIBS


def elf_needed(path: str) -> list[str]:
    """The NEEDED sonames of an ELF file ([] for anything readelf cannot read)."""
    try:
        out = subprocess.run(
            ["readelf", "-d", path], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return []
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def prune_unneeded(binaries: list[tuple], *, needed=elf_needed) -> tuple[list[tuple], list[str]]:
    """Drop top-level shared libraries (dest without a folder) no kept binary needs.

    Roots are everything in a folder (Python extensions, Qt plugins, numpy.libs, …) and
    libpython; the walk follows NEEDED names to top-level libraries and to Qt's own
    libraries (PySide6/Qt/lib), which are pruned the same way. Returns (kept, dropped dests).
    """

    def prunable(dest: str) -> bool:
        p = dest.replace("\\", "/")
        return "/" not in p or p.startswith("PySide6/Qt/lib/")

    by_name: dict[str, tuple] = {}
    for entry in binaries:
        if prunable(entry[0]):
            by_name.setdefault(PurePath(entry[0]).name, entry)

    def root(entry: tuple) -> bool:
        name = PurePath(entry[0]).name
        return (
            not prunable(entry[0])
            or name.startswith("libpython")
            or (len(entry) > 2 and entry[2] == "EXTENSION")
            or ".cpython-" in name
            or ".abi3." in name
        )

    roots = [e for e in binaries if root(e)]
    reached: set[str] = set()
    todo = list(roots)
    while todo:
        entry = todo.pop()
        for name in needed(entry[1]):
            if name in by_name and name not in reached:
                reached.add(name)
                todo.append(by_name[name])
    kept, dropped = [], []
    for entry in binaries:
        name = PurePath(entry[0]).name
        if not root(entry) and name not in reached:
            dropped.append(entry[0])
        else:
            kept.append(entry)
    return kept, dropped
