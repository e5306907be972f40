"""Replica digests: what a replica holds below the committed offset, as digests of
fixed chunks of offsets (docs/trace-schema.md, ``replica_log``). Both bindings write
them with these functions, so that the divergence checker compares like with like."""
from __future__ import annotations

import hashlib
import json
from typing import Iterable, NamedTuple, Sequence

from broker_core.cleaned_batch import CleanedBatch
from broker_core.segment_format import is_plain_json_text

REPLICA_DIGEST_CHUNK = 100


ABSENT = "<absent>"
_digest_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def _chunk_json(block: list) -> str:
    """``_digest_json(block)`` for a chunk: its first offset, then its values. Values
    that JSON writes as they are (printable ASCII, no quote nor backslash: every value
    the workloads write, and ABSENT) are joined directly, which is several times faster
    than the encoder; anything else (a null, a string JSON escapes) goes through it."""
    values = block[1:]
    try:
        plain = "".join(values)
    except TypeError:  # a null (a tombstone)
        return _digest_json(block)
    if not is_plain_json_text(plain):
        return _digest_json(block)
    return '[%d,"%s"]' % (block[0], '","'.join(values)) if values else "[%d]" % block[0]


def replica_digests(batches, start: int, upto: int, memo: dict | None = None) -> list[list]:
    """[[first_offset, digest], ...] over offsets [start, upto) in chunks aligned to
    multiples of REPLICA_DIGEST_CHUNK. A chunk's digest hashes the JSON array of its
    first offset and then each offset's value, ABSENT where the replica has none
    (docs/trace-schema.md has the recipe).

    ``memo`` (one dict shared while every batch in it is alive) reuses the digest of a
    chunk made of the very same batch objects: in the simulation followers store the
    batches the leader sent, so most replicas' chunks are computed once."""
    batches = [b for b in batches if b.next_offset > start and b.base_offset < upto]  # in offset order
    # A replica holding the very same batches as one digested before (every follower
    # that caught up, in the simulation) gets its digests whole.
    whole = ("replica", start, upto, tuple(map(id, batches))) if memo is not None else None
    if memo is not None:
        known = memo.get(whole)
        if known is not None:
            return [list(chunk) for chunk in known]
    out = []
    index = 0
    first = start - start % REPLICA_DIGEST_CHUNK
    while first < upto:
        low, high = max(first, start), min(first + REPLICA_DIGEST_CHUNK, upto)
        while index < len(batches) and batches[index].next_offset <= low:
            index += 1
        end = index
        while end < len(batches) and batches[end].base_offset < high:
            end += 1
        key = (low, high, tuple(map(id, batches[index:end])))
        digest = memo.get(key) if memo is not None else None
        if digest is None:
            block: list = [low]
            for batch in batches[index:end]:
                if type(batch) is CleanedBatch:
                    _extend_cleaned(block, batch, low, high)
                    continue
                lo, hi = max(batch.base_offset, low), min(batch.next_offset, high)
                block.extend([ABSENT] * (lo - low - (len(block) - 1)))
                block.extend(batch.records.values[lo - batch.base_offset:hi - batch.base_offset])
            block.extend([ABSENT] * (high - low - (len(block) - 1)))
            digest = hashlib.sha256(_chunk_json(block).encode()).hexdigest()[:16]
            if memo is not None:
                memo[key] = digest
        out.append([first, digest])
        first += REPLICA_DIGEST_CHUNK
    if memo is not None:
        memo[whole] = [list(chunk) for chunk in out]
    return out


def _extend_cleaned(block: list, batch: CleanedBatch, low: int, high: int) -> None:
    """A cleaned batch's records keep their offsets, with gaps between them (ABSENT)."""
    for offset, value in zip(batch.offsets, batch.records.values):
        if low <= offset < high:
            block.extend([ABSENT] * (offset - low - (len(block) - 1)))
            block.append(value)


class _Values(NamedTuple):
    values: list


class _Run(NamedTuple):
    """Consecutive records shaped as a batch (base_offset, next_offset, records.values)."""
    base_offset: int
    next_offset: int
    records: _Values


def record_digests(records: Sequence[tuple[int, object]], start: int, upto: int) -> list[list]:
    """``replica_digests`` of a replica read record by record: ``records`` are
    ``(offset, value)`` in offset order (a gap is an offset the replica does not hold)."""
    runs: list[_Run] = []
    for offset, value in records:
        if runs and runs[-1].next_offset == offset:
            last = runs[-1]
            last.records.values.append(value)
            runs[-1] = last._replace(next_offset=offset + 1)
        else:
            runs.append(_Run(offset, offset + 1, _Values([value])))
    return replica_digests(runs, start, upto)


def key_map_digest(records: Iterable[tuple[str | None, str | None]]) -> tuple[str, int]:
    """``(digest, keys)`` of the key -> value map a compacted replica stands for:
    ``records`` are ``(key, value)`` in offset order; the last record of a key wins and a
    tombstone (value None) removes the key, so that replicas that compacted differently
    (each cleans on its own, and one may still hold a tombstone another removed) compare
    equal when they mean the same map. Keyless records are left out. The digest is the
    first 16 hex characters of the SHA-256 of the compact JSON list of ``[key, value]``
    sorted by key (docs/trace-schema.md, ``replica_log``)."""
    latest: dict[str, str | None] = {}
    for key, value in records:
        if key is not None:
            latest[key] = value
    pairs = [[key, latest[key]] for key in sorted(latest) if latest[key] is not None]
    return hashlib.sha256(_digest_json(pairs).encode()).hexdigest()[:16], len(pairs)


def batch_key_values(batches, start: int, upto: int) -> list[tuple[str | None, str | None]]:
    """``(key, value)`` of the records of ``batches`` at offsets [start, upto), in order.
    A cleaned batch (broker_core/cleaned_batch.py) lists its records' offsets."""
    out: list[tuple[str | None, str | None]] = []
    for batch in batches:
        low, high = max(batch.base_offset, start), min(batch.next_offset, upto)
        if high <= low:
            continue
        offsets = getattr(batch, "offsets", None)
        if offsets is not None:
            keys = batch.records.keys or (None,) * len(offsets)
            out.extend((k, v) for o, k, v in zip(offsets, keys, batch.records.values) if low <= o < high)
            continue
        values = batch.records.values[low - batch.base_offset:high - batch.base_offset]
        keys = batch.records.keys
        out.extend(zip(keys[low - batch.base_offset:high - batch.base_offset] if keys is not None
                       else [None] * len(values), values))
    return out
