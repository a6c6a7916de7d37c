"""Reads an Iceberg table of the local stack with PyIceberg (a second engine, no Spark).
Usage: read_iceberg.py <catalog> <namespace> <table>          rows as JSON lines
       read_iceberg.py <catalog> <namespace> <table> summary  the current snapshot's summary as JSON
<catalog> is the lake home (the JDBC catalog "lake": its SQLite file) or the http:// URI of the
stack's Iceberg REST catalog (scripts/iceberg-rest), read through the REST protocol."""
import json
import sys

lake_home, namespace, table = sys.argv[1:4]
if lake_home.startswith(("http://", "https://")):
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("rest", uri=lake_home)
else:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
loaded = catalog.load_table((namespace, table))
if len(sys.argv) > 4 and sys.argv[4] == "summary":
    snapshot = loaded.current_snapshot()
    print(json.dumps({"snapshot_id": str(snapshot.snapshot_id), **snapshot.summary.additional_properties}))
else:
    for row in loaded.scan().to_arrow().to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
