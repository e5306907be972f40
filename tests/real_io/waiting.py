"""Waiting in tests for a condition on real processes, bounded, written once."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.2) -> T:
    """``condition()``'s first true value within ``timeout_s``; AssertionError naming
    ``what`` when none comes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def wait_until(predicate: Callable[[], object], timeout_s: float = 30.0, poll_s: float = 0.2) -> bool:
    """Whether ``predicate()`` became true within ``timeout_s`` (its last answer after
    the deadline), for an ``assert`` that names what it waited for itself."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return bool(predicate())
