"""Damage an index file the three ways recovery must survive (tests of the offset index
and the time index share them)."""
from __future__ import annotations

from pathlib import Path

DAMAGES = ["deleted", "truncated", "garbage"]


def damage(path: Path, how: str) -> bytes:
    """Delete ``path``, cut its last 5 bytes, or overwrite it with garbage of its
    length; the good bytes it held."""
    good = path.read_bytes()
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(good[:-5])
    else:
        path.write_bytes(b"\x7f" * len(good))
    return good
