"""What one sweep task writes (a Parquet part file per table) or hands Spark (its rows,
without pyarrow), the tables both make, and a simulation that raises inside a task."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scenarios.model import ProducerWorkload
from scenarios.parse import parse_scenario
from spark_reports.load import read_sweep
from spark_reports.executor import run_task, task_rows
from spark_reports.parts import partition_path, read_part, write_parts
from spark_reports.schemas import MANIFEST_FILE, PARTITION_COLUMNS, TABLES
from spark_reports.sweep import Config, plan_configs, run_sweep
from tests.spark_reports.conftest import JEPSEN, ROOT


def _comparable(row) -> str:
    """A row as text, its maps' entries in key order (a map keeps no order of its own)."""
    return repr(tuple(sorted(v.items()) if isinstance(v, dict) else v for v in row))


def _unclean():
    return plan_configs(str(JEPSEN), "unclean", ())


def test_a_tasks_part_files_hold_exactly_the_rows_of_its_runs(tmp_path):
    """Seed 1 of jepsen-2013 unclean with every trace kept: each table's part file, in its
    partition's folder, holds the very tuples spark_reports.rows built, less the
    partition columns (maps, arrays and nulls included)."""
    configs = _unclean()
    pairs = list(run_task(configs, "all", (0, (1,))))
    expected = {name: [row for table, row in pairs if table == name] for name in TABLES}
    assert all(expected[name] for name in TABLES)  # the run has rows in every table
    written = write_parts(pairs, tmp_path, 7, "sweep-id")
    assert [name for name, _, _ in written] == list(TABLES)  # one file per table
    for name, path, rows in written:
        assert path == f"{name}/scenario=jepsen-2013/config=unclean/part-00007-sweep-id.c000.snappy.parquet"
        assert rows == len(expected[name])
        data = [i for i, column in enumerate(TABLES[name].fieldNames()) if column not in PARTITION_COLUMNS]
        assert read_part(tmp_path / path) == [tuple(row[i] for i in data) for row in expected[name]], name
    # the round trip is tested on nulls, maps and arrays, not only on plain values
    assert any(None in row for row in expected["cluster_events"])
    assert any(isinstance(value, dict) and value for value in expected["verdicts"][0])
    assert any(isinstance(value, list) and value for row in expected["cluster_events"] for value in row)
    # a task that Spark runs again replaces its own files, and leaves no scratch file
    write_parts(pairs, tmp_path, 7, "sweep-id")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(
        path for _, path, _ in written)


def test_rows_of_two_partitions_in_one_task_are_refused(tmp_path):
    """A task runs one configuration; rows of two in one part would land in the wrong folder."""
    pairs = list(run_task(_unclean(), "none", (0, (1,))))
    other = [(table, ("jepsen-2013", "other", *row[2:])) for table, row in pairs if table == "verdicts"]
    with pytest.raises(ValueError, match="more than one partition"):
        write_parts(pairs + other, tmp_path, 0, "x")


def test_a_task_without_runs_writes_and_hands_nothing(tmp_path):
    pairs = [("errors", ("c", 1, "boom", "replay"))]
    assert task_rows(pairs) == []
    assert write_parts(pairs, tmp_path, 0, "x") == [] and list(tmp_path.iterdir()) == []


def test_a_partitions_folder_is_named_as_sparks_writer_names_it(spark):
    """Spark's own escaping (ExternalCatalogUtils.escapePathName, what its writer names
    partition folders with and its readers undo), character by character: a grid's
    label holds '=' and '|', a scenario's name could hold anything."""
    escape = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.escapePathName
    text = "".join(map(chr, range(1, 0x250))) + "safe|cluster.config.min.insync.replicas=1;a=b"
    assert str(partition_path(("jepsen-2013", text))) == f"scenario=jepsen-2013/config={escape(text)}"
    assert str(partition_path(("s/x", "c"))) == f"scenario={escape('s/x')}/config=c"


@pytest.mark.slow
def test_the_tables_the_tasks_write_equal_those_spark_writes(spark, tmp_path):
    """Two seeds with every trace kept, once written by the tasks with pyarrow and once by
    Spark from their rows (the path of executors without pyarrow): the same rows and the
    same partition folders in every table, and read back
    without a schema (from the Parquet files themselves) the columns and types of
    spark_reports.schemas, the partition columns last."""
    written = {}
    for arrow in (True, False):
        out = tmp_path / f"arrow-{arrow}"
        result = run_sweep(spark, str(JEPSEN), [1, 2], out, variant="unclean", keep="all", arrow=arrow)
        assert result.runs == 2 and result.errors == []
        written[arrow] = out
    for name, schema in TABLES.items():
        frames = [spark.read.parquet(str(written[arrow] / name)) for arrow in (True, False)]
        data = [(f.name, f.dataType) for f in schema.fields if f.name not in PARTITION_COLUMNS]
        for frame in frames:
            assert [(f.name, f.dataType) for f in frame.schema.fields] == data + [
                (c, schema[c].dataType) for c in PARTITION_COLUMNS], name
        rows = [sorted(map(_comparable, frame.collect())) for frame in frames]
        assert rows[0] == rows[1] and rows[0], name
        folders = [sorted(str(p.relative_to(written[arrow])) for p in (written[arrow] / name).rglob("*")
                          if p.is_dir() or p.name == "_SUCCESS") for arrow in (True, False)]
        assert folders[0] == folders[1], name
    tables = read_sweep(spark, written[True])
    events = tables["traces"].where("seed = 2").count()
    assert events == tables["verdicts"].where("seed = 2").first()["events"]


def test_a_simulation_that_raises_in_a_task_is_listed_and_the_sweep_goes_on(spark, tmp_path):
    """A scenario the parser would have refused (a producer for a topic that does not
    exist), handed to the sweep as planned: the world raises inside the Spark task. The
    sweep still writes every other run, and lists the raising ones (seed, message,
    replay command) in its result and manifest, never as verdicts."""
    good = _unclean()[0]
    scenario = parse_scenario("cluster: {brokers: 1, topics: [{name: t}]}\nduration: 2s\n", "boom.yaml")
    broken_scenario = replace(scenario, producers=(ProducerWorkload("no-such-topic"),))
    broken = Config("broken", None, "", (), broken_scenario, ("isrlab run boom.yaml", ""))
    out = tmp_path / "raising"
    states: list[dict] = []
    result = run_sweep(spark, str(JEPSEN.relative_to(ROOT)), [1, 2], out, configs=[good, broken],
                       progress=states.append)
    assert result.runs == 4 and result.failures == []
    # the progress counts this sweep's simulating tasks only, and the raising runs as failures
    assert states[-1]["tasks_done"] == states[-1]["tasks"] == result.tasks
    assert (states[-1]["runs"], states[-1]["failures"]) == (4, 2)
    assert [s["runs"] for s in states] == sorted(s["runs"] for s in states)
    assert [(e["config"], e["seed"], e["replay"]) for e in result.errors] == [
        ("broken", 1, "isrlab run boom.yaml --seed 1"), ("broken", 2, "isrlab run boom.yaml --seed 2")]
    assert all("no-such-topic" in e["message"] and "seed" in e["message"] for e in result.errors)
    assert json.loads((out / MANIFEST_FILE).read_text())["errors"] == result.errors
    verdicts = read_sweep(spark, out)["verdicts"].select("config", "seed").collect()
    assert sorted((r["config"], r["seed"]) for r in verdicts) == [("unclean", 1), ("unclean", 2)]
