"""What every ``isrlab`` command shares: the exit statuses, the error for bad input, and
the parsers of argument values. ``cli.py`` and ``spark_commands.py`` both import it, so
neither needs the other's names (they once imported each other)."""
from __future__ import annotations

import argparse
import re

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    pass


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def parse_seeds(text: str) -> list[int]:
    """``7``, ``1-200`` or ``1,5,9-12``."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise UsageError(f"--seeds: {text!r} is not a seed list such as 7, 1-200 or 1,5,9-12")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            raise UsageError(f"--seeds: {part.strip()!r} ends before it starts")
        seeds.extend(range(first, last + 1))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise UsageError(f"--seeds: seed {', '.join(map(str, repeated))} is listed more than once "
                         "(each seed runs once, into its own folder)")
    return seeds
