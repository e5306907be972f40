"""``isrlab explore``: it finds the known loss of an unsafe configuration on its own,
shrinks it, and writes a file that ``isrlab run`` replays byte for byte; it finds none
in the safe configuration; bad input is a clear error (exit 2)."""
import hashlib
import re
from pathlib import Path

import pytest

from isrlab.cli import main
from scenarios.parse import load_scenario

ROOT = Path(__file__).resolve().parents[2]
JEPSEN = ROOT / "scenarios" / "library" / "jepsen-2013.yaml"
SAFE = """\
name: safe-base
cluster:
  brokers: 3
  profile: kafka-2.7
  config:
    min.insync.replicas: 2
    unclean.leader.election.enable: false
    log.flush.interval.messages: 1
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 100}]
  consumers: [{topic: t}]
duration: 45s
"""


def explore(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["explore", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_explore_finds_the_jepsen_loss_shrinks_it_and_the_written_file_replays_it(tmp_path, capsys):
    status, out, err = explore(capsys, str(JEPSEN), "--variant", "unclean", "--property", "lost_writes",
                               "--max-runs", "6", "--shrink-runs", "12", "--out", str(tmp_path / "x"))
    assert status == 1, out + err
    written = Path(re.search(r"written: +(\S+)", out).group(1))
    digest = re.search(r"sha256 ([0-9a-f]{64})", out).group(1)
    seed = int(re.search(r"found: seed (\d+)", out).group(1))
    text = written.read_text(encoding="utf-8")
    assert text.startswith("# Found by isrlab explore: a run that violates lost_writes.")
    assert f"seed {seed}" in text and "Shrunk in" in text
    found, first = load_scenario(written), load_scenario(tmp_path / "x" / "first-violation.yaml")
    assert found.expect["lost_writes"] is not None and not found.variants
    assert (len(found.faults), found.producers[0].rate, found.duration_ms) < (
        len(first.faults), first.producers[0].rate, first.duration_ms) or len(found.faults) < len(first.faults)
    assert "explore:" in err and "shrink:" in err
    # the replay: isrlab run of the written file, the same seed: the same trace, and it passes (expects the loss)
    replay = tmp_path / "replay"
    assert main(["run", str(written), "--seed", str(seed), "--out", str(replay), "--no-plot"]) == 0
    assert hashlib.sha256((replay / "trace.jsonl").read_bytes()).hexdigest() == digest


@pytest.mark.slow
def test_explore_finds_nothing_in_the_safe_configuration(tmp_path, capsys):
    base = tmp_path / "safe.yaml"
    base.write_text(SAFE, encoding="utf-8")
    status, out, err = explore(capsys, str(base), "--property", "lost_writes", "--max-runs", "3",
                               "--out", str(tmp_path / "x"))
    assert status == 0, out + err
    assert "no violation of lost_writes in 3 runs" in out
    assert not list((tmp_path / "x").glob("*.yaml"))


def test_an_unknown_property_is_refused_with_the_known_ones(tmp_path, capsys):
    status, out, err = explore(capsys, str(JEPSEN), "--variant", "unclean", "--property", "lost_write",
                               "--out", str(tmp_path))
    assert status == 2
    assert "--property lost_write: unknown property; known: lost_writes, lost_writes_acks_all" in err


@pytest.mark.parametrize("argv, words", [
    ([str(JEPSEN)], "has variants (unclean, safe): name the one to explore around with --variant"),
    ([str(JEPSEN), "--variant", "risky"], "--variant risky: no such variant"),
    (["nothere.yaml"], "nothere.yaml: cannot read the file"),
])
def test_a_bad_base_is_a_clear_error(tmp_path, capsys, argv, words):
    status, out, err = explore(capsys, *argv, "--property", "lost_writes", "--out", str(tmp_path))
    assert status == 2
    assert words in err


def test_a_bad_swarm_block_in_the_base_names_its_line_and_field(tmp_path, capsys):
    base = tmp_path / "b.yaml"
    base.write_text(SAFE + "swarm:\n  faults: [crash, meteor]\n", encoding="utf-8")
    status, out, err = explore(capsys, str(base), "--property", "lost_writes", "--out", str(tmp_path / "x"))
    assert status == 2
    assert f"{base}:15: swarm.faults[1]: unknown fault kind 'meteor'" in err


def test_a_base_without_producers_and_a_budget_without_a_unit_are_refused(tmp_path, capsys):
    base = tmp_path / "idle.yaml"
    base.write_text(SAFE.replace("  producers: [{topic: t, acks: all, rate: 100}]\n", ""), encoding="utf-8")
    status, _, err = explore(capsys, str(base), "--property", "lost_writes", "--out", str(tmp_path / "x"))
    assert status == 2 and "the base has no producers" in err
    with pytest.raises(SystemExit):
        main(["explore", str(base), "--property", "lost_writes", "--budget", "60"])
    assert "60 needs a unit" in capsys.readouterr().err



def test_a_partition_is_drawn_on_a_one_broker_base(tmp_path):
    """A partition needs two sides: with one broker the draw asked for a cut in an empty
    range (ValueError in randint) and crashed the search. Each seed's drawn file must
    load (drawn_scenario parses what it writes), and a partition cuts the broker off zk."""
    from scenarios.explore.draw import drawn_scenario, render
    from scenarios.explore.explorer import Options, base_document

    base = ROOT / "scenarios" / "library" / "single-broker-crash.yaml"
    document, _ = base_document(Options(base, "invariants", 60.0, tmp_path, variant="acks-all"))
    document["swarm"]["rate"] = [30, 30]  # faults a minute: many a run, so that partitions come up
    path = tmp_path / "base.yaml"
    path.write_text(render(document), encoding="utf-8")
    scenario = load_scenario(path)
    drawn = [drawn_scenario(scenario, seed)[1] for seed in range(1, 31)]
    partitions = [line for text in drawn for line in text.splitlines() if "partition: [[" in line]
    assert partitions, "no partition drawn in 30 seeds"
    assert all("[[1], [zk]]" in line for line in partitions), partitions
