"""The Qt shell. Nothing outside this package imports Qt."""

from . import pyside_scan

pyside_scan.install()  # before any page's imports: see pyside_scan
