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


def port_number(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def config_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of a ``--config`` option."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


def config_value(text: str):
    """A config value as the core takes it: true/false, a whole number, a decimal
    number (a DOUBLE key such as log.cleaner.min.cleanable.ratio), or the text."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text) if "." in text else text
    except ValueError:
        return text
