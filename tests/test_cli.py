"""The isrlab command as a user runs it."""
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
    for command in ("run",):
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
