"""The isrlab command as a user runs it."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def isrlab(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_help_on_every_command():
    top = isrlab("--help")
    assert top.returncode == 0 and "run" in top.stdout
    for command in ("run", "validate", "plot"):
        result = isrlab(command, "--help")
        assert result.returncode == 0 and "usage: isrlab " + command in result.stdout


def test_run_writes_a_trace_and_prints_the_summary(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        "cluster: {brokers: 3, topics: [{name: t, partitions: 1}]}\n"
        "workload: {producers: [{topic: t, acks: all, rate: 100}]}\n"
        "duration: 5s\n")
    result = isrlab("run", str(scenario), "--seed", "4", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "trace.jsonl").stat().st_size > 0
    lines = {line.split(":")[0].strip(): line.split(":")[-1].strip() for line in result.stdout.splitlines() if ":" in line}
    acked = int(lines["records acknowledged"])
    assert acked > 300 and int(lines["records read back"]) == acked
    assert lines["acknowledged but missing"] == "0"
    assert f"isrlab run {scenario} --seed 4" in result.stdout


def test_a_bad_file_exits_2_with_file_line_and_field_and_no_traceback(tmp_path):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("cluster:\n  brokers: 3\n  topics: [{name: t}]\nworkload:\n  producers:\n"
                        "    - {topic: t, acks: all}\nfaults:\n  - {at: 1s, crash: 4}\nduration: 5s\n")
    result = isrlab("run", str(scenario))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{scenario}:8: faults[0].crash: broker 4 does not exist" in result.stderr
    missing = isrlab("run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


TINY = ("cluster: {brokers: 3, topics: [{name: t, partitions: 1}]}\n"
        "workload: {producers: [{topic: t, acks: all, rate: 50}]}\n"
        "duration: 3s\n")


def test_validate_accepts_good_files_and_names_the_bad_ones(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(TINY)
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY + "expect: {lost_writes: many}\n")
    ok = isrlab("validate", str(good), str(ROOT / "scenarios/library/jepsen-2013.yaml"))
    assert ok.returncode == 0 and ok.stdout.count("ok  ") == 2
    mixed = isrlab("validate", str(good), str(bad))
    assert mixed.returncode == 2 and f"{bad}:4: expect.lost_writes" in mixed.stderr
    assert "Traceback" not in mixed.stderr


def test_an_expectation_that_fails_exits_1_and_prints_the_replay_command(tmp_path):
    scenario = tmp_path / "wrong.yaml"
    scenario.write_text(TINY + "expect: {lost_writes: '>0'}\n")
    result = isrlab("run", str(scenario), "--seed", "3", "--out", str(tmp_path / "o"), "--no-plot")
    assert result.returncode == 1
    assert "FAILED" in result.stdout and "outcome:   FAIL" in result.stdout
    assert f"isrlab run {scenario} --seed 3" in result.stdout
    verdict = json.loads((tmp_path / "o" / "verdict.json").read_text())
    assert verdict["results"]["lost_writes"]["value"] == 0


def test_many_seeds_print_a_table_and_replay_commands_for_failures(tmp_path):
    result = isrlab("run", str(ROOT / "scenarios/library/leader-crash.yaml"), "--seeds", "1-3",
                    "--out", str(tmp_path / "many"))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if len(line.split()) > 1 and line.split()[1] in ("PASS", "FAIL")]
    assert [row.split()[0] for row in rows] == ["1", "2", "3"]
    assert all("PASS" in row for row in rows)
    assert "3 of 3 seeds passed" in result.stdout
    assert sorted(p.name for p in (tmp_path / "many").iterdir()) == [
        "seed-1", "seed-2", "seed-3", "summary.csv", "summary.json"]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(TINY + "expect: {lost_writes: '>0'}\n")
    failing = isrlab("run", str(wrong), "--seeds", "4,6", "--out", str(tmp_path / "f"))
    assert failing.returncode == 1 and "0 of 2 seeds passed" in failing.stdout
    assert f"isrlab run {wrong} --seed 6 --out " in next(l for l in failing.stdout.splitlines() if "replay seed 6: " in l)
    assert (tmp_path / "f" / "seed-6" / "timeline-t-0.png").exists(), "a failing seed gets its timelines"
    assert not (tmp_path / "many" / "seed-1" / "timeline-t-0.png").exists()
    bad_range = isrlab("run", str(ROOT / "scenarios/library/leader-crash.yaml"), "--seeds", "5-2")
    assert bad_range.returncode == 2 and "ends before it starts" in bad_range.stderr


def test_seeds_run_in_parallel_give_the_same_table_and_traces_as_one_at_a_time(tmp_path):
    scenario = str(ROOT / "scenarios/library/leader-crash.yaml")
    serial = isrlab("run", scenario, "--seeds", "2-4", "--jobs", "1", "--keep", "all", "--out", str(tmp_path / "serial"))
    parallel = isrlab("run", scenario, "--seeds", "2-4", "--jobs", "2", "--keep", "all", "--out", str(tmp_path / "parallel"))
    assert serial.returncode == parallel.returncode == 0, serial.stderr + parallel.stderr
    assert "2 at once" in parallel.stderr
    table = serial.stdout.replace(str(tmp_path / "serial"), "OUT")
    assert table == parallel.stdout.replace(str(tmp_path / "parallel"), "OUT")
    for seed in (2, 3, 4):
        for name in ("trace.jsonl", "verdict.json"):
            assert (tmp_path / "serial" / f"seed-{seed}" / name).read_bytes() == \
                (tmp_path / "parallel" / f"seed-{seed}" / name).read_bytes()
    for bad in ("0", "-1", "two"):
        result = isrlab("run", scenario, "--seeds", "1-2", "--jobs", bad)
        assert result.returncode == 2 and "--jobs" in result.stderr and "Traceback" not in result.stderr


def test_plot_draws_an_existing_trace(tmp_path):
    scenario = tmp_path / "p.yaml"
    scenario.write_text(TINY)
    assert isrlab("run", str(scenario), "--out", str(tmp_path / "r"), "--no-plot").returncode == 0
    result = isrlab("plot", str(tmp_path / "r" / "trace.jsonl"), "--out", str(tmp_path / "pics"))
    assert result.returncode == 0
    png = tmp_path / "pics" / "timeline-t-0.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = isrlab("plot", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "no such trace" in missing.stderr
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    broken = isrlab("plot", str(garbage))
    assert broken.returncode == 2 and "garbage.jsonl:1" in broken.stderr and "Traceback" not in broken.stderr


TINY = ("cluster: {brokers: 1, topics: [{name: t, partitions: 1, replication_factor: 1}]}\n"
        "workload: {producers: [{topic: t, acks: 1, rate: 50}]}\nduration: 2s\n")


def test_version():
    result = isrlab("--version")
    assert result.returncode == 0 and result.stdout.startswith("isrlab ") and result.stdout.split()[1][0].isdigit()


def test_contradictory_or_repeated_seeds_and_a_file_as_out_exit_2_without_a_traceback(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    both = isrlab("run", str(scenario), "--seed", "3", "--seeds", "1-2")
    assert both.returncode == 2 and "--seed and --seeds" in both.stderr
    twice = isrlab("run", str(scenario), "--seeds", "1,1", "--out", str(tmp_path / "o"))
    assert twice.returncode == 2 and "seed 1 is listed more than once" in twice.stderr
    afile = tmp_path / "afile"
    afile.write_text("")
    out = isrlab("run", str(scenario), "--out", str(afile))
    assert out.returncode == 2 and "is a file, not a folder" in out.stderr
    assert all("Traceback" not in r.stderr for r in (both, twice, out))


def test_a_control_character_in_a_scenario_names_the_file_and_the_position(tmp_path):
    scenario = tmp_path / "nul.yaml"
    scenario.write_text("name: x\ncluster:\n  brokers: 3\x00\n")
    for command in ("run", "validate"):
        result = isrlab(command, str(scenario))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"{scenario}:3: column 13: the file holds the control character U+0000" in result.stderr


def test_the_printed_replay_command_works_pasted_in_a_fresh_shell_from_the_project_root(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    first = isrlab("run", str(scenario), "--seed", "5", "--out", str(tmp_path / "first"), "--no-plot")
    replay = next(line.split("replay:", 1)[1].strip() for line in first.stdout.splitlines() if "replay:" in line)
    assert f"--out {tmp_path / 'first'}" in replay
    (tmp_path / "first" / "trace.jsonl").rename(tmp_path / "trace-1.jsonl")
    again = subprocess.run(["/bin/sh", "-c", replay], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "first" / "trace.jsonl").read_bytes() == (tmp_path / "trace-1.jsonl").read_bytes()


def test_plot_of_an_empty_trace_or_one_without_partitions_exits_2(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = isrlab("plot", str(empty))
    assert result.returncode == 2 and "the trace is empty" in result.stderr
    lonely = tmp_path / "lonely.jsonl"
    lonely.write_text('{"schema_version":1,"run_id":"r","seed":1,"binding":"sim","t_ms":0,"node":"world",'
                      '"type":"run_started"}\n')
    result = isrlab("plot", str(lonely))
    assert result.returncode == 2 and "no partition to draw" in result.stderr and "Traceback" not in result.stderr


def test_a_sweep_summarises_itself_and_keeps_only_failing_traces(tmp_path):
    """Issue 10: summary.json and .csv with every metric, outcome and replay command per
    seed; min/median/max of every metric; traces kept for failing seeds only by default."""
    scenario = tmp_path / "half.yaml"  # lost_writes is 0 on every seed: expect >0 fails them all
    scenario.write_text(TINY + "expect: {lost_writes: '>0'}\n")
    result = isrlab("run", str(scenario), "--seeds", "1-2", "--out", str(tmp_path / "s"))
    assert result.returncode == 1
    rows = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert [(r["seed"], r["outcome"]) for r in rows] == [(1, "FAIL"), (2, "FAIL")]
    assert {"lost_writes", "acknowledged", "failed_but_present", "final_leader", "replay"} <= set(rows[0])
    assert "--seed 2 --out" in rows[1]["replay"]
    csv_lines = (tmp_path / "s" / "summary.csv").read_text().splitlines()
    assert csv_lines[0].startswith("seed,outcome,lost_writes") and len(csv_lines) == 3
    assert "metric" in result.stdout and "median" in result.stdout and "failed seeds: 1, 2" in result.stdout
    assert (tmp_path / "s" / "seed-1" / "trace.jsonl").exists(), "a failing seed keeps its trace"
    passing = tmp_path / "pass.yaml"
    passing.write_text(TINY)
    kept = isrlab("run", str(passing), "--seeds", "1-2", "--out", str(tmp_path / "p"))
    assert kept.returncode == 0
    assert sorted(p.name for p in (tmp_path / "p" / "seed-1").iterdir()) == ["verdict.json"]
    everything = isrlab("run", str(passing), "--seeds", "1", "--keep", "all", "--out", str(tmp_path / "a"))
    assert everything.returncode == 0 and (tmp_path / "a" / "seed-1" / "trace.jsonl").exists()
    nothing = isrlab("run", str(scenario), "--seeds", "1", "--keep", "none", "--out", str(tmp_path / "n"))
    assert nothing.returncode == 1 and sorted(p.name for p in (tmp_path / "n" / "seed-1").iterdir()) == ["verdict.json"]


def test_fail_fast_stops_at_the_first_failing_seed(tmp_path):
    scenario = tmp_path / "fails.yaml"
    scenario.write_text(TINY + "expect: {lost_writes: '>0'}\n")
    result = isrlab("run", str(scenario), "--seeds", "1-4", "--jobs", "1", "--fail-fast", "--out", str(tmp_path / "f"))
    assert result.returncode == 1
    assert "0 of 1 seeds passed (3 not run: --fail-fast)" in result.stdout
    assert len(json.loads((tmp_path / "f" / "summary.json").read_text())) == 1
