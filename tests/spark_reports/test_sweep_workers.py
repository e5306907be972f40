"""A sweep's Python workers: a pool of their own (spark_reports.executor's worker_pool),
so that a worker another job left with the interpreted simulation imported never runs
a sweep that switches to the compiled build."""
from __future__ import annotations

import os
import uuid
from functools import partial

from spark_reports.executor import POOL_ENV, pool_name, worker_pool


def test_a_pools_functions_run_in_workers_of_one_daemon_apart_from_other_jobs(spark):
    """A fresh pool (a setup of its own): every worker of its functions is forked from
    one PySpark daemon, which no function wrapped outside the block uses."""
    sc = spark.sparkContext
    setup = partial(os.environ.get, f"ISRLAB_TEST_{uuid.uuid4().hex}")  # harmless, and a pool of its own

    def parent(_):  # nested: pickled by value, so the worker imports no test module
        import os
        return os.getppid(), os.environ.get("ISRLAB_SWEEP_WORKERS")

    with worker_pool(sc, setup):
        inside = set(sc.parallelize([0, 1, 2, 3], 2).map(parent).collect())
    elsewhere = set(sc.parallelize([0, 1, 2, 3], 2).map(parent).collect())
    assert len({ppid for ppid, _ in inside}) == 1, inside
    assert {pool for _, pool in inside} == {pool_name(setup)}
    assert {ppid for ppid, _ in elsewhere}.isdisjoint({ppid for ppid, _ in inside}), (inside, elsewhere)
    assert POOL_ENV not in sc.environment  # the pool's variables are the block's only
