"""How the dense feature column should reach the Python workers: an A/B of the conversion's input.

The conversion (``sparkml.data.training_data.TrainingData.prepare``) sends each partition's rows to a Python
worker through ``mapInArrow`` and turns them into one numpy block. Two ways to ship a ``VectorUDT`` column:

* ``vector_to_array``: ``pyspark.ml.functions.vector_to_array(features, dtype)``, a list<float> column
  (what the library uses for dense input); the worker reshapes the flat values;
* ``raw struct``: the column as it is stored, the UDT's struct (type, size, indices, values; what the
  library uses for sparse input); the worker reshapes the ``values`` field of dense rows;
* ``unwrapped values``: ``unwrap_udt(features).values`` cast to list<float>, the dense rows' values with no
  UDF. It is no conversion on its own: a sparse row in the column brings only its nonzeros;
* ``unwrapped fields``: the struct's four fields as four top-level columns (what the values would need
  beside them to expand such rows).

Each is run at every ``--batch-sizes`` value of ``spark.sql.execution.arrow.maxRecordsPerBatch`` (Spark's
default 10,000), as a bare ``mapInArrow`` that builds the float32 block and counts its rows, next to
``label only`` (the same job shipping one double per row: the job's fixed cost) and the library's whole
conversion (``TrainingData.prepare``, float32 blocks: validation, statistics and block files included). All
in one session after a warm-up pass of each, best of ``--repeats``.

    .venv/bin/python benchmarks/bench_conversion.py                  # 1M x 100, 4 partitions
    .venv/bin/python benchmarks/bench_conversion.py --rows 100000    # a smoke run

Writes benchmarks/results/conversion.json (or ``--out``).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import report
from bench_linear import add_data_args, start

BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_args(p, "conversion", repeats=3)
    p.add_argument("--batch-sizes", default="10000,100000", help="Arrow records per batch, comma-separated")
    args = p.parse_args(argv)
    args.batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    args.reg_param = None
    return args


def _blocks_from_lists(batches):
    import pyarrow as pa

    rows = 0
    for batch in batches:
        col = batch.column("x")
        x = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), -1).astype(np.float32)
        rows += len(x)
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def _blocks_from_structs(batches):
    import pyarrow as pa

    rows = 0
    for batch in batches:
        col = batch.column("x")
        x = col.field("values").flatten().to_numpy(zero_copy_only=False).reshape(len(col), -1).astype(np.float32)
        rows += len(x)
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def _count(batches):
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})


def variants(df):
    """{name: () -> rows}: one conversion pass each."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    from sparkml.data.training_data import TrainingData

    def bare(column, fn):
        selected = df.select(column.alias("x"))
        return lambda: sum(r[0] for r in selected.mapInArrow(fn, "rows long").collect())

    def fields():
        u = F.unwrap_udt(feats)
        selected = df.select(
            u["type"].alias("t"), u["size"].alias("s"), u["indices"].alias("i"), u["values"].alias("x")
        )
        return lambda: sum(r[0] for r in selected.mapInArrow(_blocks_from_lists, "rows long").collect())

    def library():
        data = TrainingData.prepare(df, "features", "label", None, "float32")
        rows = data.summary.rows
        data.release()
        return rows

    feats = F.col("features")
    return {
        "label only": bare(F.col("label"), _count),
        "vector_to_array": bare(vector_to_array(feats, "float32"), _blocks_from_lists),
        "raw struct": bare(feats, _blocks_from_structs),
        "unwrapped values": bare(F.unwrap_udt(feats)["values"].cast("array<float>"), _blocks_from_lists),
        "unwrapped fields": fields(),
        "library (TrainingData.prepare)": library,
    }


def main(argv=None):
    args = parse_args(argv)
    spark, env, df, gen_s = start(args)
    runs = variants(df)
    rows = []
    for batch in args.batch_sizes:
        spark.conf.set(BATCH_KEY, str(batch))
        for name, run in runs.items():
            assert run() == args.rows  # warm-up, and the rows all arrive
            seconds = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - t)
            rows.append(
                {
                    "batch_rows": batch,
                    "variant": name,
                    "best_s": min(seconds),
                    "runs_s": seconds,
                    "mb_per_s": args.rows * args.features * 8 / 1e6 / min(seconds),
                }
            )
    spark.conf.unset(BATCH_KEY)
    spark.stop()
    title = (
        f"Conversion input of a cached {args.rows:,} x {args.features} DataFrame ({args.partitions} partitions), "
        f"best of {args.repeats}"
    )
    table = "| Arrow batch rows | variant | seconds | MB/s (float64 features) |\n|---|---|---|---|\n" + "\n".join(
        f"| {row['batch_rows']:,} | {row['variant']} | {row['best_s']:.2f} | {row['mb_per_s']:.0f} |" for row in rows
    )
    out = args.out or os.path.join(report.RESULTS, "conversion.json")
    report.write(out, title, table, {"environment": env, "generation_s": gen_s, "rows": rows})


if __name__ == "__main__":
    main()
