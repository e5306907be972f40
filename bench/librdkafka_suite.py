"""librdkafka's own integration tests against isrlab's real broker (issue 24).

    .venv/bin/python bench/librdkafka_suite.py [--dir runs/librdkafka] [--brokers 1|3]
        [--tests 0001,0012,...] [--timeout 300] [--timeout-multiplier 2] [--jobs 2]
        [--config KEY=VALUE ...] [--prepare-only]

Gets librdkafka's source from Debian's source package (bench/librdkafka_source.py: a
deb-src entry is added from the machine's own apt entries when none exists), builds the
library and its test-runner once (`./configure`, `make libs`, `make -C tests build`),
starts `isrlab serve` on 127.0.0.1 (one broker on its embedded store, or with
`--brokers 3` a local cluster on ZooKeeper, real_io/cluster.py), writes test.conf and
runs the chosen tests one number at a time (`TESTS=<nnnn> ./test-runner -p1 -L` with
`TEST_KAFKA_VERSION=2.7.0`, bench/librdkafka_tests.py), each run bounded by `--timeout`.
Tests of the `noautocreate` scenario get a broker of their own with
`auto.create.topics.enable=false`. A broker found dead before a run is restarted, and the
run says so. Everything started is stopped at the end, also on Ctrl-C.

Writes DIR/results/results.md (the table: test, state, seconds, first failure line),
DIR/results/results.json and one log per run (DIR/results/logs/). How to read them:
docs/librdkafka-suite.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

import librdkafka_source as source  # noqa: E402
import librdkafka_tests as suite  # noqa: E402
from real_io.broker_process import BrokerProcess  # noqa: E402
from real_io.ports import free_port  # noqa: E402
from real_io.cluster import LocalCluster  # noqa: E402

KAFKA_VERSION = "2.7.0"
# The broker as librdkafka's test clusters (trivup) run it: topics auto-created with 4
# partitions; the offsets topic replicated as far as the cluster allows.
BASE_CONFIG = {"num.partitions": 4}
READY_TIMEOUT_S = 90.0


class Brokers:
    """One `isrlab serve` (embedded store) or a local cluster of N, on 127.0.0.1."""

    def __init__(self, directory: Path, count: int, config: dict):
        self.directory, self.count, self.config = directory, count, dict(config)
        self.config.setdefault("offsets.topic.replication.factor", min(count, 3))
        self.process: BrokerProcess | None = None
        self.cluster: LocalCluster | None = None
        self.restarts = 0

    def start(self) -> str:
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        if self.count == 1:
            self.process = BrokerProcess(1, self.directory / "data", free_port(), self.directory / "trace.jsonl",
                                         self.config, time.monotonic(), self.directory / "stderr.log")
            self.process.start()
            if not self.process.wait_ready(READY_TIMEOUT_S):
                raise SystemExit(f"isrlab serve did not listen: {self.process.last_words()}")
            return self.process.bootstrap
        self.cluster = LocalCluster(self.directory, brokers=self.count, config=self.config)
        self.cluster.start()
        return self.cluster.bootstrap

    def ensure_alive(self) -> bool:
        """Restart brokers that died (a crash a test provoked); True if any was."""
        restarted = False
        if self.process is not None and not self.process.alive:
            self.process.start()
            restarted = self.process.wait_ready(READY_TIMEOUT_S) or True
        if self.cluster is not None:
            for broker_id, state in self.cluster.states().items():
                if state == "down":
                    self.cluster.restart(broker_id)
                    restarted = True
        self.restarts += restarted
        return restarted

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(30.0)
        if self.cluster is not None:
            self.cluster.stop()


def run_scenario(runner: Path, scenario: str, planned: list, args, out: Path, results: list[suite.Outcome],
                 meta: dict) -> None:
    """Every planned run of one scenario against brokers of its own; ``results`` grows
    and the table is rewritten after each run (a long run can be read, or stopped, midway)."""
    config = {**BASE_CONFIG, **args.config}
    if scenario == "noautocreate":
        config["auto.create.topics.enable"] = False
    brokers = Brokers(out / f"brokers-{scenario}", args.brokers, config)
    try:
        bootstrap = brokers.start()
        conf = out / f"test-{scenario}.conf"
        suite.write_test_conf(conf, bootstrap, args.timeout_multiplier, {})
        for number, _, members in planned:
            note = " (a broker had died and was restarted first)" if brokers.ensure_alive() else ""
            log = out / "logs" / f"{number}-{scenario}.log"
            print(f"{number} [{scenario}] {', '.join(test.name for test in members)} ...", end="", flush=True)
            found = suite.run_number(runner, number, scenario, members, conf, log, args.timeout, KAFKA_VERSION)
            for outcome in found:
                outcome.brokers = args.brokers
                outcome.first_failure += note if outcome.state != "PASSED" else ""
            print(" " + ", ".join(f"{o.state} {o.seconds:.1f}s" for o in found), flush=True)
            results += found
            write_table(results, out, meta)
    finally:
        brokers.stop()


def write_table(results: list[suite.Outcome], out: Path, meta: dict) -> None:
    tally = suite.Tally()
    for outcome in results:
        tally.add(outcome)
    lines = [f"librdkafka {meta['librdkafka']} tests against isrlab serve ({meta['brokers']} broker(s)), "
             f"{meta['date']}, TEST_KAFKA_VERSION={KAFKA_VERSION}", "",
             "Counts: " + ", ".join(f"{state} {count}" for state, count in sorted(tally.counts.items())), "",
             "| test | scenario | state | seconds | first failure line |", "| --- | --- | --- | ---: | --- |"]
    for o in results:
        lines.append(f"| {o.name} | {o.scenario} | {o.state} | {o.seconds:.1f} | {o.first_failure} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps({**meta, "counts": tally.counts,
                                                  "results": [o.__dict__ for o in results]}, indent=1))


def reparse(chosen: list, out: Path) -> int:
    """The table again from the logs of the last run (results.json says which ran)."""
    last = json.loads((out / "results.json").read_text())
    ran = {(o["name"], o["scenario"]): o for o in last["results"]}
    results: list[suite.Outcome] = []
    for number, scenario, members in suite.runs([t for t in chosen if (t.name, t.scenario) in ran]):
        log = out / "logs" / f"{number}-{scenario}.log"
        text = suite._ANSI.sub("", log.read_text(errors="replace"))
        elapsed = max(ran[(t.name, scenario)]["seconds"] for t in members)
        timed_out = any(ran[(t.name, scenario)]["state"] == "TIMEOUT" for t in members)
        results += suite.outcomes(text, members, scenario, elapsed, timed_out, str(log))
    meta = {key: last[key] for key in ("librdkafka", "brokers", "date", "config")}
    write_table(results, out, meta)
    print(f"results: {out / 'results.md'}")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=str(ROOT / "runs" / "librdkafka"),
                        help="where the source, the build, the brokers and the results go")
    parser.add_argument("--brokers", type=int, default=1, choices=(1, 3))
    parser.add_argument("--tests", default="", help="comma-separated numbers or names (default: every broker test)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one test number may run")
    parser.add_argument("--timeout-multiplier", type=float, default=2.0,
                        help="test.timeout.multiplier in test.conf (a shared, loaded machine)")
    parser.add_argument("--out", default=None, help="where the results go (default DIR/results)")
    parser.add_argument("--jobs", type=int, default=2, help="make -j")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for isrlab serve (repeatable)")
    parser.add_argument("--prepare-only", action="store_true", help="fetch and build, run nothing")
    parser.add_argument("--from-logs", action="store_true",
                        help="run nothing: rebuild the table from the last run's logs (after a change of the parser)")
    args = parser.parse_args(argv)
    args.config = dict(item.split("=", 1) for item in args.config)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(args.dir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))  # unwind: the finally blocks stop the brokers
    try:
        src = source.fetch_source(workdir, workdir / "fetch.log")
        runner = source.build(src, workdir / "build.log", args.jobs)
    except source.SourceError as error:
        print(f"librdkafka_suite: {error}", file=sys.stderr)
        return 2
    print(f"librdkafka {source.version(src)}: {runner}")
    if args.prepare_only:
        return 0
    chosen = suite.select(suite.list_tests(src), [t for t in args.tests.split(",") if t])
    out = Path(args.out).resolve() if args.out else workdir / "results"
    if args.from_logs:
        return reparse(chosen, out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    planned = suite.runs(chosen)
    results: list[suite.Outcome] = []
    meta = {"librdkafka": source.version(src), "brokers": args.brokers,
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "config": {**BASE_CONFIG, **args.config}}
    try:
        for scenario in dict.fromkeys(scenario for _, scenario, _ in planned):
            run_scenario(runner, scenario, [run for run in planned if run[1] == scenario], args, out, results, meta)
    finally:
        write_table(results, out, meta)
        print(f"results: {out / 'results.md'}")
    return 0 if all(o.state in ("PASSED", "SKIPPED") for o in results) else 1


if __name__ == "__main__":
    sys.exit(main())
