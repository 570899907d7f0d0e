"""Render resources/icons/cantor.svg into the PNG sizes, a Windows .ico and a macOS .icns.

Run after changing the SVG:  .venv/bin/python packaging/make_icons.py
The outputs are committed, so building on Windows or macOS needs no extra tool. ICO and
ICNS files are written by hand here: both formats can hold plain PNG images.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types that hold PNG data, by pixel size
ICNS_TYPES = {
    16: b"icp4",
    32: b"icp5",
    64: b"icp6",
    128: b"ic07",
    256: b"ic08",
    512: b"ic09",
    1024: b"ic10",
}


def render_png(svg: Path, size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"make_icons: {svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format_ARGB32)
    image.fill(Qt.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    image.save(buf, "PNG")
    buf.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """ICONDIR + one ICONDIRENTRY per size, each image stored as PNG."""
    sizes = sorted(pngs)
    out = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    body = b""
    for s in sizes:
        data = pngs[s]
        dim = 0 if s >= 256 else s  # 0 means 256 in the ICO directory
        out += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
        body += data
    return out + body


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    elements = b"".join(
        ICNS_TYPES[s] + struct.pack(">I", 8 + len(pngs[s])) + pngs[s]
        for s in sorted(pngs)
        if s in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(elements)) + elements


def main() -> int:
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841
    svg = ICONS / "cantor.svg"
    pngs = {s: render_png(svg, s) for s in sorted(set(PNG_SIZES) | set(ICNS_TYPES))}
    for s in PNG_SIZES:
        (ICONS / f"cantor-{s}.png").write_bytes(pngs[s])
    (ICONS / "cantor.ico").write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    (ICONS / "cantor.icns").write_bytes(icns_bytes(pngs))
    print(f"make_icons: wrote {len(PNG_SIZES)} PNGs, cantor.ico and cantor.icns in {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
