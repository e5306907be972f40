"""The benchmarks stay runnable: a short run of each, checked for what it must print
and for the floor it measures against. Their speed is recorded in docs/benchmarks.md,
never asserted here."""
import gc
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.world import collector_tuned_for_runs

ROOT = Path(__file__).resolve().parent.parent


def speed_rows(out: str) -> list[tuple[str, ...]]:
    """(partitioner, linger, requests/s, wall, speed, floor, cpu ratio, verdict, wall ratio)
    of each interpreted row of sim_speed's table (tests/test_compiled.py reads the compiled ones)."""
    return re.findall(r"^(\w+)\s+(\d+) ms\s+interpreted\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) "
                      r"\((meets|above) 2.5\)\s+([\d.]+)", out, re.M)


@pytest.mark.slow
def test_sim_speed_runs_each_partitioner_with_its_floor_and_the_sweep_figures():
    out = subprocess.run([sys.executable, "bench/sim_speed.py", "--seconds", "2", "--linger-ms", "50,100",
                          "--sweep-seeds", "1", "--compiled", "off"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = speed_rows(out)
    assert [(r[0], int(r[1])) for r in rows] == [
        ("round_robin", 50), ("round_robin", 100), ("sticky", 50), ("sticky", 100)], out
    assert "compiled runs: off" in out
    for _partitioner, _linger, _requests, _wall, speed, floor, cpu_ratio, verdict, wall_ratio in rows:
        assert float(speed) > 0 and float(floor) > 0 and float(cpu_ratio) > 0
        assert abs(float(wall_ratio) - float(floor) / float(speed)) < 0.02 * float(wall_ratio) + 0.01
        assert (verdict == "meets") == (float(cpu_ratio) <= 2.5)
    # sticky: one request per 50 ms tick (20/s); round-robin: one per broker per tick (60/s,
    # a few less while the producer learns the leaders)
    requests = {(r[0], int(r[1])): int(r[2].replace(",", "")) for r in rows}
    assert requests[("sticky", 50)] == 20 and 50 <= requests[("round_robin", 50)] <= 60, out
    sweep = re.search(r"nemesis-safe seeds per wall minute: ([\d.]+) with one worker \(1 seeds\), "
                      r"([\d.]+) with --jobs (\d+)", out)
    assert sweep and float(sweep[1]) > 0 and float(sweep[2]) > 0, out
    memory = re.search(r"peak memory .*: (\d+) MB for one benchmark run \(sticky, 50 ms\), (\d+) MB for one "
                       r"nemesis-safe seed", out)
    assert memory and int(memory[1]) > 10 and int(memory[2]) > 10, out


def test_sim_speed_refuses_bad_options_with_a_message():
    for options, message in ((["--partitioner", "hash"], "round_robin, sticky"), (["--repeat", "0"], "--repeat"),
                             (["--linger-ms", "ten"], "--linger-ms")):
        done = subprocess.run([sys.executable, "bench/sim_speed.py", *options],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, options


def floor_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import sim_floor
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return sim_floor


def test_floor_acknowledges_what_it_offers():
    result = floor_module().floor_run(2, 100)
    # 5,000 records/s over 2 s, in 100 ms batches of 83 records on 6 partitions
    assert result["acknowledged"] == 20 * 6 * 83
    assert result["requests"] == 20 * 3  # round-robin: one request per broker per tick
    assert result["simulated_s"] >= 2


def test_sticky_floor_sends_one_request_per_tick_to_a_new_partition():
    sim_floor = floor_module()
    result = sim_floor.floor_run(2, 100, partitioner="sticky")
    assert result["acknowledged"] == 20 * 500  # every record of a tick in one batch
    assert result["requests"] == 20
    sticky = sim_floor.StickyPartitioner(sim_floor.random.Random(2))
    ticks = [sim_floor.tick_batches("sticky", 10, sticky) for _ in range(50)]
    assert all(len(t) == 1 and t[0][1] == 50 for t in ticks)
    chosen = [t[0][0] for t in ticks]
    assert all(a != b for a, b in zip(chosen, chosen[1:]))  # a new batch moves to another partition
    assert set(chosen) == set(range(sim_floor.PARTITIONS))


def test_collector_setting_is_restored_after_a_run():
    before = gc.get_threshold()
    with collector_tuned_for_runs():
        assert gc.get_threshold()[0] == 100_000
    assert gc.get_threshold() == before
    try:
        with collector_tuned_for_runs():
            raise RuntimeError("a run that fails")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before


def test_the_end_of_a_run_starts_no_collection_and_leaves_its_objects_old():
    """Restoring the default threshold after a run used to start a pass over every
    object the run made, at once, inside the timed run (bench/sim_speed.py): the run's
    objects are moved to the oldest generation instead, unscanned."""
    passes = []
    record = lambda phase, info: passes.append(info["generation"]) if phase == "start" else None  # noqa: E731
    gc.collect()
    gc.callbacks.append(record)
    try:
        with collector_tuned_for_runs():
            made = [[i] for i in range(20_000)]  # what a run leaves behind, still in use
        after = [[i] for i in range(gc.get_threshold()[0] // 2)]  # the old code's count started a pass here
        assert passes == []
        assert gc.get_count()[0] < gc.get_threshold()[0]
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(o) in oldest for o in made[::1000])
    finally:
        gc.callbacks.remove(record)
    del made, after


def test_the_end_of_a_run_leaves_what_its_caller_froze_frozen():
    """gc.unfreeze releases every frozen object: a caller's frozen ones are left alone
    (the run's end then starts the pass the restored threshold asks for)."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_tuned_for_runs():
            made = [[i] for i in range(2_000)]
        # not released (unfreeze would leave 0) and the run's objects not added; a frozen
        # object another thread drops meanwhile leaves the count (seen: 2 of 254,980)
        assert frozen // 2 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
    del made


def test_peak_memory_is_the_childs_own_not_the_parents():
    """A forked child inherits its parent's ru_maxrss across exec on Linux; the benchmark
    must report what the child itself reached."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import sim_speed
    finally:
        sys.path.remove(str(ROOT / "bench"))
    ballast = b"\x01" * 150_000_000  # the parent is large when it starts the child
    assert sim_speed.peak_memory_mb("pass") < 100
    assert sim_speed.peak_memory_mb("x = b'\\x01' * 120_000_000") > 110
    del ballast


def cluster_bench_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import cluster_throughput
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return cluster_throughput


def test_simulated_failover_times_the_crash_to_the_first_write_on_the_new_leader(tmp_path):
    """The scenario's leader (broker 2, not the controller) crashes at 10 s; with 6 s
    sessions the controller can elect only once the session has expired (the client
    pings every third of the timeout: at least 4 s after the crash), and the first write
    acknowledged after it is later still."""
    run = cluster_bench_module().sim_failover(1, 6000, tmp_path)
    assert run["killed"] == 2 and not run["was_controller"] and run["new_leader"] in (1, 3), run
    assert run["epoch"] == 1
    assert 4.0 <= run["expired_s"] <= run["elected_s"] < 6.5, run
    assert run["elected_s"] < run["failover_s"] < run["elected_s"] + 3, run


def test_cluster_floor_writes_every_byte_to_all_three_replicas():
    """The floor moves the bytes a replicated log must: each partition's chunks land in
    the files of all three brokers (about 3 s: three spawned processes)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import cluster_floor
    finally:
        sys.path.remove(str(ROOT / "bench"))
    r = cluster_floor.floor_throughput(8, request_bytes=200_000)
    per_partition = r["floor_bytes"] // cluster_floor.PARTITIONS
    assert per_partition > 0 and r["floor_produce_s"] > 0 and r["floor_brokers_cpu_s"] > 0
    assert r["floor_stored"] == {b: dict.fromkeys(range(cluster_floor.PARTITIONS), per_partition)
                                 for b in range(cluster_floor.BROKERS)}


def test_cluster_bench_refuses_bad_options_with_a_message():
    for options, message in ((["--session-timeout-ms", "500"], "2 to 20 ticks"), (["--failovers", "-1"], "not negative")):
        done = subprocess.run([sys.executable, "bench/cluster_throughput.py", *options],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, options


@pytest.mark.slow
def test_cluster_bench_measures_a_real_cluster_the_mock_and_a_failover():
    """A short run of everything: 2 MiB through three real brokers and the mock, one
    kill -9 of a leader and one simulated crash (about 20 s)."""
    out = subprocess.run([sys.executable, "bench/cluster_throughput.py", "--records-mb", "2", "--failovers", "1",
                          "--sim-seeds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    row = re.search(r"^\| 10240 B \| 204 \|(.*)\|$", out, re.M)
    assert row, out
    # produce MB/s of ours (with records/s), the floor and the mock (with records/s); ours / mock,
    # floor / mock, ours / floor; the brokers' CPU per GB (ours, floor); consume MB/s of ours and
    # the mock, their ratio; peak RSS
    cells = [c.strip().strip("*") for c in row[1].split("|")]
    assert len(cells) == 11, out
    assert all(float(c.split()[0]) > 0 for c in cells[:6] + cells[7:10]), out
    assert re.fullmatch(r"[\d.]+, [\d.]+", cells[6]), out
    assert re.fullmatch(r"\d+, \d+, \d+ MiB", cells[10]), out
    real = re.search(r"^\| real 1 \| ([\d.]+) s \| ([\d.]+) s \| (\d) -> (\d) \(\d+\) \|", out, re.M)
    assert real and 3.0 < float(real[1]) < float(real[2]) < 60 and real[3] != real[4], out
    assert re.search(r"^\| simulated 1 \| 4\.1\d s \| [\d.]+ s \| 2 -> [13] \(1\) \|", out, re.M), out


@pytest.mark.slow
def test_cleaner_bench_cleans_both_storages_and_measures_the_quota_overhead(tmp_path):
    """A tiny run: both storages cleaned down to one record per key (the script checks
    each key's last value itself), both bindings produced to with and without a quota
    that never throttles, and the section written into a copy of a markdown file."""
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    out = subprocess.run([sys.executable, "bench/cleaner_speed.py", "--records", "50000", "--keys", "500",
                          "--quota-seconds", "2", "--quota-records", "2000", "--repeat", "1", "--write", str(doc)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    cleaned = re.findall(r"^\| (simulation|real files) \| ([\d,]+) \| (\d+) \| ([\d,]+) \| ([\d,]+) \| (\d+) \| "
                         r"(\d+) \| ([\d.]+) \| ([\d,]+) \|$", out, re.M)
    assert [row[0] for row in cleaned] == ["simulation", "real files"], out
    for _storage, _written, segments, records, kept, steps, _groups, _seconds, rate in cleaned:
        # 50,000 records of ~35 B in 1 MiB segments: one sealed segment or two, the rest active
        assert int(segments) >= 2 and 0 < int(records.replace(",", "")) < 50000
        assert int(kept.replace(",", "")) == 500 and int(steps) >= int(records.replace(",", "")) // 1000
        assert int(rate.replace(",", "")) > 0
    assert re.search(r"^real files / simulation: [\d.]+ \(the simulation.s storage cleans \d+ times faster\)$", out, re.M), out
    quotas = re.findall(r"^\| (simulation|isrlab serve) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \| ([\d,]+) \| "
                        r"([\d,]+) \| ([\d.]+) \| ([\d,]+) \|$", out, re.M)
    assert [row[0] for row in quotas] == ["simulation", "isrlab serve"], out
    for _binding, without, with_quota, ratio, cpu_without, cpu_with, cpu_ratio, recorded in quotas:
        assert int(recorded.replace(",", "")) > 0
        for a, b, r in ((with_quota, without, ratio), (cpu_with, cpu_without, cpu_ratio)):
            assert int(b.replace(",", "")) > 0
            assert abs(float(r) - int(a.replace(",", "")) / int(b.replace(",", ""))) < 0.01
    text = doc.read_text()
    assert text.index("## Another section") < text.index("## Log cleaner and quota overhead")
    assert "Command: `.venv/bin/python bench/cleaner_speed.py --records 50000" in text and "kept\n" in text


def test_cleaner_bench_refuses_bad_options_with_a_message():
    for options, message in ((["--keys", "0"], "--keys"), (["--records", "10", "--keys", "20"], "--keys"),
                             (["--quota-seconds", "0"], "--quota-seconds"), (["--repeat", "0"], "--repeat")):
        done = subprocess.run([sys.executable, "bench/cleaner_speed.py", *options],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, options


@pytest.mark.slow
def test_explore_speed_finds_the_jepsen_loss_and_writes_its_section(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Explorer speed (issue 23)\n\nold\n\n## Next\n\nkept\n")
    out = subprocess.run([sys.executable, "bench/explore_speed.py", "--throughput-runs", "1", "--shrink-runs", "2",
                          "--cases", "1", "--write", str(doc)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900, check=True).stdout
    row = re.search(r"^\| Jepsen 2013, unclean \| lost_writes \| 3 \(3\) \| ([\d.]+) s \| ([\d.]+) s \(([\d.]+) s\) "
                    r"\| 2 \| (\d+) faults, 3 brokers", out, re.M)
    assert row and 0 < float(row[1]) <= float(row[2]) and float(row[3]) > 0, out
    assert re.search(r"Jepsen 2013 loss found and shrunk in [\d.]+ s: (met|not met) \(target under 60 s\)", out)
    assert re.search(r"^\| search, `--jobs 1` \| 1 \| [\d.]+ \| [\d.]+ \|$", out, re.M), out
    assert re.search(r"^\| search, `--jobs 2` \| 1 \| [\d.]+ \| [\d.]+ \|$", out, re.M), out
    text = doc.read_text()
    assert "old" not in text and text.endswith("## Next\n\nkept\n") and "Command: `.venv/bin/python bench/" in text
    assert "| Jepsen 2013, unclean | lost_writes | 3 (3) |" in text
