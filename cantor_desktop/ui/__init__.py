"""The Qt shell. Nothing outside this package imports Qt."""
