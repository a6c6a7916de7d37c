"""Reads an Iceberg table of the local stack with PyIceberg (a second engine, no Spark).
Usage: read_iceberg.py <catalog> <namespace> <table>          rows as JSON lines
       read_iceberg.py <catalog> <namespace> <table> summary  the current snapshot's summary as JSON
       read_iceberg.py <catalog> <namespace> <t1>,<t2>,...    one JSON object: each table's rows (one start for many;
                                                              <ns>.<t> names a table of another namespace)
       read_iceberg.py <catalog> <namespace> <t1>,<t2>,... shape  each table's partition spec and properties
<catalog> is the lake home (the JDBC catalog "lake": its SQLite file) or the http:// URI of the
stack's Iceberg REST catalog (scripts/iceberg-rest), read through the REST protocol.
Tables on the object store (s3a:// or s3:// locations) are read through pyarrow's S3 client, from
LAKEHOUSE_S3_ENDPOINT with the key in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY."""
import json
import os
import sys

lake_home, namespace, table = sys.argv[1:4]
# PyIceberg's FileIO for s3:// and s3a:// (path-style requests: a local store has no bucket host names).
s3 = (
    {
        "s3.endpoint": os.environ["LAKEHOUSE_S3_ENDPOINT"],
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": "us-east-1",
    }
    if os.environ.get("LAKEHOUSE_S3_ENDPOINT")
    else {}
)
if lake_home.startswith(("http://", "https://")):
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("rest", uri=lake_home, **s3)
else:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse", **s3)
if len(sys.argv) > 4 and sys.argv[4] == "shape":
    out = {}
    for t in table.split(","):
        loaded = catalog.load_table((namespace, t))
        spec = [{"column": loaded.schema().find_column_name(f.source_id), "transform": str(f.transform)} for f in loaded.spec().fields]
        out[t] = {"spec": spec, "properties": dict(loaded.properties), "formatVersion": loaded.metadata.format_version}
    print(json.dumps(out, sort_keys=True))
    sys.exit(0)
if "," in table:
    # A name with a dot is of its own namespace (<namespace>.<table>): tables of several layers in one start.
    rows = {t: catalog.load_table(tuple(t.split(".", 1)) if "." in t else (namespace, t)).scan().to_arrow().to_pylist() for t in table.split(",")}
    print(json.dumps(rows, default=str, sort_keys=True))
    sys.exit(0)
loaded = catalog.load_table((namespace, table))
if len(sys.argv) > 4 and sys.argv[4] == "summary":
    snapshot = loaded.current_snapshot()
    print(json.dumps({"snapshot_id": str(snapshot.snapshot_id), "timestamp_ms": str(snapshot.timestamp_ms), **snapshot.summary.additional_properties}))
else:
    for row in loaded.scan().to_arrow().to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
