"""Reads the local stack's Iceberg tables without Spark, for scripts/demo's checks: several requests
in one start (a Python start with PyIceberg takes seconds on a loaded machine).
Usage: read_lake.py <lake home> <request>...
  rows:<namespace>.<table>[@<snapshot id>]   the rows (PyIceberg), at a snapshot if given
  duckdb:<namespace>.<table>                 the rows (DuckDB's iceberg_scan of the current metadata)
  snapshots:<namespace>.<table>              the table's snapshot ids, oldest first
Prints one JSON line per request, in order: a list of rows (objects) or of snapshot ids."""
import glob
import importlib
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog

lake_home, requests = sys.argv[1], sys.argv[2:]
catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
duck = None


def duckdb_connection():
    global duck
    if duck is None:
        import duckdb

        # DuckDB cannot download extensions here: load the pinned wheels' files (iceberg needs avro).
        duck = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
        for name in ("avro", "iceberg"):
            pkg = os.path.dirname(importlib.import_module(f"duckdb_extension_{name}").__file__)
            duck.execute(f"LOAD '{glob.glob(f'{pkg}/extensions/*/{name}.duckdb_extension')[0]}'")
    return duck


for request in requests:
    what, _, target = request.partition(":")
    name, _, snapshot = target.partition("@")
    namespace, _, table = name.partition(".")
    loaded = catalog.load_table((namespace, table))
    if what == "rows":
        scan = loaded.scan(snapshot_id=int(snapshot)) if snapshot else loaded.scan()
        out = scan.to_arrow().to_pylist()
    elif what == "snapshots":
        out = [str(s.snapshot_id) for s in sorted(loaded.snapshots(), key=lambda s: s.timestamp_ms)]
    elif what == "duckdb":
        cur = duckdb_connection().execute("SELECT * FROM iceberg_scan(?)", [loaded.metadata_location])
        names = [d[0] for d in cur.description]
        out = [dict(zip(names, row)) for row in cur.fetchall()]
    else:
        sys.exit(f"unknown request {request}")
    print(json.dumps(out, default=str, sort_keys=True))
