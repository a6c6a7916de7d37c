"""The peer of bench/collect.ts: the same query through pyspark-client, timed in process.

    python peer_collect.py REMOTE toArrow|collect SQL

Prints one JSON line. The connection is set up (spark.version) before the clock starts, as in
collect.ts; the timed part is `spark.sql(SQL).toArrow()` or `.collect()`, exactly what a user calls.
The checksum (sum of column `a`) is computed after the clock stops.
"""
import json
import resource
import sys
import time

from pyspark.sql.connect.session import SparkSession


def main() -> None:
    remote, mode, sql = sys.argv[1:4]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    spark.version  # noqa: B018 - first RPC: channel and session set up outside the timed part
    c0 = time.process_time()
    t0 = time.perf_counter()
    if mode == "toArrow":
        table = spark.sql(sql).toArrow()
        ms = (time.perf_counter() - t0) * 1000
        cpu_ms = (time.process_time() - c0) * 1000
        import pyarrow.compute as pc

        rows, cols = table.num_rows, table.num_columns
        sum_a = pc.sum(table["a"]).as_py() or 0
    elif mode == "collect":
        result = spark.sql(sql).collect()
        ms = (time.perf_counter() - t0) * 1000
        cpu_ms = (time.process_time() - c0) * 1000
        rows = len(result)
        cols = len(result[0]) if result else 0
        sum_a = sum(r["a"] for r in result)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps({
        "rows": rows,
        "cols": cols,
        "sumA": str(sum_a),
        "ms": ms,
        "cpuMs": cpu_ms,  # CPU time of this process (all threads) during the collect
        "maxRssKb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))


if __name__ == "__main__":
    main()
