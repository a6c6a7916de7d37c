"""Reads an Iceberg table of the local stack with PyIceberg (a second engine, no Spark).
Usage: read_iceberg.py <lake-home> <namespace> <table>          rows as JSON lines
       read_iceberg.py <lake-home> <namespace> <table> summary  the current snapshot's summary as JSON"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog

lake_home, namespace, table = sys.argv[1:4]
catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
loaded = catalog.load_table((namespace, table))
if len(sys.argv) > 4 and sys.argv[4] == "summary":
    snapshot = loaded.current_snapshot()
    print(json.dumps({"snapshot_id": str(snapshot.snapshot_id), **snapshot.summary.additional_properties}))
else:
    for row in loaded.scan().to_arrow().to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
