"""Issue 10: one file for a bug and its fix (variants), and --set overrides."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.parse import parse_scenario
from scenarios.source import ScenarioError

ROOT = Path(__file__).resolve().parents[2]
FILE = """\
name: pair
cluster:
  brokers: 3
  config: {min.insync.replicas: 1}
  topics: [{name: t, partitions: 1}]
workload:
  producers: [{topic: t, acks: all, rate: 50}]
duration: 3s
expect: {lost_writes: 0}
variants:
  old:
    cluster: {profile: kafka-0.8}
  strict:
    cluster: {config: {unclean.leader.election.enable: false}}
    workload: {producers: [{topic: t, acks: 1, rate: 20}]}
    expect: {acknowledged: ">0"}
"""


def test_variants_merge_mappings_replace_lists_and_expectations():
    base = parse_scenario(FILE, "pair.yaml")
    old, strict = base.variants
    assert (old.name, old.variant, old.cluster.profile) == ("pair-old", "old", "kafka-0.8")
    assert old.cluster.config == {"min.insync.replicas": 1} and set(old.expect) == {"lost_writes"}
    assert strict.cluster.config == {"min.insync.replicas": 1, "unclean.leader.election.enable": False}
    assert [(p.acks, p.rate) for p in strict.producers] == [(1, 20)]
    assert set(strict.expect) == {"acknowledged"}, "a variant's expect replaces the base's"
    assert base.variant is None and base.cluster.profile == "kafka-2.7"


def test_a_mistake_in_a_variant_names_its_line_field_and_variant():
    with pytest.raises(ScenarioError) as info:
        parse_scenario(FILE.replace("    cluster: {profile: kafka-0.8}", "    cluster: {profile: kafka-9}"), "pair.yaml")
    assert (info.value.line, info.value.field) == (12, "cluster.profile")
    assert "(variant old)" in str(info.value)
    for bad, field in (("variants: []\n", "variants"), ("variants:\n  x: 3\n", "variants.x"),
                       ("variants:\n  x: {name: y}\n", "variants.x.name")):
        with pytest.raises(ScenarioError) as info:
            parse_scenario(FILE[:FILE.index("variants:")] + bad, "pair.yaml")
        assert info.value.field == field


def test_set_overrides_the_base_and_every_variant():
    base = parse_scenario(FILE, "pair.yaml", ("cluster.config.min.insync.replicas=2", "workload.producers.0.rate=7",
                                              "duration=5s"))
    for scenario in (base, *base.variants):
        assert scenario.cluster.config["min.insync.replicas"] == 2 and scenario.producers[0].rate == 7
        assert scenario.duration_ms == 5000
    for bad in ("nokey", "workload.producers.9.rate=1", "duration.x=1"):
        with pytest.raises(ScenarioError) as info:
            parse_scenario(FILE, "pair.yaml", (bad,))
        assert info.value.field == "--set"


def isrlab(*args):
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_every_variant_runs_on_the_same_seed_side_by_side(tmp_path):
    path = tmp_path / "pair.yaml"
    path.write_text(FILE)
    both = isrlab("run", str(path), "--out", str(tmp_path / "o"), "--no-plot")
    assert both.returncode == 0, both.stdout + both.stderr
    header = next(line for line in both.stdout.splitlines() if line.split() == ["old", "strict"])
    assert header and "--variant strict --out" in both.stdout
    old = json.loads((tmp_path / "o" / "old" / "verdict.json").read_text())
    assert old["run_id"] == "pair-old-seed1"
    one = isrlab("run", str(path), "--variant", "strict", "--out", str(tmp_path / "s"), "--no-plot")
    assert one.returncode == 0 and "replay:" in one.stdout and "--variant strict" in one.stdout
    unknown = isrlab("run", str(path), "--variant", "new")
    assert unknown.returncode == 2 and "its variants: old, strict" in unknown.stderr
    failing = isrlab("run", str(path), "--set", "expect.lost_writes=>0", "--out", str(tmp_path / "f"), "--no-plot")
    assert failing.returncode == 1, "old expects lost_writes > 0 now, and loses nothing"
    old_line = next(line for line in failing.stdout.splitlines() if line.split()[:2] == ["old", "FAIL"])
    assert "lost_writes expected > 0 got 0" in old_line
    assert "--set 'expect.lost_writes=>0'" in failing.stdout, "the replay command carries the override"


@pytest.mark.slow
def test_a_sweep_runs_every_variant(tmp_path):
    path = tmp_path / "pair.yaml"
    path.write_text(FILE)
    result = isrlab("run", str(path), "--seeds", "1-2", "--out", str(tmp_path / "w"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== variant old" in result.stdout and "== variant strict" in result.stdout
    for variant in ("old", "strict"):
        rows = json.loads((tmp_path / "w" / variant / "summary.json").read_text())
        assert [r["seed"] for r in rows] == [1, 2] and all(f"--variant {variant}" in r["replay"] for r in rows)
    every = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert [(r["variant"], r["seed"]) for r in every] == [("old", 1), ("old", 2), ("strict", 1), ("strict", 2)]
    table = result.stdout.split("== every variant, median over the seeds")[1].splitlines()
    assert table[1].split() == ["old", "strict"] and table[2].split() == ["seeds", "passed", "2/2", "2/2"]
