"""A sweep's Python workers: one pool for the tasks' functions and the writes'
mapInArrow alike (spark_reports.executor's worker_pool), so that the writes reuse the
simulations' idle workers instead of starting a pool of their own."""
from __future__ import annotations

import os
import uuid
from functools import partial

from spark_reports.executor import worker_pool


def test_a_pools_rdd_functions_and_its_mapinarrow_run_in_workers_of_one_daemon(spark):
    """A fresh pool (a setup of its own) for an RDD's function and a DataFrame's
    mapInArrow: every worker is forked from the same PySpark daemon. Outside the pool,
    the same mapInArrow runs in another pool's workers (the test can tell them apart)."""
    sc = spark.sparkContext
    setup = partial(os.environ.get, f"ISRLAB_TEST_{uuid.uuid4().hex}")  # harmless, and a pool of its own

    def parent(_):  # nested: pickled by value, so the worker imports no test module
        import os
        return os.getppid()

    def parent_batches(batches):
        import os

        import pyarrow as pa
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"ppid": [os.getppid()]})

    with worker_pool(sc, setup):
        rdd_parents = set(sc.parallelize([0, 1], 2).map(parent).collect())
        sql_parents = {row.ppid for row in spark.range(0, 4, 1, 2).mapInArrow(parent_batches, "ppid long").collect()}
    elsewhere = {row.ppid for row in spark.range(0, 4, 1, 2).mapInArrow(parent_batches, "ppid long").collect()}
    assert len(rdd_parents) == 1 and sql_parents == rdd_parents, (rdd_parents, sql_parents)
    assert elsewhere.isdisjoint(rdd_parents), elsewhere
    assert "ISRLAB_SWEEP_WORKERS" not in sc.environment  # the pool's variables are the block's only
