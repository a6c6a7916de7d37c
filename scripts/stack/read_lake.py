"""Reads the local stack's Iceberg tables without Spark, for scripts/demo's checks.
Usage: read_lake.py <lake home> rows <namespace> <table> [<snapshot id>]   rows as JSON lines (PyIceberg)
       read_lake.py <lake home> duckdb <namespace> <table>                 rows as JSON lines (DuckDB's iceberg_scan)
       read_lake.py <lake home> snapshots <namespace> <table>              the table's snapshot ids, oldest first"""
import glob
import importlib
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog

lake_home, what, namespace, table = sys.argv[1:5]
catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
loaded = catalog.load_table((namespace, table))
if what == "rows":
    scan = loaded.scan(snapshot_id=int(sys.argv[5])) if len(sys.argv) > 5 else loaded.scan()
    for row in scan.to_arrow().to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
elif what == "snapshots":
    print(json.dumps([str(s.snapshot_id) for s in sorted(loaded.snapshots(), key=lambda s: s.timestamp_ms)]))
elif what == "duckdb":
    import duckdb

    # DuckDB cannot download extensions here: load the pinned wheels' files (iceberg needs avro).
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in ("avro", "iceberg"):
        pkg = os.path.dirname(importlib.import_module(f"duckdb_extension_{name}").__file__)
        con.execute(f"LOAD '{glob.glob(f'{pkg}/extensions/*/{name}.duckdb_extension')[0]}'")
    cur = con.execute("SELECT * FROM iceberg_scan(?)", [loaded.metadata_location])
    names = [d[0] for d in cur.description]
    for row in cur.fetchall():
        print(json.dumps(dict(zip(names, row)), default=str, sort_keys=True))
else:
    sys.exit(f"unknown request {what}")
