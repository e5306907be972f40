"""BytesLogStorage keeps the batch objects written, by position, so that a region
resolves to the very objects written; anything it does not hold is decoded from the
bytes."""
import random

from broker_core.effects import TruncateFile, WriteBytes
from broker_core.records import RecordBatch, Records
from broker_core.segment_format import encode_batch, encoded_size, stored_bytes
from broker_core.storage import BytesLogStorage, FileRegion, MemoryFiles


def batch(base: int, count: int) -> RecordBatch:
    return RecordBatch(base, 0, Records([f"v{base + i}" for i in range(count)]))


def test_a_region_resolves_to_the_objects_written_even_after_rewrites_at_other_boundaries():
    """A truncation and a rewrite with batches of other sizes leaves objects kept at
    positions no batch starts at any more; a region still resolves, batch by batch, to
    the objects written at the positions it walks, like a lookup by position."""
    rng = random.Random(7)
    files = MemoryFiles()
    live: list[tuple[int, RecordBatch, int]] = []  # (position, batch, end) of the file's batches now
    position, base = 0, 0
    for step in range(300):
        if rng.random() < 0.1 and live:
            cut = rng.randrange(len(live))  # truncate to a batch start
            files.apply(TruncateFile("f", live[cut][0]))
            position, base = live[cut][0], live[cut][1].base_offset
            del live[cut:]
            continue
        new = batch(base, rng.randrange(1, 5))
        files.apply(WriteBytes("f", position, stored_bytes(new), new))
        live.append((position, new, position + encoded_size(new)))
        position, base = live[-1][2], new.next_offset
    for first in range(0, len(live), 7):
        start = live[first][0]
        got = files.storage.batches_in(FileRegion("f", start, position - start))
        assert [id(b) for b in got] == [id(b) for _, b, _ in live[first:]]
        assert files.storage.header_at("f", start) == (live[first][1], live[first][2])


def test_what_it_does_not_hold_is_decoded_and_kept():
    data = bytearray()
    batches = [batch(0, 2), batch(2, 3), batch(5, 1)]
    for b in batches:
        data += encode_batch(b)
    storage = BytesLogStorage({"f": data}.get, lambda: ["f"])
    got = storage.batches_in(FileRegion("f", 0, len(data)))
    assert got == tuple(batches)
    assert storage.batches_in(FileRegion("f", 0, len(data)))[1] is got[1]  # kept once decoded
