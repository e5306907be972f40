"""What the lossy file system (real_io/lossy_fs.py) costs: appends through the mount
against the same appends to a plain directory on the same disk, in one run.

    .venv/bin/python bench/lossy_fs_speed.py [--megabytes 64] [--broker-mb 20]

File level: the broker's own write path (real_io.files.DataDir.write, then DataDir.fsync)
appending ``--megabytes`` MiB to one segment in chunks of 16 KiB (a produce batch) and
of 1 MiB, without fsync and with an fsync after every MiB. Broker level (skipped with
``--broker-mb 0``): ``isrlab serve`` with its data directory on each, producing and then
consuming ``--broker-mb`` MiB of 10 KiB records (bench/broker_throughput.py's client
settings). Prints MB/s of each and the ratio mount / plain.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from real_io.files import DataDir  # noqa: E402
from real_io.lossy_mount import available, mount  # noqa: E402

CHUNKS = (16 * 1024, 1024 * 1024)
SYNC_EVERY = 1024 * 1024


def append_rate(directory: Path, total: int, chunk: int, sync: bool) -> float:
    """MB/s of ``total`` bytes appended to a fresh segment ``chunk`` bytes at a time."""
    data_dir = DataDir(directory)
    path, payload = f"bench-{chunk}-{int(sync)}/00000000000000000000.log", os.urandom(chunk)
    start, position, unsynced = time.perf_counter(), 0, 0
    while position < total:
        data_dir.write(path, position, payload)
        position += chunk
        unsynced += chunk
        if sync and unsynced >= SYNC_EVERY:
            data_dir.fsync(path)
            unsynced = 0
    elapsed = time.perf_counter() - start
    data_dir.delete(path)
    data_dir.close()
    return position / 1e6 / elapsed


def broker_rates(directory: Path, megabytes: float) -> tuple[float, float]:
    """Produce and consume MB/s of ``isrlab serve`` with its data in ``directory``."""
    import broker_throughput as bt
    size, partitions = 10240, 4
    count = int(megabytes * 1024 * 1024 / size)
    process, bootstrap = bt.start_broker(directory, partitions)
    try:
        bt.create_topic(bootstrap, partitions)
        produce_s = bt.produce({"bootstrap.servers": bootstrap}, count, size, partitions)
        consume_s, read, _ = bt.consume(bootstrap, partitions)
        if read != count:
            raise SystemExit(f"read back {read} of {count} records")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    return size * count / 1e6 / produce_s, size * count / 1e6 / consume_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=64, help="MiB appended per file-level case")
    parser.add_argument("--broker-mb", type=float, default=20.0, help="MiB produced in the broker case (0: skip)")
    args = parser.parse_args(argv)
    reason = available()
    if reason is not None:
        raise SystemExit(f"cannot measure: {reason}")
    total = args.megabytes * 1024 * 1024
    rows = []
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        plain, backing, mounted = Path(tmp, "plain"), Path(tmp, "backing"), Path(tmp, "mnt")
        plain.mkdir()
        with mount(backing, mounted) as fs:
            for chunk in CHUNKS:
                for sync in (False, True):
                    case = f"append {chunk // 1024} KiB chunks" + (", fsync every MiB" if sync else "")
                    rows.append((case, append_rate(plain, total, chunk, sync), append_rate(mounted, total, chunk, sync)))
            if args.broker_mb:
                plain_rates = broker_rates(plain / "broker", args.broker_mb)
                mount_rates = broker_rates(mounted / "broker", args.broker_mb)
                rows.append(("isrlab serve produce, 10 KiB records", plain_rates[0], mount_rates[0]))
                rows.append(("isrlab serve consume, 10 KiB records", plain_rates[1], mount_rates[1]))
            fs.power_loss()  # the broker is stopped: whatever it left unsynced goes too
    print("| case | plain MB/s | lossy mount MB/s | mount / plain |")
    print("| --- | --- | --- | --- |")
    for case, plain_rate, mount_rate in rows:
        print(f"| {case} | {plain_rate:.0f} | {mount_rate:.0f} | {mount_rate / plain_rate:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
