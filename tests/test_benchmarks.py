"""The benchmarks stay runnable: a short run of each, checked for what it must print
and for the floor it measures against. Their speed is recorded in docs/benchmarks.md,
never asserted here."""
import gc
import re
import subprocess
import sys
from pathlib import Path

from sim.world import collector_tuned_for_runs

ROOT = Path(__file__).resolve().parent.parent


def test_sim_speed_runs_and_reports_each_linger_with_its_floor():
    out = subprocess.run([sys.executable, "bench/sim_speed.py", "--seconds", "2", "--linger-ms", "50,100"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    rows = re.findall(r"^\s*(\d+) ms\s+([\d,]+)\s+([\d.]+)\s+([\d.]+) \((meets|below) 50\)\s+(\d+)", out, re.M)
    assert [int(r[0]) for r in rows] == [50, 100], out
    for linger, _requests, _wall, speed, verdict, floor in rows:
        assert float(speed) > 0 and int(floor) > 0
        assert (verdict == "meets") == (float(speed) >= 50)


def test_floor_acknowledges_what_it_offers():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from sim_floor import floor_run
    finally:
        sys.path.remove(str(ROOT / "bench"))
    result = floor_run(2, 100)
    # 5,000 records/s over 2 s, in 100 ms batches of 83 records on 6 partitions
    assert result["acknowledged"] == 20 * 6 * 83
    assert result["simulated_s"] >= 2


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
