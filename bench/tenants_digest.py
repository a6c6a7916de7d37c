"""bench/tenants: what a run left in its tables, read by the second engines (PyIceberg for Iceberg,
delta-rs for Delta, pyarrow for a parquet folder), never by Spark. Prints one JSON object: per
table its rows, a digest of its rows (each row's values in column order, the rows sorted) and one
digest per column (so that a difference names its columns). Columns that carry the time of the run
(given with --volatile) are left out: two runs of the same job at different times differ there
and nowhere else.

Usage: tenants_digest.py <lake home> --volatile c1,c2 <kind>:<where> ...
  iceberg:<namespace>.<table>   a table of the catalog "lake" (the lake home's SQLite file)
  delta:<path>                  a Delta table's folder
  parquet:<path>                a folder of parquet files (hive-style partitions)
"""
import hashlib
import json
import os
import sys

import pyarrow as pa


def rows_of(table: pa.Table, volatile: set[str]) -> tuple[list[str], list[list[str]]]:
    cols = sorted(c for c in table.column_names if c not in volatile)
    data = [table.column(c).to_pylist() for c in cols]
    return cols, [[json.dumps(v, sort_keys=True, default=str) for v in col] for col in data]


def digest(table: pa.Table, volatile: set[str]) -> dict:
    cols, data = rows_of(table, volatile)
    rows = sorted("\x1f".join(values) for values in zip(*data)) if cols else []
    whole = hashlib.sha256("\x1e".join(rows).encode()).hexdigest()[:16]
    per_column = {c: hashlib.sha256("\x1e".join(sorted(v)).encode()).hexdigest()[:16] for c, v in zip(cols, data)}
    return {"rows": table.num_rows, "digest": whole, "columns": per_column}


def main() -> int:
    lake_home = sys.argv[1]
    args = sys.argv[2:]
    volatile: set[str] = set()
    if args[:1] == ["--volatile"]:
        volatile = {c for c in args[1].split(",") if c}
        args = args[2:]
    catalog = None
    out = {}
    for spec in args:
        kind, where = spec.split(":", 1)
        if kind == "iceberg":
            if catalog is None:
                from pyiceberg.catalog.sql import SqlCatalog

                catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
            namespace, table = where.split(".", 1)
            t = catalog.load_table((namespace, table)).scan().to_arrow()
        elif kind == "delta":
            from deltalake import DeltaTable

            t = DeltaTable(where.removeprefix("file://")).to_pyarrow_table()
        elif kind == "parquet":
            import pyarrow.dataset as ds

            t = ds.dataset(where.removeprefix("file://"), format="parquet", partitioning="hive").to_table()
        else:
            raise SystemExit(f"unknown kind {kind}")
        out[spec] = digest(t, volatile)
    print(json.dumps(out, sort_keys=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    main()
    # delta-rs' runtime threads can abort the interpreter at shutdown (as test/support/read_delta.py
    # knows); the output is complete here.
    os._exit(0)
