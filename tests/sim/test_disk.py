import simpy

from sim.disk import SimDisk


def run(env, ms=100):
    env.run(until=env.now + ms)


def test_power_loss_drops_unsynced_bytes_and_a_crash_keeps_them():
    env = simpy.Environment()
    disk = SimDisk(env, fsync_ms=1)
    disk.write("f", 0, b"durable")
    done = []
    disk.fsync("f", lambda: done.append(True))
    run(env)
    assert done == [True]
    disk.write("f", 7, b"-volatile")
    disk.write("g", 0, b"never synced")
    assert disk.contents() == {"f": b"durable-volatile", "g": b"never synced"}  # what a crashed process finds
    disk.power_loss()
    assert disk.contents() == {"f": b"durable"}


def test_truncation_is_not_durable_until_synced():
    env = simpy.Environment()
    disk = SimDisk(env, fsync_ms=1)
    disk.write("f", 0, b"abcdef")
    disk.fsync("f", lambda: None)
    run(env)
    disk.truncate("f", 2)
    disk.power_loss()
    assert disk.contents() == {"f": b"abcdef"}


def test_fsync_in_flight_at_power_loss_does_not_complete():
    env = simpy.Environment()
    disk = SimDisk(env, fsync_ms=50)
    disk.write("f", 0, b"x")
    done = []
    disk.fsync("f", lambda: done.append(True))
    run(env, 10)
    disk.power_loss()
    run(env)
    assert done == [] and disk.contents() == {}


def test_replace_is_atomic_and_durable_and_writeback_syncs_everything():
    env = simpy.Environment()
    disk = SimDisk(env)
    disk.replace("checkpoint", b"v1")
    disk.write("log", 0, b"data")
    disk.sync_all()
    disk.write("log", 4, b"more")
    disk.power_loss()
    assert disk.contents() == {"checkpoint": b"v1", "log": b"data"}
    assert disk.unsynced_bytes() == 0


def test_batches_written_unencoded_give_the_bytes_an_eager_write_gives():
    """The log writes its batches as BatchBytes (encoded when first read); whatever
    happens to the files after (fsyncs, writeback, truncations, overwrites, bit flips,
    power losses with torn writes), the disk's bytes and its random draws are those of
    the same writes made with the encoded bytes."""
    import random

    from broker_core.records import RecordBatch, Records
    from broker_core.segment_format import encode_batch, stored_bytes

    def drive(lazy: bool, seed: int):
        env = simpy.Environment()
        disk = SimDisk(env, fsync_ms=1, rng=random.Random(seed))
        ops = random.Random(seed + 1)
        seen = []
        for step in range(200):
            path = ops.choice(["a", "b"])
            size = disk.files[path].size if path in disk.files else 0
            op = ops.randrange(10)
            if op < 5:
                batch = RecordBatch(step, 0, Records([f"v{step}:{i}" for i in range(ops.randrange(1, 4))]))
                disk.write(path, size, stored_bytes(batch) if lazy else encode_batch(batch))
            elif op == 5:
                disk.write(path, ops.randrange(size + 3), b"raw")
            elif op == 6:
                disk.truncate(path, ops.randrange(size + 1))
            elif op == 7:
                disk.fsync(path, lambda: None)
                run(env, 5)
            elif op == 8:
                disk.sync_all() if ops.random() < 0.5 else disk.flip_bit(path)
            else:
                disk.torn_writes = ops.random() < 0.7
                disk.power_loss()
            seen.append((disk.contents(), disk.unsynced_bytes(), disk.rng.random()))
        return seen

    for seed in range(5):
        assert drive(True, seed) == drive(False, seed)


def test_a_batch_written_unencoded_leaves_no_bytes_object_behind():
    """The disk keeps a pending batch as the RecordBatch (which the storage port holds
    anyway), not as the BatchBytes that carried it: one long-lived object fewer per
    replica and batch for the cyclic collector to scan."""
    import gc

    from broker_core.records import RecordBatch, Records
    from broker_core.segment_format import BatchBytes, encode_batch, stored_bytes

    disk = SimDisk(simpy.Environment())
    batches = [RecordBatch(i, 0, Records([f"v{i}"])) for i in range(3)]
    position = 0
    for batch in batches:
        disk.write("log", position, stored_bytes(batch))
        position = disk.files["log"].size
    mine = {id(b) for b in batches}
    assert not [o for o in gc.get_objects() if type(o) is BatchBytes and id(o.batch) in mine]
    assert disk.contents() == {"log": b"".join(encode_batch(b) for b in batches)}
