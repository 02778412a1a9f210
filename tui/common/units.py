"""Byte counts and rates as people read them, in every front end and report alike."""

from __future__ import annotations


def format_bytes(size: float) -> str:
    """``512 B``, ``1.5 KiB``, ``3.2 MiB``, ``1.0 GiB`` (binary units, GiB at most)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_rate(per_sec: float) -> str:
    """Bytes per second: ``1.2 MiB/s``."""
    return format_bytes(per_sec) + "/s"


def short_bytes(size: float) -> str:
    """Bytes in at most 5 characters, as top: 512K, 1.2G."""
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if size >= 10 or unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}G"
