"""Sizes as people read them. No dependencies: the app imports it before its first paint."""


def human_size(n: float) -> str:
    """Binary units named as such (512 B, 5.3 GiB): the CLI and the app show the same text."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
