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
