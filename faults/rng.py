"""Random streams derived from one seed by label: adding a stream shifts no other. Both
bindings draw their seeded choices (nemesis, roles, partitioners) from these."""
from __future__ import annotations

import hashlib
import random


def derive(seed: int, label: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}/{label}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
